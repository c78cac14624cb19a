"""Unified diffs of text content, one format for write outputs and check-mode previews.

Invariant: every line of the diff ends with a newline, whatever the content's own line
endings, so a file without a trailing newline still diffs as separate ``-``/``+`` lines.
"""

from __future__ import annotations


def unified_diff(path: str, before: str | None, after: str) -> str:
    # Imported here: the coordinator imports this module for check-mode previews, and
    # difflib's import (~1.5 ms) is then paid by every run, previewed or not.
    import difflib

    lines = difflib.unified_diff(
        (before or "").splitlines(),
        after.splitlines(),
        fromfile=f"a/{path}" if before is not None else "/dev/null",
        tofile=f"b/{path}",
        lineterm="",
    )
    return "".join(line + "\n" for line in lines)

"""Unified diffs of text content, one format for write outputs and check-mode previews.

Invariant: every line of the diff ends with a newline, whatever the content's own line
endings, so a file without a trailing newline still diffs as separate ``-``/``+`` lines.
"""

from __future__ import annotations

import difflib


def unified_diff(path: str, before: str | None, after: str) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(),
        after.splitlines(),
        fromfile=f"a/{path}" if before is not None else "/dev/null",
        tofile=f"b/{path}",
        lineterm="",
    )
    return "".join(line + "\n" for line in lines)

"""Collects compile diagnostics so one compile reports every problem it finds.

Invariants: diagnostics keep the order they were found in; identical findings (same code,
message and path, e.g. from the children of one foreach) are kept once; each carries the
dotted document path it is about and, when a locator is given, the line/column of the
nearest located ancestor of that path (expanded children point at their source); a finding
about the command line (``argv``: a ``--var``) names no file, path or position — it did not
come from the document; a task
reported and left out of the graph (``dropped``) is not reported again as an unknown task
by every need or read naming it — those follow from the first report (no cascades).
"""

from __future__ import annotations

from collections.abc import Callable, Container

from agentctl.errors import Diagnostic, ValidationError

Locator = Callable[[str], tuple[int, int] | None]


class Collector:
    """An append-only list of error diagnostics for one document."""

    def __init__(self, file: str | None, locate: Locator | None) -> None:
        self.file = file
        self._locate = locate
        self.items: list[Diagnostic] = []
        self._seen: set[tuple[str, str, str | None]] = set()
        self.dropped: set[str] = set()  # ids reported and left out of the graph

    def unknown(self, task_id: str, graph: Container[str]) -> bool:
        """Whether naming ``task_id`` is a problem of its own: not in ``graph`` and not a task
        already reported and dropped from it."""
        return task_id not in graph and task_id not in self.dropped

    def add(
        self,
        code: str,
        message: str,
        path: str | None,
        help: str | None = None,
        *,
        argv: bool = False,
    ) -> None:
        """``argv``: the finding is about the command line, not the document (no file)."""
        # Expanded children share their parent's definition: report each finding once.
        key = (code, message, path)
        if key in self._seen:
            return
        self._seen.add(key)
        line, column = self._position(path)
        self.items.append(
            Diagnostic(
                code=code,
                message=message,
                file=None if argv else self.file,
                line=line,
                column=column,
                path=path,
                help=help,
            )
        )

    def _position(self, path: str | None) -> tuple[int | None, int | None]:
        if self._locate is None or path is None:
            return None, None
        parts = path.split(".")
        # Walk up: a missing optional key or a synthetic child still has a located ancestor.
        while parts:
            found = self._locate(".".join(parts))
            if found is not None:
                return found
            parts.pop()
        return None, None

    def raise_if_any(self) -> None:
        if self.items:
            first = self.items[0].message
            more = len(self.items) - 1
            summary = first if more == 0 else f"{first} (and {more} more)"
            raise ValidationError(f"workflow is invalid: {summary}", diagnostics=self.items)

"""Task ids a user may name by a shorter form than the run's: a sub-workflow's task runs as
``INVOCATION--LOCAL`` (``compiler/subworkflows.py``), and naming it by ``LOCAL`` is the likely
slip. Pure; shared by the recovery planner (``--from``) and the ledger's task lookups
(``--task``), so both errors suggest the same ids the same way."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

HINTED = 5  # ids named at most in one hint


def local_namesakes(task_ids: Iterable[str], local: str) -> tuple[str, ...]:
    """The ids among ``task_ids`` (their order kept) that a sub-workflow gave a task whose
    own id is ``local``; none for an empty ``local``."""
    suffix = f"--{local}"
    return tuple(t for t in task_ids if local and t.endswith(suffix))


def namesake_hint(namesakes: Sequence[str]) -> str:
    """``; did you mean A or B?`` for an error message, or nothing when there is none."""
    return f"; did you mean {' or '.join(namesakes[:HINTED])}?" if namesakes else ""

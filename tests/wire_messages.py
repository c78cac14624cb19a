"""The ``Execute`` frames tests hand a worker or a pool: one builder instead of one per file.

Each message gets a fresh effect id unless the test names one (replies are matched by it).
"""

from __future__ import annotations

import itertools
from typing import Any

from agentctl.mailbox import Execute

_ids = itertools.count()


def execute_msg(
    operation: str,
    request: dict[str, Any],
    *,
    effect_id: str = "",
    timeout: float = 60,
    executor: str | None = None,
) -> Execute:
    """An ``Execute`` of ``operation`` with ``request``, for task ``t`` of run ``run-1``."""
    return Execute(
        effect_id=effect_id or f"effect-{next(_ids)}",
        run_id="run-1",
        task_id="t",
        attempt=1,
        operation=operation,
        request=request,
        timeout_seconds=timeout,
        executor=executor,
    )

"""Working-memory write sets (spec/dsl.md §4.7) and the parallel-conflict check.

Invariants: only memory-write tasks carry a write set; a literal ``with.key`` is inferred
into the set (and must be listed when a set is declared); a templated key requires a
declared set; sets are stored sorted. With ``maxConcurrency > 1`` two tasks with no
transitive needs path between them may not share a key — including the children of one
foreach, which inherit the parent's whole set (the original's behaviour, kept on purpose).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Node
from agentctl.core.compiler.templating import OPEN

_WRITERS_HELP = (
    "memoryWrites belongs on working-memory writes only "
    "(builtin.memory.write, builtin.long_term_memory.promote)"
)


def memory_writes(
    node: Node,
    action: dict[str, Any] | None,
    with_: Any,
    diags: Collector,
    writers: frozenset[str],
) -> tuple[str, ...]:
    """The write set of one task (empty for anything but a memory write); ``writers``: the
    registry's working-memory writer kinds."""
    written = node.task.get("memoryWrites")
    if not written and (action is None or action.get("kind") not in writers):
        return ()  # (most tasks: nothing declared, nothing written, nothing to report)
    declared = [str(key) for key in written or []]
    path = f"{node.path}.memoryWrites"
    writes = _declared_set(node, declared, path, diags)
    if action is None or action.get("kind") not in writers:
        if declared:
            diags.add(
                "schema_violation",
                f"task `{node.task['id']}` declares memoryWrites but is not a memory write",
                path,
                help=_WRITERS_HELP,
            )
        return ()
    key = with_.get("key") if isinstance(with_, dict) else None
    _check_key(node, key, writes, path, diags)
    return tuple(sorted(writes))


def _check_key(node: Node, key: Any, writes: set[str], path: str, diags: Collector) -> None:
    """The written key agrees with ``memoryWrites``; a literal key alone becomes the set."""
    if not isinstance(key, str) or not key:
        diags.add(
            "schema_violation",
            f"memory write `{node.task['id']}` needs a non-empty string `with.key`",
            f"{node.path}.with.key",
        )
    elif OPEN in key:
        if not writes:
            diags.add(
                "schema_violation",
                f"memory write `{node.task['id']}` has a templated key but no memoryWrites",
                path,
                help="list every key the template may produce in memoryWrites",
            )
    elif not writes:
        writes.add(key)
    elif key not in writes:
        diags.add(
            "schema_violation",
            f"memory write `{node.task['id']}` writes `{key}`, which memoryWrites does not list",
            path,
        )


def _declared_set(node: Node, declared: list[str], path: str, diags: Collector) -> set[str]:
    writes: set[str] = set()
    for key in declared:
        if not key or key in writes:
            diags.add(
                "schema_violation",
                f"task `{node.task['id']}` memoryWrites entries must be non-empty and unique",
                path,
            )
        writes.add(key)
    writes.discard("")
    return writes


def check_parallel_writes(
    order: Sequence[str],
    writes: dict[str, tuple[str, ...]],
    ancestors: dict[str, set[str]],
    graph: dict[str, Node],
    diags: Collector,
) -> None:
    """Report pairs of unordered tasks whose write sets intersect (once per authored pair)."""
    writers = [task_id for task_id in order if writes.get(task_id)]
    reported: set[tuple[str, str]] = set()
    for index, first in enumerate(writers):
        for second in writers[index + 1 :]:
            if first in ancestors[second] or second in ancestors[first]:
                continue
            shared = sorted(set(writes[first]) & set(writes[second]))
            pair = (graph[first].path, graph[second].path)
            if not shared or pair in reported:
                continue
            reported.add(pair)
            diags.add(
                "schema_violation",
                f"tasks `{first}` and `{second}` may run in parallel and both write "
                f"memory key(s) {', '.join(shared)}",
                f"{graph[second].path}.memoryWrites",
                help="order them with needs, use disjoint keys, or set maxConcurrency: 1",
            )

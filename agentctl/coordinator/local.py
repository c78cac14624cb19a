"""Executors of the effects the coordinator performs itself: working and long-term memory.

Registry entries placed ``coordinator`` name state the coordinator owns (the run's working
memory, the ledger's long-term memory table), so they run here, under the same recorded
protocol as worker effects, instead of in a worker. ``LOCAL_OPERATIONS`` has one executor per
such operation; a test fails when an entry has none or an executor has no entry.

Invariants:
- an executor never writes the ledger itself: a long-term write is returned as a
  ``MemoryPut`` that commits in the same transaction as the effect's outcome, and a working
  memory write as a delta that commits with the task's completion;
- ``recorded_delta`` gives the working-memory delta of an effect confirmed in an earlier
  process (resume), from its recorded input, so a resumed run rebuilds the same memory;
- a long-term search reads the ledger's candidates once and ranks them with
  ``core.longterm.rank``; promotion is a working-memory write under its own operation name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentctl.core.conditions import json_identical
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.longterm import (
    Candidate,
    EmbeddingIdentity,
    Entry,
    local_hash,
    rank,
    search_query_of,
)
from agentctl.core.longterm.actions import entry_json
from agentctl.errors import AgentctlError
from agentctl.ledger.model import MemoryEntry, MemoryPut


class LocalHost(Protocol):
    """What a coordinator-side executor may use: the batch's memory and ledger lookups."""

    @property
    def memory(self) -> Mapping[str, JsonValue]: ...

    async def long_term_get(self, namespace: str, key: str) -> MemoryEntry: ...

    async def long_term_candidates(self, namespace: str) -> Sequence[Candidate]: ...


@dataclass(frozen=True)
class LocalResult:
    """The outcome of a coordinator-side effect."""

    status: str  # succeeded | failed
    output: JsonValue = None
    error: str | None = None
    memory_delta: JsonObject | None = None
    long_term_put: MemoryPut | None = None


LocalExecutor = Callable[[JsonObject, LocalHost], Awaitable[LocalResult]]


@dataclass(frozen=True)
class LocalOperation:
    """How the coordinator performs one operation, and what a confirmed one left behind."""

    execute: LocalExecutor
    # The working-memory delta of a confirmed effect, from its recorded input (for resume).
    recorded_delta: Callable[[JsonObject], JsonObject] | None = None


def memory_write_output(memory: Mapping[str, JsonValue], request: JsonObject) -> JsonObject:
    """The output of ``builtin.memory.write`` against the batch's memory snapshot."""
    key = str(request["key"])
    before = memory.get(key)
    after = request.get("value")
    # Exact JSON (spec/dsl.md §6.3): replacing ``true`` by ``1``, or ``1`` by ``1.0``, changes it.
    changed = key not in memory or not json_identical(before, after)
    return {
        "status": "changed" if changed else "unchanged",
        "changed": changed,
        "before": before,
        "after": after,
        "key": key,
    }


def _memory_delta(recorded: JsonObject) -> JsonObject:
    return {str(recorded["key"]): recorded.get("value")}


async def execute_memory_write(request: JsonObject, host: LocalHost) -> LocalResult:
    output = memory_write_output(host.memory, request)
    return LocalResult("succeeded", output, memory_delta=_memory_delta(request))


async def execute_long_term_write(request: JsonObject, host: LocalHost) -> LocalResult:
    key, namespace = str(request["key"]), str(request["namespace"])
    value, text, metadata = entry_json(request)
    identity = EmbeddingIdentity.from_settings(as_object(request.get("embedding")))
    days = request.get("retentionDays")
    put = MemoryPut(
        namespace,
        key,
        Entry(value, text, metadata),
        identity,
        local_hash(text, identity),
        days if isinstance(days, int) else None,
    )
    output: JsonObject = {"status": "changed", "changed": True, "key": key}
    return LocalResult("succeeded", output, long_term_put=put)


async def execute_long_term_read(request: JsonObject, host: LocalHost) -> LocalResult:
    key, namespace = str(request["key"]), str(request["namespace"])
    entry = await host.long_term_get(namespace, key)
    if not entry.found:
        return LocalResult("failed", error=f"no long-term memory entry {namespace}/{key}")
    return LocalResult("succeeded", {"status": "unchanged", "changed": False, "value": entry.value})


async def execute_long_term_search(request: JsonObject, host: LocalHost) -> LocalResult:
    try:
        query = search_query_of(request, str(request["namespace"]))
        identity = EmbeddingIdentity.from_settings(as_object(request.get("embedding")))
        found = rank(query, await host.long_term_candidates(query.namespace), identity)
    except AgentctlError as exc:  # an invalid query, or an index that needs rebuilding
        return LocalResult("failed", error=exc.message)
    output: JsonObject = {"status": "unchanged", "changed": False, **query.to_json()}
    output["results"] = list[JsonValue](found)
    return LocalResult("succeeded", output)


LOCAL_OPERATIONS: dict[str, LocalOperation] = {
    "builtin.memory.write": LocalOperation(execute_memory_write, _memory_delta),
    "builtin.long_term_memory.write": LocalOperation(execute_long_term_write),
    "builtin.long_term_memory.read": LocalOperation(execute_long_term_read),
    "builtin.long_term_memory.search": LocalOperation(execute_long_term_search),
    "builtin.long_term_memory.promote": LocalOperation(execute_memory_write, _memory_delta),
}


def recorded_delta(operation: str, recorded: JsonValue) -> JsonObject | None:
    """The working-memory delta a confirmed effect of ``operation`` committed, if any."""
    local = LOCAL_OPERATIONS.get(operation)
    if local is None or local.recorded_delta is None or not isinstance(recorded, dict):
        return None
    return local.recorded_delta(recorded)

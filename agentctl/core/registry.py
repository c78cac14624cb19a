"""The operation registry: one ``Operation`` entry for everything a task can ask for.

Every built-in action kind (spec/dsl.md §3), the model call of each provider kind, each agent
tool kind (§5) and the internal worker operations have one entry (``core.builtin_ops``). The
DSL (which kinds, which keys), the compiler (effect classes, predictability, compensation),
policy names, the check-mode preview, the coordinator (builders, placement, budgets, what
runs) and the workers (executors) all read it; a new kind is one ``register`` call plus, for
worker placement, one executor function.

Invariants:
- names are unique: ``register`` refuses to replace an entry (tests ``unregister`` theirs);
- registration order is the order the DSL lists kinds in its diagnostics;
- entries that share an effect operation (a tool kind and the action it performs) share its
  executor, so ``executor_for_operation`` is well defined;
- ``_EXECUTORS`` is derived from ``_ENTRIES`` only: ``register`` adds to it and ``unregister``
  rebuilds it, so it always says what a scan of the entries in order would (the lookup is on
  every worker effect's path, on both sides of the wire).
"""

from __future__ import annotations

from agentctl.core.builtin_ops import BUILTIN_OPERATIONS
from agentctl.core.effects import EffectClass
from agentctl.core.operations import Family, Operation
from agentctl.errors import InvalidOperationError

_ENTRIES: dict[str, Operation] = {op.name: op for op in BUILTIN_OPERATIONS}
MODEL_PREFIX = "model."


def _executors() -> dict[str, str]:
    """Effect operation → executor of the first entry (in registration order) naming one."""
    index: dict[str, str] = {}
    for op in _ENTRIES.values():
        if op.executor is not None:
            index.setdefault(op.effect_operation, op.executor)
    return index


_EXECUTORS = _executors()


def register(entry: Operation) -> Operation:
    """Add ``entry``; a name already registered is refused (entries are never replaced)."""
    if entry.name in _ENTRIES:
        raise InvalidOperationError(f"operation {entry.name!r} is already registered")
    _ENTRIES[entry.name] = entry
    if entry.executor is not None:  # registered last: an earlier entry's executor stays first
        _EXECUTORS.setdefault(entry.effect_operation, entry.executor)
    return entry


def unregister(name: str) -> None:
    """Remove a registered entry (tests that registered one clean up with this)."""
    if _ENTRIES.pop(name, None) is not None:
        _EXECUTORS.clear()
        _EXECUTORS.update(_executors())


def find(name: str) -> Operation | None:
    return _ENTRIES.get(name)


def lookup(name: str) -> Operation:
    """The entry called ``name``; an unknown name is a ``KeyError`` (a caller's bug)."""
    return _ENTRIES[name]


def entries(family: Family | None = None) -> tuple[Operation, ...]:
    """Every entry (or every entry of one family), in registration order."""
    return tuple(op for op in _ENTRIES.values() if family is None or op.family == family)


def names(family: Family) -> tuple[str, ...]:
    """The names of one family in registration order (the DSL's list of kinds)."""
    if family == "model":
        return tuple(op.name.removeprefix(MODEL_PREFIX) for op in entries("model"))
    return tuple(op.name for op in entries(family))


def working_memory_writers() -> frozenset[str]:
    """The action kinds that write the run's working memory (internal state), the only ones
    that take ``memoryWrites``: ``builtin.memory.write``, ``builtin.long_term_memory.promote``."""
    return frozenset(
        op.name
        for op in entries("action")
        if op.accepted and op.effect_class is EffectClass.INTERNAL_STATE
    )


def model_operation(provider_kind: str) -> Operation:
    """The model-call entry of a provider kind (``fake`` → ``model.fake``)."""
    return lookup(MODEL_PREFIX + provider_kind)


def executor_for_operation(operation: str) -> str | None:
    """The executor of an effect operation (as recorded on the effect row), if any."""
    return _EXECUTORS.get(operation)

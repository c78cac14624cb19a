"""The operation registry: one ``Operation`` entry for everything a task can ask for.

Every built-in action kind (spec/dsl.md §3), the model call of each provider kind (named by the
kind alone: ``fake``, ``openai``, as the original names a model call's effect), each agent tool
kind (§5) and the internal worker operations have one entry (``core.builtin_ops``). The
DSL (which kinds, which keys), the compiler (effect classes, predictability, compensation),
policy names, the check-mode preview, the coordinator (builders, placement, budgets, what
runs) and the workers (executors) all read it; a new kind is one ``register`` call plus, for
worker placement, one executor function.

Invariants:
- names are unique: ``register`` refuses to replace an entry (tests ``unregister`` theirs), so
  no other operation is named as a provider kind;
- a model call recorded before model entries took the provider kind's name holds the legacy
  name ``model.<kind>``: ``find``, ``lookup``, ``is_model``, ``provider_kind``,
  ``same_operation`` and ``executor_for_operation`` resolve it to the same entry (recorded
  data keeps its name, and with it its effect identity); nothing new is ever given it;
- what kind an operation is (a model call, a remote agent) is asked here by its effect class,
  never read from its name;
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
# Ledgers (effects, stored plans) written before model entries were named by the provider
# kind alone hold ``model.<kind>``: an alias of the model entry, for recorded data only.
LEGACY_MODEL_PREFIX = "model."


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


def _resolved(name: str) -> str:
    """``name``, or the model entry's own name when ``name`` is its legacy ``model.<kind>``."""
    if name in _ENTRIES or not name.startswith(LEGACY_MODEL_PREFIX):
        return name
    kind = name.removeprefix(LEGACY_MODEL_PREFIX)
    entry = _ENTRIES.get(kind)
    return kind if entry is not None and entry.family == "model" else name


def find(name: str) -> Operation | None:
    """The entry called ``name`` (a legacy model-call name finds its model entry), if any."""
    return _ENTRIES.get(_resolved(name))


def lookup(name: str) -> Operation:
    """The entry called ``name``; an unknown name is a ``KeyError`` (a caller's bug)."""
    return _ENTRIES[_resolved(name)]


def is_model(operation: str) -> bool:
    """Whether an effect operation (as recorded, legacy names too) is a model call."""
    entry = find(operation)
    return entry is not None and entry.effect_class is EffectClass.MODEL


def provider_kind(operation: str) -> str | None:
    """The provider kind a model call's effect operation calls (``fake`` for ``fake`` and for
    a legacy ``model.fake``); None for any other operation."""
    return _resolved(operation) if is_model(operation) else None


def same_operation(first: str, second: str) -> bool:
    """Whether two effect operation names are one entry's (a legacy model-call name and the
    kind's own name are)."""
    return _resolved(first) == _resolved(second)


def entries(family: Family | None = None) -> tuple[Operation, ...]:
    """Every entry (or every entry of one family), in registration order."""
    return tuple(op for op in _ENTRIES.values() if family is None or op.family == family)


def names(family: Family) -> tuple[str, ...]:
    """The names of one family in registration order (the DSL's list of kinds)."""
    return tuple(op.name for op in entries(family))


def working_memory_writers() -> frozenset[str]:
    """The action kinds that write the run's working memory (internal state), the only ones
    that take ``memoryWrites``: ``builtin.memory.write``, ``builtin.long_term_memory.promote``."""
    return frozenset(
        op.name
        for op in entries("action")
        if op.accepted and op.effect_class is EffectClass.INTERNAL_STATE
    )


def find_model(kind: str) -> Operation | None:
    """The model-call entry of a provider kind (named as the kind: ``fake``), if registered."""
    entry = _ENTRIES.get(kind)
    return entry if entry is not None and entry.family == "model" else None


def model_operation(kind: str) -> Operation:
    """``find_model``; a kind without a model-call entry is a ``KeyError`` (a caller's bug:
    the DSL admits only registered provider kinds)."""
    entry = find_model(kind)
    if entry is None:
        raise KeyError(kind)
    return entry


def executor_for_operation(operation: str) -> str | None:
    """The executor of an effect operation (as recorded on the effect row, legacy model-call
    names too), if any."""
    return _EXECUTORS.get(_resolved(operation))

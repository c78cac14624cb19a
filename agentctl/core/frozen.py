"""A cheaper ``__init__`` for the frozen dataclasses a run makes once per task.

Python's ``dataclasses`` writes a frozen class's ``__init__`` as one
``object.__setattr__(self, NAME, value)`` call per field: it has to go round the class's own
``__setattr__``, which refuses every assignment. For the values a run builds per task — the
planned task (28 fields), its settled step, its completion row — those calls were most of the
cost of making them (a ``PlannedTask``: ~3.5 µs, against ~0.3 µs this way). ``direct_init``
gives such a class an ``__init__`` that stores the same values into the new instance's
``__dict__`` directly: the same parameters in the same order, the same defaults, the same
instance afterwards (its ``__setattr__``, ``__eq__``, ``__hash__`` and ``repr`` are the
dataclass's own, untouched).

Invariants:
- only a frozen dataclass whose every field is an ``__init__`` parameter with a plain default
  or none is accepted, without ``__slots__``, ``__post_init__``, ``InitVar`` or
  ``default_factory``: anything else raises ``TypeError`` when the class is defined, so a later
  change to the class cannot make the stock ``__init__`` do work this one skips;
- the method text is compiled by ``dataclasses._create_fn`` where the interpreter has it, so
  the start-up code cache (``agentctl.dataclass_codes``) keeps it with the other generated
  methods; elsewhere it is compiled here, the same text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def direct_init(cls: type[T]) -> type[T]:
    """Replace the generated ``__init__`` of the frozen dataclass ``cls`` (see the module)."""
    fields = _checked_fields(cls)
    # The instance's dict under a name no field can have (a field may not start with "__"
    # and be mangled away: dataclasses would name it differently).
    params, body, defaults = ["self"], ["__direct_d = self.__dict__"], {}
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults[f"_dflt_{f.name}"] = f.default
            params.append(f"{f.name}=_dflt_{f.name}")
        body.append(f"__direct_d[{f.name!r}] = {f.name}")
    init = _compiled("__init__", params, body, defaults)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]  # same signature as the one mypy checks
    return cls


def _checked_fields(cls: type[Any]) -> tuple[dataclasses.Field[Any], ...]:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"direct_init: {cls.__name__} is not a frozen dataclass with __init__")
    # A base's empty __slots__ (typing.Generic's, Protocol's) stores nothing: only fields count.
    slotted = "__slots__" in cls.__dict__ or any(c.__dict__.get("__slots__") for c in cls.__mro__)
    if slotted or hasattr(cls, "__post_init__"):
        raise TypeError(f"direct_init: {cls.__name__} has __slots__ or __post_init__")
    init = cls.__dict__.get("__init__")
    if getattr(getattr(init, "__code__", None), "co_filename", None) != "<string>":
        raise TypeError(f"direct_init: {cls.__name__} has an __init__ of its own")
    every = getattr(cls, "__dataclass_fields__", {})
    fields = dataclasses.fields(cls)
    if len(fields) != len(every):  # InitVar and ClassVar pseudo-fields are left out of fields()
        raise TypeError(f"direct_init: {cls.__name__} has an InitVar or a ClassVar")
    for f in fields:
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"direct_init: field {cls.__name__}.{f.name} is not a plain one")
    return fields


def _compiled(
    name: str, params: list[str], body: list[str], defaults: dict[str, Any]
) -> Callable[..., None]:
    create = getattr(dataclasses, "_create_fn", None)
    if create is not None:
        fn: Callable[..., None] = create(name, params, body, globals={}, locals=defaults)
        return fn
    lines = "\n".join(f"  {b}" for b in body)
    text = f"def __create_fn__({', '.join(defaults)}):\n def {name}({','.join(params)}):\n"
    namespace: dict[str, Any] = {}
    exec(f"{text}{lines}\n return {name}", {}, namespace)
    made: Callable[..., None] = namespace["__create_fn__"](**defaults)
    return made

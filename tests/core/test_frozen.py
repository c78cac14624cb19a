"""``direct_init``: the same instances as the stock frozen ``__init__``, and refusals."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import pytest

from agentctl.core import frozen
from agentctl.core.compiler import compile_workflow
from agentctl.core.frozen import direct_init
from agentctl.core.plan import PlannedTask

T = TypeVar("T")


@dataclass(frozen=True)
class Stock:
    a: str
    b: int
    c: tuple[str, ...] = ()
    d: str | None = None


def _stock_again() -> type[Any]:
    @dataclass(frozen=True)
    class Stock:  # the same class as the module's, to be given the direct __init__
        a: str
        b: int
        c: tuple[str, ...] = ()
        d: str | None = None

    return Stock


def _same(made: Any, stock: Stock) -> None:
    assert dataclasses.astuple(made) == dataclasses.astuple(stock)
    assert list(vars(made).items()) == list(vars(stock).items())  # same values, same order
    assert repr(made).split("(", 1)[1] == repr(stock).split("(", 1)[1]


@pytest.mark.parametrize("without_create_fn", [False, True])
def test_direct_init_builds_the_stock_instance(
    monkeypatch: pytest.MonkeyPatch, without_create_fn: bool
) -> None:
    cls = _stock_again()
    if without_create_fn:  # an interpreter whose dataclasses have no _create_fn
        monkeypatch.delattr(dataclasses, "_create_fn")
    cls = direct_init(cls)
    _same(cls("x", 1), Stock("x", 1))
    _same(cls("x", 2, ("y",), d="z"), Stock("x", 2, ("y",), d="z"))
    _same(cls(b=3, a="w"), Stock(b=3, a="w"))
    made = cls("x", 1)
    assert made == cls("x", 1) and hash(made) == hash(cls("x", 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = "changed"
    with pytest.raises(TypeError):
        cls("x")  # a required field missing, as the stock __init__ says
    with pytest.raises(TypeError):
        cls("x", 1, e=2)  # no such field
    assert dataclasses.replace(made, b=5) == cls("x", 5)
    assert cls.__init__.__qualname__.endswith("Stock.__init__")


def test_planned_task_is_the_same_value_either_way() -> None:
    plan = compile_workflow(
        {
            "apiVersion": "agentctl.dev/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": "w"},
            "spec": {
                "actions": {"a": {"kind": "builtin.assign"}},
                "tasks": [{"id": "t", "uses": "action:a", "with": {"i": 1}}],
            },
        }
    )
    task = plan.tasks[0]
    values = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
    stock = object.__new__(PlannedTask)
    for name, value in values.items():  # what the generated frozen __init__ does, field by field
        object.__setattr__(stock, name, value)
    assert PlannedTask(**values) == stock
    assert list(vars(PlannedTask(**values)).items()) == list(vars(stock).items())


def test_refuses_what_the_stock_init_does_more_of() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class WithClassVar:
        a: int
        shared: ClassVar[int] = 0

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    for cls in (Mutable, Factory, Post, WithClassVar, Slotted):
        with pytest.raises(TypeError, match="direct_init"):
            frozen.direct_init(cls)


def test_refuses_a_class_whose_init_is_not_the_generated_one() -> None:
    @dataclass(frozen=True)
    class OwnInit:
        a: int

        def __init__(self, a: int) -> None:  # dataclasses keeps it: so must direct_init
            object.__setattr__(self, "a", abs(a))

    @dataclass(frozen=True, init=False)
    class NoInit:
        a: int = 0

    @dataclass(frozen=True, slots=True)
    class SlottedBase:
        a: int

    @dataclass(frozen=True)
    class OnSlots(SlottedBase):  # its field lives in the base's slot, not in a __dict__
        b: int

    for cls in (OwnInit, NoInit, OnSlots):
        with pytest.raises(TypeError, match="direct_init"):
            frozen.direct_init(cls)


def test_a_generic_frozen_dataclass_is_accepted() -> None:
    @dataclass(frozen=True)
    class Box(Generic[T]):  # Generic's empty __slots__ stores nothing
        item: T
        count: int = 1

    assert vars(direct_init(Box)("x")) == {"item": "x", "count": 1}


def test_a_field_may_have_any_name_the_generated_init_uses_itself() -> None:
    @dataclass(frozen=True)
    class Named:
        _d: int
        self_: str = "s"

    made = direct_init(Named)(1)
    assert made == Named(1) and vars(made) == {"_d": 1, "self_": "s"}
    assert Named.__init__.__module__ == __name__

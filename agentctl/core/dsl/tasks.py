"""Tasks and sub-workflow definitions (spec/dsl.md §4): keys, defaults and per-task rules.

Invariants:
- Defaults dumped for every task: needs [], memoryWrites [], vars {}, with {}, retry
  {maxAttempts 1, backoffMs 0}, failure "stop"; absent optional keys (when, foreach, matrix,
  loop, route, compensate, outputSchema, timeoutSeconds) dump as ``None``.
- Schema-level exclusivity is enforced here: foreach ⊕ matrix, neither with route, route ⇔
  ``uses: router``, loop alone, a sub-workflow invocation carries only needs/with/failure.
- A router's ``retry``, ``timeoutSeconds`` or ``outputSchema`` is accepted, as the original
  accepts it, and warned about as having no effect (``dsl/unused.py``).
- References (does ``action:x`` exist? does a need name a task?) are left to the compiler.
"""

from __future__ import annotations

import copy
import re
from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from agentctl.core.dsl.base import (
    IDENTIFIER_RE,
    JsonObject,
    NonEmptyStr,
    Seconds,
    StrictModel,
    VarsFiles,
    check_json_schema,
    given_keys,
    rule_error,
)
from agentctl.core.packs.semver import PRE_RELEASE_ID

TASK_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\Z")
USES_RE = re.compile(r"^(?:(?:action|agent|workflow):[A-Za-z_][A-Za-z0-9_.-]*|router)\Z")
COMPENSATE_USES_RE = re.compile(r"^action:[A-Za-z_][A-Za-z0-9_.-]*\Z")
SEMVER_RE = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    rf"(?:-{PRE_RELEASE_ID}(?:\.{PRE_RELEASE_ID})*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?\Z"
)
RESERVED_VARS = frozenset({"foreachIndex", "matrix", "matrixIndex", "loopIndex", "loopPrevious"})
_INVOCATION_KEYS = frozenset({"id", "uses", "needs", "with", "failure"})


class Retry(StrictModel):
    max_attempts: int = Field(1, alias="maxAttempts", ge=1, le=20)
    backoff_ms: int = Field(0, alias="backoffMs", ge=0, le=60_000)


# Copied, not constructed, for every task that writes no ``retry``: ``model_construct`` reads
# each field's default on every call (2.5 -> 1.3 µs a task; validating the 1,000-task chain
# 6.5 -> 5.3 ms). A shallow copy is a whole one: the fields are integers.
_NO_RETRY = Retry.model_construct()


def default_retry() -> Retry:
    """A new ``Retry`` of the defaults (``maxAttempts`` 1, ``backoffMs`` 0): the default of
    every ``retry`` key (a module function: the stored core schema names it, ``prebuilt``)."""
    return copy.copy(_NO_RETRY)


class Foreach(StrictModel):
    items: list[Any]
    as_: str = Field("item", alias="as")
    max_items: int = Field(32, alias="maxItems", ge=1, le=256)

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if not IDENTIFIER_RE.match(self.as_) or self.as_ in RESERVED_VARS:
            raise rule_error(
                "schema_violation",
                f"foreach `as` must be an identifier that is not reserved, got {self.as_!r}",
                at="as",
            )
        if len(self.items) > self.max_items:
            raise rule_error(
                "schema_violation",
                f"foreach has {len(self.items)} items, more than maxItems {self.max_items}",
                at="items",
                help="raise maxItems (at most 256) or split the list",
            )
        return self


class Matrix(StrictModel):
    axes: dict[str, list[Any]] = Field(min_length=1)
    max_items: int = Field(32, alias="maxItems", ge=1, le=256)

    @model_validator(mode="after")
    def _rules(self) -> Self:
        product = 1
        for name, values in self.axes.items():
            if not IDENTIFIER_RE.match(name):
                raise rule_error(
                    "schema_violation",
                    f"matrix axis name {name!r} is not an identifier",
                    at=f"axes.{name}",
                    help="name an axis with letters, digits and '_', starting with a letter or '_'",
                    key=True,
                )
            product *= len(values)
        if product > self.max_items:
            raise rule_error(
                "schema_violation",
                f"matrix expands to {product} combinations, more than maxItems {self.max_items}",
                at="maxItems" if "maxItems" in given_keys(self) else "axes",
                help="raise maxItems (at most 256) or remove axis values",
            )
        return self


class Loop(StrictModel):
    max_iterations: int = Field(alias="maxIterations", ge=1, le=64)
    while_: NonEmptyStr = Field(alias="while")
    initial: Any = None


class RouteCase(StrictModel):
    equals: Any
    tasks: list[str] = Field(min_length=1)


class Route(StrictModel):
    select: NonEmptyStr
    cases: list[RouteCase] = Field(min_length=1)
    default: list[str] = Field(default_factory=list)


class Compensate(StrictModel):
    # The pattern is stated for ``agentctl schema`` only; ``_uses`` enforces it.
    uses: str = Field(json_schema_extra={"pattern": r"^action:[A-Za-z_][A-Za-z0-9_.-]*$"})
    with_: JsonObject = Field(default_factory=dict, alias="with")
    retry: Retry = Field(default_factory=default_retry)
    timeout_seconds: Seconds | None = Field(None, alias="timeoutSeconds")

    @field_validator("uses")
    @classmethod
    def _uses(cls, value: str) -> str:
        # A rule of our own rather than ``Field(pattern=...)``: pydantic's wording ("String
        # should match pattern '^action:...'") is no message for a workflow author.
        if not COMPENSATE_USES_RE.match(value):
            raise rule_error(
                "schema_violation",
                f"compensate `uses` {value!r} is not valid: an inverse is an action",
                help="write action:NAME, naming a spec.actions entry",
            )
        return value


class Task(StrictModel):
    id: str
    uses: str
    needs: list[str] = Field(default_factory=list)
    foreach: Foreach | None = None
    matrix: Matrix | None = None
    route: Route | None = None
    loop: Loop | None = None
    memory_writes: list[NonEmptyStr] = Field(default_factory=list, alias="memoryWrites")
    when: NonEmptyStr | None = None
    vars: JsonObject = Field(default_factory=dict)
    vars_files: VarsFiles = Field(default_factory=list, alias="varsFiles")
    with_: JsonObject = Field(default_factory=dict, alias="with")
    retry: Retry = Field(default_factory=default_retry)
    timeout_seconds: Seconds | None = Field(None, alias="timeoutSeconds")
    failure: Literal["stop", "continue"] = "stop"
    compensate: Compensate | None = None
    output_schema: JsonObject | None = Field(None, alias="outputSchema")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not TASK_ID_RE.match(value):
            raise rule_error(
                "schema_violation",
                f"task id {value!r} is not valid",
                help="start with an ASCII letter, then letters, digits, '_' or '-'",
            )
        return value

    @field_validator("uses")
    @classmethod
    def _uses(cls, value: str) -> str:
        if not USES_RE.match(value):
            raise rule_error(
                "schema_violation",
                f"`uses` {value!r} is not valid",
                help="write action:NAME, agent:NAME, workflow:NAME or router",
            )
        return value

    @model_validator(mode="after")
    def _rules(self) -> Self:
        # A list of one or no names cannot repeat one: most tasks' lists are such, and are
        # passed over without a call (the task rules of a 1,000-task chain 0.80 -> 0.47 ms).
        if len(self.needs) > 1:
            _check_unique(self.needs, "needs")
        if len(self.memory_writes) > 1:
            _check_unique(self.memory_writes, "memoryWrites")
        for name in self.vars:
            if name in RESERVED_VARS or (self.foreach is not None and name == self.foreach.as_):
                raise rule_error(
                    "schema_violation",
                    f"variable name {name!r} is reserved for the engine",
                    at=f"vars.{name}",
                    key=True,
                )
        if self.uses.startswith("workflow:"):  # the written keys only here: not per task
            extra = sorted(given_keys(self) - _INVOCATION_KEYS)
            if extra:
                raise rule_error(
                    "schema_violation",
                    f"a task invoking a sub-workflow may carry only needs, with and failure; "
                    f"remove `{extra[0]}`",
                    at=extra[0],
                    key=True,
                )
        _check_shape(self)
        return self


def _check_unique(values: list[str], key: str) -> None:
    if len(set(values)) != len(values):
        dup = next(v for i, v in enumerate(values) if v in values[:i])
        raise rule_error("schema_violation", f"`{key}` lists {dup!r} twice", at=key)


def _check_shape(task: Task) -> None:
    """foreach ⊕ matrix, route ⇔ router, loop alone."""
    if task.foreach is not None and task.matrix is not None:
        raise rule_error(
            "schema_violation",
            "a task may have `foreach` or `matrix`, not both",
            at="matrix",
            key=True,
        )
    is_router = task.uses == "router"
    if task.route is not None and (task.foreach is not None or task.matrix is not None):
        raise rule_error("schema_violation", "a router cannot be expanded", at="route", key=True)
    if is_router != (task.route is not None):
        raise rule_error(
            "schema_violation",
            "`route` and `uses: router` must appear together",
            at="route" if task.route is not None else "uses",
            key=task.route is not None,
        )
    if task.loop is not None:
        clash = [
            key
            for key, present in (
                ("when", task.when is not None),
                ("foreach", task.foreach is not None),
                ("matrix", task.matrix is not None),
                ("route", is_router),
            )
            if present
        ]
        if clash:
            raise rule_error(
                "schema_violation",
                f"`loop` cannot be combined with `{clash[0]}`",
                at="loop",
                key=True,
            )


class Subworkflow(StrictModel):
    version: str
    inputs: JsonObject = Field(default_factory=dict)
    input_schema: JsonObject | None = Field(None, alias="inputSchema")
    outputs: JsonObject = Field(default_factory=dict)
    output_schema: JsonObject | None = Field(None, alias="outputSchema")
    tasks: Annotated[list[Task], Field(min_length=1)]

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not SEMVER_RE.match(value):
            raise rule_error(
                "schema_violation",
                f"sub-workflow version {value!r} is not a semantic version",
                help="write MAJOR.MINOR.PATCH, e.g. 0.1.0",
            )
        return value

    @model_validator(mode="after")
    def _schemas(self) -> Self:
        """Both boundary schemas are usable, located at the definition's own key — checked
        here, so a definition no task invokes (yet) is held to it too."""
        check_json_schema(self.input_schema, "inputSchema")
        check_json_schema(self.output_schema, "outputSchema")
        return self

"""The operation registry is complete and agrees with every part that reads it.

Each test fails when an entry lacks a piece (executor, builder, policy name) or a piece has no
entry (an executor nobody names, a DSL kind with no entry, a spec kind missing).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest
from pydantic import ValidationError as PydanticValidationError

from agentctl.core import registry
from agentctl.core.dsl.actions import Action
from agentctl.core.dsl.agents import Provider, Tool
from agentctl.core.evaluate import PURE_ACTIONS
from agentctl.core.operations import Operation
from agentctl.errors import InvalidOperationError
from agentctl.workers.executors import ExecOutcome
from tests import registry_ext

EXECUTORS = Path(__file__).resolve().parents[2] / "agentctl" / "workers" / "executors"

# spec/dsl.md §3 and §5, in the spec's order.
SPEC_ACTION_KINDS = (
    "builtin.assign",
    "builtin.assert",
    "builtin.read",
    "builtin.write",
    "builtin.shell.exec",
    "extension.process",
    "builtin.memory.read",
    "builtin.memory.write",
    "builtin.long_term_memory.read",
    "builtin.long_term_memory.write",
    "builtin.long_term_memory.search",
    "builtin.long_term_memory.promote",
    "mcp.call",
    "a2a.delegate",
)
SPEC_PROVIDER_KINDS = ("fake", "openai", "azure_openai", "anthropic", "google")
# The spec's built-in tool kinds, then ours: an MCP server's tool (docs/protocols.md).
SPEC_TOOL_KINDS = ("builtin.workspace.read", "builtin.workspace.write", "builtin.echo", "mcp.tool")
LATE: set[str] = set()  # [late] action kinds this version does not accept yet (none left)
# The least a process extension must declare (spec/dsl.md §3, extension.process).
EXTENSION_DECLARATION = {
    "protocolVersion": "agentctl.dev/process-extension/v1",
    "inputSchema": {"type": "object"},
    "outputSchema": {"type": "object"},
    "capabilities": ["demo"],
}
# §3: effectful kinds pass policy under a policy name, except long-term-memory reads/searches.
NO_POLICY_NAME = {"builtin.long_term_memory.read", "builtin.long_term_memory.search"}


def _resolve(target: str) -> object:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _executor_functions() -> set[str]:
    """Every ``execute_*`` coroutine function defined under agentctl/workers/executors/."""
    found = set()
    for path in EXECUTORS.rglob("*.py"):
        parts = path.relative_to(EXECUTORS).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        module = ".".join(("agentctl.workers.executors", *parts))
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("execute_"):
                found.add(f"{module}:{node.name}")
    return found


def test_the_spec_kinds_are_exactly_the_registry_entries() -> None:
    assert registry.names("action") == SPEC_ACTION_KINDS
    assert registry.names("model") == SPEC_PROVIDER_KINDS
    assert registry.names("tool") == SPEC_TOOL_KINDS
    assert {op.name for op in registry.entries("action") if not op.accepted} == LATE


@pytest.mark.parametrize("op", registry.entries(), ids=lambda op: op.name)
def test_every_worker_entry_names_an_importable_executor(op: Operation) -> None:
    if op.placement != "worker" or not op.runnable:
        assert op.executor is None or op.placement == "worker"
        if op.executor is None:
            return
    assert op.executor is not None, f"{op.name} runs in a worker but names no executor"
    func = _resolve(op.executor)
    assert inspect.iscoroutinefunction(func)
    params = list(inspect.signature(func).parameters)
    assert len(params) == 1, f"{op.executor} must take exactly the Execute message"
    assert inspect.signature(func).return_annotation in (ExecOutcome, "ExecOutcome")


def test_every_executor_function_is_named_by_an_entry() -> None:
    named = {op.executor for op in registry.entries() if op.executor is not None}
    assert _executor_functions() <= named, _executor_functions() - named
    assert named <= _executor_functions()


@pytest.mark.parametrize("op", registry.entries(), ids=lambda op: op.name)
def test_every_runnable_effect_has_a_builder(op: Operation) -> None:
    if op.runnable and not op.is_pure and op.family != "internal":
        assert op.builder is not None, f"{op.name} is runnable but cannot build its request"
    if op.is_pure:  # nothing of it runs in a worker; only a pure tool's held call is built
        assert op.executor is None
        assert op.builder is None or op.family == "tool"


def test_every_pure_action_kind_has_an_implementation() -> None:
    pure = {op.name for op in registry.entries("action") if op.is_pure}
    assert pure == set(PURE_ACTIONS)


def test_entries_sharing_an_effect_operation_share_the_executor() -> None:
    by_operation: dict[str, set[str | None]] = {}
    for op in registry.entries():
        if op.placement == "worker" and op.runnable:
            by_operation.setdefault(op.effect_operation, set()).add(op.executor)
    assert all(len(executors) == 1 for executors in by_operation.values()), by_operation


@pytest.mark.parametrize("op", registry.entries("action"), ids=lambda op: op.name)
def test_policy_names_where_the_spec_gives_them(op: Operation) -> None:
    if op.is_pure or op.name in NO_POLICY_NAME:
        assert op.policy_name is None
    else:
        assert op.policy_name, f"{op.name} is effectful but has no policy name"


def test_only_what_this_version_executes_is_runnable() -> None:
    runnable = {op.name for op in registry.entries() if op.runnable}
    refused = set(LATE)  # every kind this version accepts, it runs
    assert {kind for kind in ("openai", "azure_openai", "anthropic", "google")} <= runnable
    assert runnable.isdisjoint(refused)
    assert {op.name for op in registry.entries() if not op.runnable} == refused


def test_the_dsl_accepts_exactly_the_accepted_action_kinds() -> None:
    for op in registry.entries("action"):
        config = {"kind": op.name, **({"command": "true"} if op.is_process else {})}
        if "protocolVersion" in op.config_keys:
            config.update(EXTENSION_DECLARATION)
        if op.accepted:
            assert Action.model_validate(config).kind == op.name
        else:
            with pytest.raises(PydanticValidationError, match=r"not supported by this version"):
                Action.model_validate(config)


def test_an_unknown_kind_lists_the_registry_in_order() -> None:
    with pytest.raises(PydanticValidationError) as caught:
        Action.model_validate({"kind": "builtin.nope"})
    (error,) = caught.value.errors()
    quoted = [repr(name) for name in SPEC_ACTION_KINDS]
    assert error["type"] == "literal_error"
    assert error["msg"] == f"Input should be {', '.join(quoted[:-1])} or {quoted[-1]}"


def test_tool_and_provider_kinds_come_from_the_registry() -> None:
    schema = {"type": "object", "additionalProperties": False, "properties": {}, "required": []}
    echo = Tool.model_validate({"kind": "builtin.echo", "inputSchema": schema})
    entry = registry.lookup("builtin.echo")
    assert (echo.capability, echo.effect_class, echo.idempotency, echo.risk) == (
        entry.capability,
        entry.effect_class,
        entry.idempotency,
        entry.risk,
    )
    for op in registry.entries("tool"):
        assert op.capability and op.idempotency_choices[0] == op.idempotency
    with pytest.raises(PydanticValidationError):
        Provider.model_validate({"kind": "mistral"})


def test_misplaced_keys_name_the_kinds_that_accept_them() -> None:
    with pytest.raises(
        PydanticValidationError,
        match=r"only process kinds \(builtin\.shell\.exec, extension\.process\)",
    ):
        Action.model_validate({"kind": "builtin.read", "command": "ls"})
    with pytest.raises(PydanticValidationError, match=r"only extension\.process, mcp\.call accept"):
        Action.model_validate({"kind": "builtin.read", "idempotency": "keyed"})


def test_register_refuses_a_second_entry_of_a_name() -> None:
    with pytest.raises(InvalidOperationError, match="already registered"):
        registry.register(registry.lookup("builtin.write"))


def _scanned_executor(operation: str) -> str | None:
    """What ``executor_for_operation`` means: the first entry, in order, naming an executor."""
    for op in registry.entries():
        if op.effect_operation == operation and op.executor is not None:
            return op.executor
    return None


def test_the_executor_index_follows_register_and_unregister() -> None:
    operations = {op.effect_operation for op in registry.entries()} | {"bench.noop"}
    for operation in operations:
        assert registry.executor_for_operation(operation) == _scanned_executor(operation)
    shell = registry.lookup("builtin.shell.exec")
    assert shell.executor is not None
    twin = dataclasses.replace(
        shell, name="test.shell_twin", operation=shell.effect_operation, executor="tests.x:run"
    )
    alone = dataclasses.replace(registry_ext.MARKER, name="test.index_only")
    registry.register(twin)
    registry.register(alone)
    try:
        # The twin shares the shell's effect operation: the earlier entry's executor stays.
        assert registry.executor_for_operation(twin.effect_operation) == shell.executor
        assert registry.executor_for_operation("test.index_only") == registry_ext.MARKER.executor
    finally:
        registry.unregister(twin.name)
        registry.unregister(alone.name)
    assert registry.executor_for_operation("test.index_only") is None
    assert registry.executor_for_operation(shell.effect_operation) == shell.executor


def test_a_model_call_is_named_as_its_provider_kind_and_no_other_entry_is() -> None:
    """The original names a model call's effect by the provider kind (``fake``): the model
    entries are named so, and no other operation takes a provider kind's name."""
    kinds = set(SPEC_PROVIDER_KINDS)
    assert {op.name for op in registry.entries() if registry.is_model(op.name)} == kinds
    assert all(registry.provider_kind(kind) == kind for kind in kinds)
    assert {op.name for op in registry.entries() if op.family != "model"}.isdisjoint(kinds)
    clash = dataclasses.replace(registry.lookup("builtin.echo"), name="fake")
    with pytest.raises(InvalidOperationError):
        registry.register(clash)
    assert registry.find_model("builtin.write") is None  # only model entries answer a kind


def test_a_legacy_model_operation_name_resolves_to_its_entry_for_recorded_data() -> None:
    """Ledgers written before hold ``model.<kind>``: recorded effects are read through it."""
    for kind in SPEC_PROVIDER_KINDS:
        legacy = f"model.{kind}"
        assert registry.find(legacy) is registry.lookup(kind) is registry.model_operation(kind)
        assert registry.is_model(legacy) and registry.provider_kind(legacy) == kind
        assert registry.same_operation(legacy, kind)
        assert registry.executor_for_operation(legacy) == registry.lookup(kind).executor
    # Only a model entry has the alias: nothing else is found under the prefix.
    assert registry.find("model.builtin.write") is None
    assert registry.find("model.mistral") is None
    assert not registry.is_model("builtin.write") and registry.provider_kind("mcp.call") is None
    assert not registry.same_operation("model.fake", "openai")

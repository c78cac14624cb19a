"""The built-in entries of the operation registry: spec/dsl.md §3 (actions) and §5 (agents).

Pure data. Each entry is one row of the spec's tables; ``agentctl.core.registry`` seeds itself
from ``BUILTIN_OPERATIONS`` in this order, which is also the order the DSL lists kinds in.

Invariants: a worker-placed runnable entry names its executor; a runnable non-pure entry
has a builder; [late] kinds are ``accepted=False`` (the DSL refuses them) and every entry this
version cannot execute is ``runnable=False`` (check and plan accept it, run refuses it).
"""

from __future__ import annotations

from agentctl.core import a2a, mcp
from agentctl.core import builders as b
from agentctl.core import extension as ext
from agentctl.core.effects import EffectClass as C
from agentctl.core.effects import Idempotency as I
from agentctl.core.effects import Predictability as P
from agentctl.core.effects import Risk as R
from agentctl.core.longterm import actions as lt
from agentctl.core.longterm.entries import literal_write_problems
from agentctl.core.longterm.search import literal_search_problems
from agentctl.core.operations import (
    EXTENSION_KEYS,
    IDEMPOTENCY_KEY,
    PROCESS_KEYS,
    Operation,
    WithInput,
)

_X = "agentctl.workers.executors"
MCP_EXECUTOR = f"{_X}.mcp:execute_mcp"
READ_EXECUTOR = f"{_X}.files:execute_read"
WRITE_EXECUTOR = f"{_X}.files:execute_write"
_FULL, _PART, _EXEC = P.FULLY_PREDICTABLE, P.PARTIALLY_PREDICTABLE, P.REQUIRES_EXECUTION
_ANY = tuple(I)


def _pure(name: str, *with_keys: str, required: tuple[WithInput, ...] = ()) -> Operation:
    keys = frozenset(with_keys) if with_keys else None
    return Operation(
        name, "action", C.PURE, R.LOW, I.PURE, _FULL, "pure", with_keys=keys, with_required=required
    )


def _keys(*names: str) -> frozenset[str]:
    return frozenset(names)


_KEY = WithInput("key", non_empty=True)  # a memory key, working or long-term
_PATH = WithInput("path", local_path=True)  # a file in the workspace


ACTIONS: tuple[Operation, ...] = (
    _pure("builtin.assign"),
    _pure("builtin.assert", "that", "message", required=(WithInput("that", "boolean"),)),
    Operation(
        "builtin.read",
        "action",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _PART,
        "worker",
        policy_name="filesystem.read",
        builder=b.build_read,
        with_keys=_keys("path"),
        with_required=(_PATH,),
        executor=READ_EXECUTOR,
        confines="read",
    ),
    Operation(
        "builtin.write",
        "action",
        C.WORKSPACE_MUTATE,
        R.MEDIUM,
        I.IDEMPOTENT,
        _PART,
        "worker",
        policy_name="filesystem.write",
        builder=b.build_write,
        with_keys=_keys("path", "content"),
        with_required=(_PATH, WithInput("content")),
        executor=WRITE_EXECUTOR,
        preview="file_write",
        confines="write",
    ),
    Operation(
        "builtin.shell.exec",
        "action",
        C.PROCESS_EXECUTION,
        R.HIGH,
        I.UNKNOWN,
        _EXEC,
        "worker",
        policy_name="process.exec",
        config_keys=frozenset(PROCESS_KEYS),
        builder=b.build_shell,
        with_keys=_keys(),
        estimate=b.shell_estimate,
        executor=f"{_X}.shell:execute_shell",
        preview="stand_in",
        confines="cwd",
    ),
    Operation(
        "extension.process",
        "action",
        C.PROCESS_EXECUTION,
        R.HIGH,
        I.UNKNOWN,
        _EXEC,
        "worker",
        policy_name="process.exec",
        idempotency_choices=_ANY,
        config_keys=frozenset((*PROCESS_KEYS, *EXTENSION_KEYS, IDEMPOTENCY_KEY)),
        builder=ext.build_extension,
        estimate=ext.extension_estimate,
        effect_timeout=ext.effect_timeout,
        executor="agentctl.workers.executors.extension:execute_extension",
        preview="stand_in",
        confines="cwd",
    ),
    _pure("builtin.memory.read", "key", required=(_KEY,)),
    Operation(
        "builtin.memory.write",
        "action",
        C.INTERNAL_STATE,
        R.LOW,
        I.KEYED,
        _FULL,
        "coordinator",
        policy_name="memory.write",
        builder=b.build_memory_write,
        with_keys=_keys("key", "value"),
    ),
    Operation(
        "builtin.long_term_memory.read",
        "action",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _EXEC,
        "coordinator",
        builder=lt.build_long_term_read,
        with_keys=_keys("key", "namespace"),
        with_required=(_KEY,),
    ),
    Operation(
        "builtin.long_term_memory.write",
        "action",
        C.EXTERNAL_MUTATE,
        R.MEDIUM,
        I.KEYED,
        _EXEC,
        "coordinator",
        policy_name="memory.write",
        builder=lt.build_long_term_write,
        with_keys=_keys(
            "key", "namespace", "value", "entry", "text", "metadata", "content", "retentionDays"
        ),
        with_check=literal_write_problems,
        with_required=(_KEY,),
        preview="stand_in",
    ),
    Operation(
        "builtin.long_term_memory.search",
        "action",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _EXEC,
        "coordinator",
        builder=lt.build_long_term_search,
        with_keys=_keys("query", "text", "mode", "limit", "filters", "namespace"),
        with_check=literal_search_problems,
    ),
    # Promotion copies a value (usually a search or read result) into working memory: a
    # working-memory write of its own kind, under the same memoryWrites rules.
    Operation(
        "builtin.long_term_memory.promote",
        "action",
        C.INTERNAL_STATE,
        R.LOW,
        I.KEYED,
        _FULL,
        "coordinator",
        policy_name="memory.write",
        builder=lt.build_long_term_promote,
        with_keys=_keys("key", "value", "entry"),
    ),
    Operation(
        "mcp.call",
        "action",
        C.NETWORK,
        R.MEDIUM,
        I.UNKNOWN,
        _EXEC,
        "worker",
        policy_name="mcp.call",
        idempotency_choices=_ANY,
        config_keys=frozenset((IDEMPOTENCY_KEY,)),
        builder=mcp.build_mcp_call,
        with_keys=_keys("server", "tool", "arguments"),
        with_check=mcp.literal_call_problems,
        estimate=mcp.mcp_call_estimate,
        executor=MCP_EXECUTOR,
        preview="stand_in",
        reach=mcp.reach_mcp_call,
    ),
    Operation(
        "a2a.delegate",
        "action",
        C.REMOTE_AGENT,
        R.HIGH,
        I.UNKNOWN,
        _EXEC,
        "worker",
        policy_name="a2a.delegate",
        builder=a2a.build_delegate,
        with_keys=_keys("peer", "messageId", "message"),
        with_check=a2a.literal_delegate_problems,
        executor=f"{_X}.a2a:execute_delegate",
        preview="stand_in",
        reach=a2a.reach_delegate,
    ),
)


def _model(provider_kind: str, executor: str) -> Operation:
    """A model call: at-most-once after start, so a lost answer leaves it uncertain.

    Named by the provider kind alone (``fake``): the original's name for a model call's
    effect, which scripts poll for; ledgers from before hold ``model.<kind>``, an alias the
    registry resolves. Policy judges model calls by provider name (``policy.providers``),
    not by a policy name.
    """
    return Operation(
        provider_kind,
        "model",
        C.MODEL,
        R.MEDIUM,
        I.AT_MOST_ONCE,
        _EXEC,
        "worker",
        builder=b.build_model_call,
        estimate=b.model_estimate,
        executor=executor,
        preview="stand_in",
        reach=b.reach_provider,
    )


_P = f"{_X}.providers"
# The real providers' executors live in workers/executors/providers/; the coordinator
# resolves their credentials (coordinator/modelcalls.py) and settles their usage.
MODELS: tuple[Operation, ...] = (
    _model("fake", f"{_X}.models:execute_fake"),
    _model("openai", f"{_P}.openai_responses:execute_openai"),
    _model("azure_openai", f"{_P}.azure_openai:execute_azure_openai"),
    _model("anthropic", f"{_P}.anthropic_messages:execute_anthropic"),
    _model("google", f"{_P}.google_gemini:execute_google"),
)

# Tool kinds: policy judges a tool call by the tool's own name (its id in spec.tools).
TOOLS: tuple[Operation, ...] = (
    Operation(
        "builtin.workspace.read",
        "tool",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _PART,
        "worker",
        idempotency_choices=(I.IDEMPOTENT,),
        operation="builtin.read",
        builder=b.build_tool_read,
        estimate=b.tool_call_estimate,
        executor=READ_EXECUTOR,
        capability="filesystem.read",
        required_inputs=("path",),
        shape=b.shape_tool_read,
    ),
    Operation(
        "builtin.workspace.write",
        "tool",
        C.WORKSPACE_MUTATE,
        R.MEDIUM,
        I.IDEMPOTENT,
        _PART,
        "worker",
        idempotency_choices=(I.IDEMPOTENT, I.KEYED),
        operation="builtin.write",
        builder=b.build_tool_write,
        estimate=b.tool_call_estimate,
        executor=WRITE_EXECUTOR,
        capability="filesystem.write",
        required_inputs=("path", "content"),
        shape=b.shape_tool_write,
    ),
    Operation(
        "builtin.echo",
        "tool",
        C.PURE,
        R.LOW,
        I.PURE,
        _FULL,
        "pure",
        idempotency_choices=(I.PURE,),
        # Answered in the coordinator; built and recorded only when held for an approval,
        # and counted like any tool call (spec/cli.md §7: one toolCalls unit).
        builder=b.build_tool_echo,
        estimate=b.tool_call_estimate,
        capability="internal",
    ),
    # A tool of an MCP server; its declared idempotency is the workflow's word, never the
    # server's annotations (unknown unless declared).
    Operation(
        "mcp.tool",
        "tool",
        C.NETWORK,
        R.MEDIUM,
        I.UNKNOWN,
        _EXEC,
        "worker",
        idempotency_choices=(I.UNKNOWN, I.PURE, I.IDEMPOTENT, I.KEYED, I.AT_MOST_ONCE),
        operation="mcp.call",
        builder=mcp.build_mcp_tool_call,
        estimate=b.tool_call_estimate,
        executor=MCP_EXECUTOR,
        capability="mcp",
        reach=mcp.reach_mcp_tool,
        call_timeout=mcp.tool_call_timeout,
    ),
)

# Worker operations no task names directly.
INTERNAL: tuple[Operation, ...] = (
    Operation(
        "container.preflight",
        "internal",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _EXEC,
        "worker",
        executor=f"{_X}.shell:execute_preflight",
    ),
    # An agent's look at an MCP server's tools before its first model call: recorded, so a
    # resumed agent shows the model the same tools as before.
    Operation(
        mcp.LIST_OPERATION,
        "internal",
        C.OBSERVE,
        R.LOW,
        I.IDEMPOTENT,
        _EXEC,
        "worker",
        builder=mcp.build_mcp_list,
        executor=MCP_EXECUTOR,
        call_timeout=mcp.listing_timeout,
    ),
)

BUILTIN_OPERATIONS: tuple[Operation, ...] = ACTIONS + MODELS + TOOLS + INTERNAL

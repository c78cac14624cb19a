"""What one operation is: the registry entry type and the inputs and outputs of its builder.

An *operation* is anything a task can ask for: an action kind (``builtin.write``), a model call
of one provider kind (named as the kind: ``fake``), an agent tool kind
(``builtin.workspace.read``) or an internal worker operation (``container.preflight``).
``agentctl.core.registry`` holds one ``Operation`` per name; this module only defines the
shapes, so the builders and the registry can both import it without a cycle.

Invariants:
- an ``Operation`` is frozen, pure data plus pure functions: a builder never reads a clock,
  a file or the environment, and returns secret *references* unresolved (``Built.secret_env``
  for process environments, ``Built.secret_refs`` for any other place in the request); the
  coordinator resolves them generically and records only their source and SHA-256;
- ``placement`` says where the operation happens: ``pure`` (evaluated in the coordinator, no
  effect record), ``coordinator`` (a recorded effect on state the coordinator owns, such as
  working or long-term memory) or ``worker`` (a recorded effect run by the named executor);
- ``with_keys`` is the one table of which ``with`` keys an action kind reads; the compiler
  rejects any other key, so a misspelt or misplaced key is never silently ignored;
- ``executor`` is a ``"module:function"`` reference the worker imports; the coordinator names
  it in each ``Execute`` it sends, so a kind registered at run time runs in a real worker;
- ``reach`` says which URLs a task of a network kind can call, from its static definition
  alone (a templated server or peer name reaches every declared one), so the egress
  pre-flight judges every endpoint before a run exists; a network kind without it would
  escape the pre-flight (the worker's own check still holds);
- ``call_timeout`` (tools, and internal operations an agent makes) is the kind's own timeout
  for one call, read from the run's settings (an MCP server's ``timeoutSeconds``): an agent's
  call uses the tool's declared ``timeoutSeconds`` first, then this, then the agent's own;
- ``effect_timeout`` is the worker's bound of a whole effect, from its task's
  ``timeoutSeconds``, for a kind whose executor bounds each of several calls by it (an
  extension's handshake and invocation): it allows for all of them, so the executor's own
  per-call timeouts are what fire, and say which call timed out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentctl.core.effects import EffectClass, Idempotency, Predictability, Risk
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.timeouts import TASK_TIMEOUT_SECONDS

Family = Literal["action", "model", "tool", "internal"]
Placement = Literal["pure", "coordinator", "worker"]
# How check mode and unchanged content treat the effect: ``execute`` runs it even in check
# mode (internal and observe work), ``stand_in`` answers ``requires_execution`` in check mode,
# ``file_write`` previews a diff in check mode and is no effect at all when nothing changes.
Preview = Literal["execute", "stand_in", "file_write"]
# Which path of its request the policy confines (spec/dsl.md §7), judged before the effect is
# requested or held for approval (``sandbox.confine``): a file read inside the workspace, a
# file write inside a writable root, a process ``cwd`` inside the workspace.
Confinement = Literal["read", "write", "cwd"]

# Action-config keys beyond the common ones (kind, description, with); an operation accepts a
# subset, and the DSL's misplaced-key rules derive from it. ``timeoutSeconds`` is common to
# every kind that does work (``Operation.is_pure`` False): a pure kind has nothing to bound.
TIMEOUT_KEY = "timeoutSeconds"
PROCESS_KEYS = (
    "command",
    "args",
    "cwd",
    "env",
    "stdoutLimitBytes",
    "stderrLimitBytes",
    "combinedOutputLimitBytes",
    "isolation",
    "container",
)
EXTENSION_KEYS = ("protocolVersion", "inputSchema", "outputSchema", "capabilities")
IDEMPOTENCY_KEY = "idempotency"
_NON_MUTATING = frozenset({EffectClass.PURE, EffectClass.OBSERVE, EffectClass.MODEL})


@dataclass(frozen=True)
class WithInput:
    """One ``with`` key an action kind cannot run without, and the JSON kind of its value.

    ``check`` refuses a task whose merged ``with`` (action defaults under the task's own)
    lacks the key, or gives it a literal of another kind; a template is judged when rendered.
    """

    key: str
    kind: Literal["string", "boolean"] = "string"
    non_empty: bool = False  # a string that must not be "" (a memory key)
    local_path: bool = False  # a workspace file path: a URL is refused, never fetched


@dataclass(frozen=True)
class RunContext:
    """What a builder may know about the run: where it runs and under which settings."""

    workspace: str
    policy: Mapping[str, JsonValue]
    long_term_namespace: str = "default"
    long_term: Mapping[str, JsonValue] = field(default_factory=dict)  # spec.memory.longTerm
    mcp_servers: Mapping[str, JsonValue] = field(default_factory=dict)  # spec.mcpServers
    pricing: Mapping[str, JsonValue] | None = None  # ``runtime.pricing`` (``core.pricing``)
    a2a_peers: Mapping[str, JsonValue] = field(default_factory=dict)  # spec.a2aPeers
    interactive: bool = False  # `--interactive`: approvals are asked for, never denied instead
    # The real paths of the ledger's own state (database, files beside it, artifact store):
    # file effects are sent them, and refuse to read or write there.
    protected_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildInput:
    """One request to build: the task, its resolved configuration and its rendered input.

    ``config`` is the normalized action definition (actions), the tool definition (tools) or
    ``{"agent": …, "provider": …}`` (model calls); ``name`` is the action, tool or provider
    name; ``args`` the rendered ``with`` (actions), the tool-call arguments (tools) or the
    conversation so far (model calls).
    """

    task_id: str
    name: str
    config: Mapping[str, JsonValue]
    args: JsonValue
    run: RunContext
    memory_writes: tuple[str, ...] = ()
    timeout_seconds: float = float(TASK_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class Built:
    """A built effect: what the ledger records and what the worker is sent.

    ``secret_env`` maps names to unresolved secret references; when it is non-empty both
    ``recorded["env"]`` and ``request["env"]`` hold those names (among plain, rendered
    values), and the coordinator replaces them with the recorded form (source + SHA-256) and
    the value respectively.

    ``secret_refs`` maps JSON Pointers (RFC 6901, e.g. ``/credential``, ``/headers/X-Org``,
    ``/egress/customCa``) to unresolved references. Each pointer names a place in
    ``request`` that holds the reference; the coordinator puts the resolved value there
    (``replace_at``) and, where ``recorded`` holds the same pointer, the recorded form. So
    the recorded input never carries a value, and its identity changes with the secret.
    """

    recorded: JsonObject
    request: JsonObject
    secret_env: Mapping[str, JsonValue] = field(default_factory=dict)
    secret_refs: Mapping[str, JsonValue] = field(default_factory=dict)


def pointer(*parts: str) -> str:
    """The JSON Pointer of ``parts`` (``~`` and ``/`` escaped as RFC 6901 says)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def has_pointer(document: JsonValue, where: str) -> bool:
    """Whether ``where`` names an existing member of nested objects in ``document``."""
    node = document
    for part in _parts(where):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def replace_at(document: JsonObject, where: str, value: JsonValue) -> JsonObject:
    """A copy of ``document`` with the member at ``where`` set to ``value`` (copies only the
    objects on the path; the member's parent objects must exist)."""
    parts = _parts(where)
    if not parts:
        raise ValueError("an empty JSON Pointer names the whole document")
    head, rest = parts[0], parts[1:]
    copy = dict(document)
    if not rest:
        copy[head] = value
        return copy
    child = copy.get(head)
    if not isinstance(child, dict):
        raise KeyError(f"no object at {where!r}")
    copy[head] = replace_at(child, pointer(*rest), value)
    return copy


def _parts(where: str) -> list[str]:
    if where and not where.startswith("/"):
        raise ValueError(f"not a JSON Pointer: {where!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in where.split("/")[1:]]


@dataclass(frozen=True)
class Endpoint:
    """A URL a task may call, and what it belongs to (``provider main``, ``MCP server x``)."""

    owner: str
    url: str
    # False when the task reaches it only if a template renders to its name (every declared
    # entry is listed then): a URL to allow, not a secret a run is sure to need. Not compared.
    named: bool = field(default=True, compare=False)


@dataclass(frozen=True)
class ReachInput:
    """What a ``reach`` function may look at: one task's static definition, never rendered.

    ``name`` and ``config`` are as in ``BuildInput``; ``with_`` is an action's unrendered
    ``with`` (templates unresolved; None for models and tools).
    """

    name: str
    config: Mapping[str, JsonValue]
    with_: JsonValue
    mcp_servers: Mapping[str, JsonValue]  # spec.mcpServers
    a2a_peers: Mapping[str, JsonValue]  # spec.a2aPeers


def named_endpoints(
    what: str, given: JsonValue, declared: Mapping[str, JsonValue], url_key: str
) -> tuple[Endpoint, ...]:
    """The endpoint of the declared entry ``given`` names; every declared entry's when
    ``given`` is not a declared name (a template: it may render to any of them)."""
    named = isinstance(given, str) and given in declared
    names = [given] if isinstance(given, str) and named else sorted(declared)
    found: list[Endpoint] = []
    for name in names:
        url = as_object(declared[name]).get(url_key)
        if isinstance(url, str):
            found.append(Endpoint(f"{what} {name}", url, named=named))
    return tuple(found)


Builder = Callable[[BuildInput], Built]
# The problems of the literal (untemplated) ``with`` values of one mapping: (key, problem).
WithCheck = Callable[[Mapping[str, JsonValue]], list[tuple[str, str]]]
Estimate = Callable[[Mapping[str, JsonValue]], dict[str, int]]
Shape = Callable[[JsonValue, Mapping[str, JsonValue]], JsonValue]
Reach = Callable[[ReachInput], tuple[Endpoint, ...]]
# (name, config, run) as in ``BuildInput`` → the kind's own timeout of one call, in seconds
# (None: the kind has none for it).
CallTimeout = Callable[[str, Mapping[str, JsonValue], "RunContext"], float | None]
# The task's ``timeoutSeconds`` → the worker's bound of one whole effect, in seconds.
EffectTimeout = Callable[[float], float]


@dataclass(frozen=True)
class Operation:
    """One registry entry; see the module docstring for the meaning of each part."""

    name: str
    family: Family
    effect_class: EffectClass
    risk: Risk
    idempotency: Idempotency  # the default
    predictability: Predictability
    placement: Placement
    policy_name: str | None = None  # actions: the name policy allows or denies (spec §3)
    # What a workflow may declare instead of the default: for actions, a non-empty tuple
    # admits the ``idempotency`` key; for tools, the allowed values (the default first).
    idempotency_choices: tuple[Idempotency, ...] = ()
    config_keys: frozenset[str] = frozenset()
    # Actions: the ``with`` keys the kind reads; any other key fails ``check``. None: any key
    # (``builtin.assign`` takes arbitrary data; model, tool and internal entries have no ``with``).
    with_keys: frozenset[str] | None = None
    # Actions: what ``check`` can already tell about literal ``with`` values (a bad search
    # ``mode``), so it fails at compile time rather than when the task runs.
    with_check: WithCheck | None = None
    # Actions: the ``with`` keys the kind needs, so a task without one fails ``check`` (exit 2)
    # rather than its run; the keys must also be in ``with_keys``.
    with_required: tuple[WithInput, ...] = ()
    accepted: bool = True  # False: a [late] kind the DSL refuses (unsupported_capability)
    runnable: bool = True  # False: check and plan accept it, `run` refuses it
    operation: str | None = None  # the recorded effect operation, when not ``name``
    builder: Builder | None = None
    estimate: Estimate | None = None
    executor: str | None = None  # "module:function", for worker placement
    preview: Preview = "execute"
    confines: Confinement | None = None  # entries sharing an effect operation read the action's
    capability: str | None = None  # tools: the capability the kind implies
    required_inputs: tuple[str, ...] = ()  # tools: inputSchema properties the kind needs
    shape: Shape | None = None  # tools: (arguments, worker output) → the tool's output
    reach: Reach | None = None  # network kinds: the URLs a task can call (egress pre-flight)
    call_timeout: CallTimeout | None = None  # an agent's calls of the kind: its own timeout
    effect_timeout: EffectTimeout | None = None  # None: the task's timeout bounds the effect

    def effect_seconds(self, task_seconds: float) -> float:
        """The worker's bound of one effect of this kind, from its task's timeout."""
        return task_seconds if self.effect_timeout is None else self.effect_timeout(task_seconds)

    @property
    def is_pure(self) -> bool:
        return self.placement == "pure"

    @property
    def effect_operation(self) -> str:
        """The operation name recorded on the effect row (and part of its identity)."""
        return self.operation or self.name

    @property
    def mutating(self) -> bool:
        """Whether it may change state, which makes compensating it meaningful (§4.10)."""
        return self.accepted and self.effect_class not in _NON_MUTATING

    @property
    def is_process(self) -> bool:
        """Whether it takes the process configuration (command, args, env, limits, …)."""
        return "command" in self.config_keys

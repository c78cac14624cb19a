"""Credential presence: ``agentctl auth check`` and the credential pre-flight of ``run``.

Invariants:
- presence only: a value is never read (an ``{env}`` variable is looked up by name and an
  empty one is missing, a ``{file}`` is checked for existence, readability and a non-zero
  size) and a ``{process}`` helper never runs (it is reported ``unchecked`` and resolved at
  dispatch time); a value present but unfit for a header (whitespace around it, non-ASCII)
  is refused when it is resolved (``secrets``);
- ``run`` pre-flights only what its tasks reach — the providers its agent tasks use, the
  header references of the MCP servers and A2A peers its tasks and tools name — before any
  database exists, so a missing key exits 6 and creates no state (spec/cli.md §1, order of
  ``run``); a server or peer a template selects is checked when the call is made, since the
  run may never need it; ``resume`` pre-flights only the tasks still to finish (§5);
- an action's ``env`` and ``policy.network.customCa`` are resolved only as a task starts:
  ``run`` does not pre-flight them (its documented pre-flight is the providers', MCP
  servers' and A2A peers'); ``doctor`` reports them (``task_time_secrets``);
- reports name references (``env OPENAI_API_KEY``), never values.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from agentctl.coordinator import secrets
from agentctl.coordinator.modelcalls import DEFAULT_CREDENTIAL_ENVS
from agentctl.core.a2a import PEER_OWNER
from agentctl.core.egress_reach import named_owners
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.mcp import SERVER_OWNER
from agentctl.core.plan import Plan
from agentctl.core.policy import policy_workspace
from agentctl.core.providerinfo import REFERENCE_KIND_NAMES, secret_reference
from agentctl.errors import CredentialMissingError

NOT_AVAILABLE = ("missing", "missing_or_denied")


@dataclass(frozen=True)
class SecretStatus:
    """One secret reference of a provider and whether it is available."""

    place: str  # "credential" or "headers.<Name>"
    kind: str  # env | file | process
    reference: str  # the variable, path or helper command
    availability: secrets.Availability

    def to_json(self) -> JsonObject:
        kind = REFERENCE_KIND_NAMES.get(self.kind, self.kind)
        return {"kind": kind, "reference": self.reference, "availability": self.availability}


@dataclass(frozen=True)
class ProviderAuth:
    """The secret references of one provider."""

    provider: str
    kind: str
    credential: SecretStatus | None  # None: the provider takes no credential (fake)
    headers: tuple[SecretStatus, ...]

    def references(self) -> list[SecretStatus]:
        """Every reference: the credential first, then the headers by name."""
        return ([self.credential] if self.credential else []) + list(self.headers)

    @property
    def unavailable(self) -> list[SecretStatus]:
        return [s for s in self.references() if s.availability in NOT_AVAILABLE]

    def to_json(self) -> JsonObject:
        headers: JsonObject = {s.place.removeprefix("headers."): s.to_json() for s in self.headers}
        return {
            "provider": self.provider,
            "kind": self.kind,
            "credential": self.credential.to_json() if self.credential else None,
            "headers": headers,
        }


def _status(
    place: str,
    ref: JsonValue,
    policy: Mapping[str, JsonValue],
    workspace: str,
    *,
    empty_ok: bool = False,
) -> SecretStatus:
    defaults = DEFAULT_CREDENTIAL_ENVS if place == "credential" else frozenset()
    shown = as_object(secret_reference(ref))
    found = secrets.availability(ref, policy, workspace, default_envs=defaults, empty_ok=empty_ok)
    return SecretStatus(place, str(shown.get("kind")), str(shown.get("reference")), found)


def provider_auth(
    providers: Mapping[str, JsonValue], policy: Mapping[str, JsonValue], workspace: str
) -> list[ProviderAuth]:
    """The presence of every secret reference of ``providers`` (name → definition), by name."""
    found: list[ProviderAuth] = []
    for name, raw in sorted(providers.items()):
        provider = as_object(raw)
        ref = provider.get("credential")
        credential = None if ref is None else _status("credential", ref, policy, workspace)
        headers = tuple(
            _status(f"headers.{header}", value, policy, workspace)
            for header, value in sorted(as_object(provider.get("headers")).items())
        )
        found.append(ProviderAuth(name, str(provider.get("kind")), credential, headers))
    return found


def used_providers(plan: Plan, task_ids: Collection[str] | None = None) -> dict[str, JsonValue]:
    """The providers the plan's agent tasks (those of ``task_ids``; None: all) call."""
    used: dict[str, JsonValue] = {}
    for task in plan.tasks:
        if task.agent_config is not None and (task_ids is None or task.id in task_ids):
            used[task.agent_config.provider_name] = dict(task.agent_config.provider)
    return used


@dataclass(frozen=True)
class SecretOwner:
    """What a run needs secrets for before it starts, and the presence of each reference."""

    name: str  # as doctor names it: ``main`` (a provider), ``MCP server notes``
    label: str  # as errors name it: ``provider main``, ``MCP server notes``
    secrets: tuple[SecretStatus, ...]


def run_secrets(
    plan: Plan, workspace: str, task_ids: Collection[str] | None = None
) -> list[SecretOwner]:
    """Every secret reference the tasks ``task_ids`` (None: all) of ``plan`` are sure to need:
    their providers' credentials and headers, then the headers of the MCP servers and A2A
    peers their tasks and tools name. Secret files resolve under the policy's workspace root."""
    policy = plan.run.policy
    workspace = policy_workspace(workspace, policy)
    found = [
        SecretOwner(a.provider, f"provider {a.provider}", tuple(a.references()))
        for a in provider_auth(used_providers(plan, task_ids), policy, workspace)
    ]
    reached = named_owners(plan, task_ids)
    for what, declared in ((SERVER_OWNER, plan.run.mcp_servers), (PEER_OWNER, plan.run.a2a_peers)):
        for name, raw in sorted(declared.items()):
            owner = f"{what} {name}"
            if owner in reached:
                headers = sorted(as_object(as_object(raw).get("headers")).items())
                refs = (_status(f"headers.{h}", ref, policy, workspace) for h, ref in headers)
                found.append(SecretOwner(owner, owner, tuple(refs)))
    return found


def task_time_secrets(plan: Plan, workspace: str) -> list[SecretOwner]:
    """The secret references a run resolves only as a task starts, never pre-flighted, so
    that ``doctor`` names them ahead of it: the ``env`` of each action the plan's tasks run
    (an empty value counts, as the task passes it on), then ``policy.network.customCa`` when
    a task is sure to call a provider, MCP server or A2A peer endpoint (its TLS needs it)."""
    policy = plan.run.policy
    workspace = policy_workspace(workspace, policy)
    owners: dict[str, dict[tuple[str, str, str], SecretStatus]] = {}
    for task in plan.tasks:
        env = as_object(task.config().get("env")) if task.kind == "action" else {}
        for var, ref in sorted(env.items()):
            if isinstance(ref, str):
                continue  # a rendered template: plain data, not a reference
            status = _status(f"env.{var}", ref, policy, workspace, empty_ok=True)
            # An action run by several tasks is one owner; a sub-workflow's action of the
            # same name with other references adds them.
            owner = owners.setdefault(f"action {task.action or task.id}", {})
            owner.setdefault((status.place, status.kind, status.reference), status)
    found = [SecretOwner(name, name, tuple(refs.values())) for name, refs in owners.items()]
    ca = as_object(policy.get("network")).get("customCa")
    if ca is not None and named_owners(plan):  # a fake provider makes no TLS connection
        tls = _status("customCa", ca, policy, workspace)
        found.append(SecretOwner("policy.network", "policy.network", (tls,)))
    return found


def may_need_secrets(plan: Plan) -> bool:
    """Whether any task of ``plan`` calls a provider, MCP server or A2A peer it names (a plan
    of only local work has nothing to pre-flight, whichever of its tasks are left)."""
    return bool(used_providers(plan)) or bool(named_owners(plan))


def preflight_credentials(
    plan: Plan,
    workspace: str,
    *,
    preview: bool = False,
    task_ids: Collection[str] | None = None,
) -> None:
    """Refuse, before any state exists, a run whose providers lack a credential or header, or
    whose MCP servers or A2A peers lack a header; ``task_ids``: only those tasks' (a resume's
    tasks still to finish). A preview (``run --check``) calls nothing, so it needs none."""
    if preview:
        return
    for owner in run_secrets(plan, workspace, task_ids):
        for status in owner.secrets:
            if status.availability not in NOT_AVAILABLE:
                continue
            why = (
                "is not available"
                if status.availability == "missing"
                else "is not available under policy (environmentAllowlist / secretFileRoots)"
            )
            raise CredentialMissingError(
                f"{owner.label}: {status.place} ({status.kind} {status.reference}) "
                f"{why}; nothing was created"
            )

"""Pure policy decisions (spec/dsl.md §7, spec/cli.md §9–§10): allow, require approval or deny.

The I/O half of policy (canonicalising paths, resolving symlinks, spawning) lives in
``agentctl.sandbox``; this module only judges values that are already canonical.

Invariants:
- Deny rules are checked before approval rules, and approval can only be *added*: a tool's
  ``approval: always`` forces it, ``approval: never`` never waives what the policy requires.
- Non-model effects are judged by name (tool id, or the action kind's policy name) against
  ``toolsDeny`` then a non-empty ``toolsAllow``; model effects by provider against a non-empty
  ``providers`` list.
- Paths are POSIX strings compared segment by segment, so ``/ws/out`` never contains
  ``/ws/outside``. No writable roots means every write is denied (fail closed).
- An operator's reconciliation (capability ``effect_reconciliation``) is judged by the same
  rules against the run's policy; ``--approved`` answers a required approval in advance (so
  ``nonInteractive`` never applies) but never overrides a deny or allow list
  (``authorize_reconciliation``). An internal operation (an agent's MCP ``tools/list``) is
  judged in a run by ``decide_listing`` — its own name in ``toolsDeny``, or every tool it
  serves denied, denies it — so reconciling it applies no name list; approval by class and
  risk does.
- Allowlists are exact: processes by basename, environment variables by name, hosts by exact
  name or ``*.suffix`` (which excludes the bare apex).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from agentctl.core import registry
from agentctl.core.effects import MUTATION_CLASSES, EffectClass, Risk
from agentctl.core.jsonvalue import JsonArray, JsonObject, JsonValue
from agentctl.core.process_allowlist import process_allowed as process_allowed
from agentctl.core.process_allowlist import process_denial
from agentctl.errors import PolicyDeniedError, ValidationError

ToolApproval = Literal["policy", "never", "always"]
APPROVAL_MODES = frozenset({"never", "mutations", "high_risk", "always"})
NON_INTERACTIVE_MODES = frozenset({"pause", "deny_approval", "fail"})


class DecisionKind(StrEnum):
    ALLOW = "allow"
    REQUIRE_APPROVAL = "require_approval"
    DENY = "deny"


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one effect: allow, require approval or deny, and why."""

    kind: DecisionKind
    reason: str

    @property
    def allowed(self) -> bool:
        return self.kind is DecisionKind.ALLOW

    @property
    def denied(self) -> bool:
        return self.kind is DecisionKind.DENY

    @property
    def needs_approval(self) -> bool:
        return self.kind is DecisionKind.REQUIRE_APPROVAL


def _name_list(policy: Mapping[str, JsonValue], key: str) -> JsonArray:
    """``policy[key]``, a list of names (the DSL's settings model makes it one); absent or
    empty is none. Anything else is refused (fail closed), never tested as text."""
    names = policy.get(key) or []
    if not isinstance(names, list):
        raise ValidationError(f"policy.{key} must be an array, not {names!r}")
    return names


def _deny_reason(
    policy: Mapping[str, JsonValue], name: str, is_model: bool, provider: str | None
) -> str | None:
    if is_model:
        providers = _name_list(policy, "providers")
        if providers and provider not in providers:
            return f"provider {provider!r} is not in policy.providers"
        return None
    if name in _name_list(policy, "toolsDeny"):
        return f"{name!r} is in policy.toolsDeny"
    allow = _name_list(policy, "toolsAllow")
    if allow and name not in allow:
        return f"{name!r} is not in policy.toolsAllow"
    return None


def tool_approval(value: object) -> ToolApproval:
    """A tool's declared ``approval`` (the DSL admits only these three; default ``policy``)."""
    if value == "never":
        return "never"
    return "always" if value == "always" else "policy"


def approval_required(policy: Mapping[str, JsonValue], effect_class: str, risk: str) -> bool:
    """Whether ``policy.approval`` alone requires approval for this class and risk."""
    mode = policy.get("approval", "mutations")
    if mode not in APPROVAL_MODES:
        raise ValidationError(f"unknown policy.approval {mode!r}")
    if mode == "always":
        return True
    if mode == "high_risk":
        return Risk(risk) in (Risk.HIGH, Risk.CRITICAL)
    if mode == "mutations":
        return EffectClass(effect_class) in MUTATION_CLASSES
    return False


def decide(
    policy: Mapping[str, JsonValue],
    *,
    name: str,
    effect_class: str,
    risk: str,
    is_model: bool = False,
    provider: str | None = None,
    tool_approval: ToolApproval = "policy",
    interactive: bool = False,
) -> Decision:
    """The policy decision for one effect; ``policy`` is the normalized camelCase dict."""
    denial = _deny_reason(policy, name, is_model, provider)
    if denial is not None:
        return Decision(DecisionKind.DENY, denial)
    forced = tool_approval == "always"
    if not (approval_required(policy, effect_class, risk) or forced):
        return Decision(DecisionKind.ALLOW, "request satisfies policy")
    source = "tool contract" if forced else f"policy.approval {policy.get('approval', 'mutations')}"
    if interactive:
        return Decision(DecisionKind.REQUIRE_APPROVAL, f"{source} requires approval")
    mode = policy.get("nonInteractive", "pause")
    if mode not in NON_INTERACTIVE_MODES:
        raise ValidationError(f"unknown policy.nonInteractive {mode!r}")
    if mode == "pause":
        return Decision(
            DecisionKind.REQUIRE_APPROVAL,
            f"{source} requires approval; the non-interactive run pauses durably",
        )
    return Decision(
        DecisionKind.DENY, f"{source} requires approval and policy.nonInteractive is {mode}"
    )


def decide_listing(
    policy: Mapping[str, JsonValue],
    *,
    name: str,
    tools: Iterable[str],
    effect_class: str,
    risk: str,
    interactive: bool = False,
) -> Decision:
    """An internal read made for some of an agent's tools (its MCP ``tools/list`` of one
    server, operation ``name``): ``name`` in ``toolsDeny`` denies it; so does every tool it
    serves being denied by the name lists — the listing could serve no call the policy allows,
    so nothing may reach the server. Otherwise it is judged by its own class and risk (under
    ``approval: always`` it needs an approval, as every effect does)."""
    if name in _name_list(policy, "toolsDeny"):
        return Decision(DecisionKind.DENY, f"{name!r} is in policy.toolsDeny")
    denials = {tool: _deny_reason(policy, tool, False, None) for tool in tools}
    allowed = [tool for tool, denial in denials.items() if denial is None]
    if not allowed:
        reasons = "; ".join(str(denial) for denial in denials.values())
        return Decision(DecisionKind.DENY, f"every tool it lists for is denied ({reasons})")
    return decide(
        policy, name=allowed[0], effect_class=effect_class, risk=risk, interactive=interactive
    )


# --- operator reconciliation (spec/cli.md §4, capability ``effect_reconciliation``) -------

RECONCILIATION_CAPABILITY = "effect_reconciliation"


@dataclass(frozen=True)
class ReconcileAuthorization:
    """Why a reconciliation was allowed, stored with it: by policy alone, or by the
    operator's explicit ``--approved`` where policy requires approval."""

    kind: Literal["policy_allow", "explicit_operator_approval"]
    reason: str
    actor: str
    approved: bool

    def to_json(self) -> JsonObject:
        return {
            "capability": RECONCILIATION_CAPABILITY,
            "kind": self.kind,
            "reason": self.reason,
            "actor": self.actor,
            "explicitApproval": self.approved,
        }


def _judged_as(
    operation: str, effect_class: str, request: JsonValue, tool: str | None
) -> tuple[str, str | None]:
    """The name (and, for a model call, the provider) the run's own decision judged an effect
    by: a model call by its provider's name, recorded in its request; an agent's tool call by
    the tool's declared name; an action by its kind's policy name (``filesystem.write``...),
    else the operation itself."""
    if tool is not None:
        return tool, None
    if effect_class == EffectClass.MODEL:
        recorded = request.get("provider") if isinstance(request, dict) else None
        provider = str(recorded or operation)
        return provider, provider
    entry = registry.find(operation)
    return ((entry.policy_name or entry.name) if entry else operation), None


def _judging_policy(
    policy: Mapping[str, JsonValue], operation: str, tool: str | None
) -> Mapping[str, JsonValue]:
    """The policy a reconciliation is judged by: the run's, without the name lists for an
    internal operation, which the run performs as part of its task's work (an agent lists
    its MCP tools before its first model call) without judging it by any name; judging it
    by ``toolsAllow`` would refuse forever the only way to settle it."""
    entry = registry.find(operation)
    if tool is not None or entry is None or entry.family != "internal":
        return policy
    return {k: v for k, v in policy.items() if k not in ("toolsAllow", "toolsDeny")}


@dataclass(frozen=True)
class ReconcileSubject:
    """What a reconciliation of an effect is judged on: the effect as recorded and, for an
    agent's tool call, the tool's declared name and ``approval``."""

    operation: str
    effect_class: str
    risk: str
    request: JsonValue
    tool: str | None = None
    tool_approval: ToolApproval = "policy"


def _reconcile_decision(policy: Mapping[str, JsonValue], subject: ReconcileSubject) -> Decision:
    name, provider = _judged_as(
        subject.operation, subject.effect_class, subject.request, subject.tool
    )
    # Interactive: the operator is present and ``--approved`` answers in advance.
    return decide(
        _judging_policy(policy, subject.operation, subject.tool),
        name=name,
        effect_class=subject.effect_class,
        risk=subject.risk,
        is_model=provider is not None,
        provider=provider,
        tool_approval=subject.tool_approval,
        interactive=True,
    )


def reconciliation_needs_approval(
    policy: Mapping[str, JsonValue], subject: ReconcileSubject
) -> bool:
    """Whether ``authorize_reconciliation`` gives its leave only with ``--approved``: the
    policy neither allows the reconciliation outright nor denies it (no flag overrides a
    denial). The views add the flag to the commands they suggest when it is needed."""
    decision = _reconcile_decision(policy, subject)
    return not decision.allowed and not decision.denied


def authorize_reconciliation(
    policy: Mapping[str, JsonValue], subject: ReconcileSubject, *, actor: str, approved: bool
) -> ReconcileAuthorization:
    """The authorization to record with a reconciliation, or ``PolicyDeniedError``: a denial
    is never overridden; a required approval is given only by ``--approved``."""
    decision = _reconcile_decision(policy, subject)
    if decision.denied:
        raise PolicyDeniedError(
            f"policy denies reconciling this effect ({RECONCILIATION_CAPABILITY}): "
            f"{decision.reason}; --approved cannot override a denial; nothing was recorded"
        )
    if decision.allowed:
        return ReconcileAuthorization("policy_allow", decision.reason, actor, approved)
    if approved:
        return ReconcileAuthorization("explicit_operator_approval", decision.reason, actor, True)
    raise PolicyDeniedError(
        f"reconciling this {subject.effect_class} effect needs approval ({decision.reason}): "
        "add --approved to give it; nothing was recorded"
    )


# --- path confinement on canonical POSIX strings ------------------------------------------


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s not in ("", ".")]


def check_relative_path(text: str) -> str:
    """Normalise a workspace-relative path; absolute paths, ``..``, NUL and empty are denied."""
    if not text or not text.strip():
        raise PolicyDeniedError("path is empty")
    if "\0" in text:
        raise PolicyDeniedError("path contains a NUL byte")
    if text.startswith("/"):
        raise PolicyDeniedError(f"path {text!r} is absolute; paths are workspace-relative")
    segments = _segments(text)
    if ".." in segments:
        raise PolicyDeniedError(f"path {text!r} escapes the workspace with `..`")
    return "/".join(segments) or "."


def join(root: str, relative: str) -> str:
    """``root`` joined with a checked relative path, as a normalised absolute string."""
    return "/" + "/".join(_segments(root) + _segments(check_relative_path(relative)))


def is_within(root: str, path: str) -> bool:
    """True when absolute ``path`` is ``root`` or below it, compared segment by segment."""
    if not root.startswith("/") or not path.startswith("/"):
        return False
    if "\0" in root or "\0" in path:
        return False
    base, target = _segments(root), _segments(path)
    if ".." in base or ".." in target:
        return False  # not canonical: a lexical comparison would be meaningless
    return target[: len(base)] == base


def resolve_root(workspace_root: str, root: str) -> str:
    """A configured root as an absolute string: absolute stays, relative joins the workspace."""
    return root if root.startswith("/") else join(workspace_root, root)


def policy_workspace(workspace: str, policy: Mapping[str, JsonValue]) -> str:
    """The directory a run's paths are confined to (spec/dsl.md §7 ``workspaceRoot``): the
    run's workspace (the workflow's directory or ``--workspace``), or the policy's root in it —
    relative to it and inside it (the compiler refuses a `..` out) — or an absolute root as
    it is. Reads, writes, writable and secret-file roots and process directories all resolve
    against it."""
    root = policy.get("workspaceRoot")
    if not isinstance(root, str) or not _segments(root):
        return workspace
    return posixpath.normpath(resolve_root(workspace, root))


def writable(path: str, workspace_root: str, writable_roots: Iterable[str]) -> bool:
    """True when canonical ``path`` lies inside one of the writable roots (none ⇒ False)."""
    return any(is_within(resolve_root(workspace_root, r), path) for r in writable_roots)


def check_readable(path: str, workspace_root: str) -> None:
    if not is_within(workspace_root, path):
        raise PolicyDeniedError(f"path {path!r} is outside the workspace")


def check_writable(path: str, workspace_root: str, writable_roots: Iterable[str]) -> None:
    roots = list(writable_roots)
    if not roots:
        raise PolicyDeniedError(f"path {path!r} is not writable: policy has no writableRoots")
    if not writable(path, workspace_root, roots):
        raise PolicyDeniedError(f"path {path!r} is outside every writable root")


# --- allowlists ----------------------------------------------------------------------------


def check_process(command: str, allowlist: Iterable[str]) -> None:
    """``process_allowed`` (``core.process_allowlist``: the run's own rule), as a denial."""
    denial = process_denial(command, allowlist)
    if denial is not None:
        raise PolicyDeniedError(denial)


def environment_allowed(name: str, allowlist: Iterable[str]) -> bool:
    return name in set(allowlist)


def check_environment(name: str, allowlist: Iterable[str]) -> None:
    if not environment_allowed(name, allowlist):
        raise PolicyDeniedError(
            f"environment variable {name!r} is not in policy.environmentAllowlist"
        )


def filter_environment(env: Mapping[str, str], allowlist: Iterable[str]) -> dict[str, str]:
    """Only the allowlisted variables of ``env``, in sorted name order."""
    allowed = set(allowlist)
    return {k: env[k] for k in sorted(env) if k in allowed}


def host_allowed(host: str, allowlist: Iterable[str]) -> bool:
    """Exact host, or ``*.suffix`` matching strict subdomains only (the apex is excluded)."""
    name = host.lower().rstrip(".")
    for rule in allowlist:
        pattern = rule.lower()
        if pattern.startswith("*."):
            if name.endswith("." + pattern[2:]) and name != pattern[2:]:
                return True
        elif name == pattern:
            return True
    return False

"""Keys the language accepts where they can have no effect, found for warnings.

These are valid in the spec's schema, and a workflow written for the original may carry them,
so they are not refused; they are never silently ignored either: every command that loads the
workflow reports each as a ``warning`` diagnostic at its key.
- a router's ``with``, ``retry`` and ``timeoutSeconds``: it is evaluated in place, nothing
  reads a ``with`` (spec/dsl.md §4.11). Its ``outputSchema`` is not among them: it replaces the
  router's fixed contract and a violation fails the task (§4.13), as on any task;
- ``timeoutSeconds`` on a task of a pure kind (assign, assert, memory.read): nothing runs that
  a timeout could bound; and its ``retry``: a pure kind's failure (a false assertion, a
  template, a missing memory key) is deterministic and never retried (spec/dsl.md §4.5;
  ``core.evaluate.TaskFailure`` is never retryable);
- an agent's ``retry``: the spec parses it but applies only the retry of the task that runs
  the agent (spec/dsl.md §5; the original's provider page: retry is limited to task bounds),
  so the warning names those tasks, where it belongs;
- ``output.showDiff: true`` and ``output.verbose: true``: parsed with the original's defaults
  but never read; diffs and detail follow the ``--diff`` and ``--verbose`` flags of the
  command instead (a ``false`` value asks for what happens anyway and is not reported);
- a ``policy.providers`` name no provider is declared under: it allows no model call, and a
  misspelt one leaves the provider meant denied (a policy shared between workflows may list
  more providers than one declares).

Invariants: pure — reads the document as written, never changes it, its digests or the exit
code; an empty ``with`` and a default-valued ``retry`` (``maxAttempts: 1``, no backoff) say
nothing and are not reported; pack actions, agents and providers are not resolved here (a task
using a pack action is not judged, a pack's agents are not looked at, and a workflow that loads
packs gets no provider warning).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core import registry
from agentctl.core.dsl.diagnostics import Finding
from agentctl.core.dsl.partial import task_lists

_ROUTER_KEYS = ("with", "retry", "timeoutSeconds")
_TIMEOUT = "timeoutSeconds"
_RETRY = "retry"
_DEFAULT_RETRY = ({"maxAttempts": 1}, {"maxAttempts": 1, "backoffMs": 0})


def unused_key_findings(raw: Mapping[str, object]) -> list[Finding]:
    """Each key of ``raw``'s tasks (sub-workflows' included) that can have no effect."""
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return []
    actions = spec.get("actions")
    pure = _pure_uses(actions if isinstance(actions, Mapping) else {})
    found: list[Finding] = []
    for base, tasks in task_lists(spec):
        for index, task in enumerate(tasks):
            # Only a router or a task with a timeout or retry can be reported: every other task
            # (nearly all) is passed over without a call or its path spelt (0.85 -> 0.2 ms,
            # 1,000 tasks).
            if isinstance(task, Mapping) and (
                task.get("uses") == "router"
                or task.get(_TIMEOUT) is not None
                or task.get(_RETRY) is not None
            ):
                found += _task_findings(f"{base}.{index}", task, pure)
    found += _output_findings(spec)
    return found + _agent_retry_findings(spec) + _policy_provider_findings(spec)


# ``spec.output`` keys this implementation never reads: (key, the flag doing its job, what).
_OUTPUT_FLAGS = (
    ("showDiff", "--diff", "diffs of file writes are included only with the `--diff` flag"),
    ("verbose", "--verbose", "the full result is printed only with the global `--verbose` flag"),
)


def _output_findings(spec: Mapping[str, object]) -> list[Finding]:
    output = spec.get("output")
    if not isinstance(output, Mapping):
        return []
    return [
        _finding("spec.output", key, why, help_text=f"remove `{key}` and pass `{flag}` instead")
        for key, flag, why in _OUTPUT_FLAGS
        if output.get(key) is True
    ]


def _agent_retry_findings(spec: Mapping[str, object]) -> list[Finding]:
    agents = spec.get("agents")
    named = agents.items() if isinstance(agents, Mapping) else ()
    with_retry = [
        str(name)
        for name, agent in named
        if isinstance(agent, Mapping) and agent.get("retry") not in (None, {}, *_DEFAULT_RETRY)
    ]
    if not with_retry:
        return []  # nearly every workflow: its tasks are not walked
    users = _agent_users(spec)
    why = "only the `retry` of a task that uses the agent repeats its transient failures"
    found: list[Finding] = []
    for name in with_retry:
        ids = ", ".join(f"`{t}`" for t in users.get(name, []))
        where = f"put `retry` on the tasks that use `agent:{name}` instead"
        found.append(
            _finding(f"spec.agents.{name}", "retry", why, f"{where} ({ids})" if ids else where)
        )
    return found


def _agent_users(spec: Mapping[str, object]) -> dict[str, list[str]]:
    """The ids of the tasks (sub-workflows' included) that use each agent, by agent name."""
    users: dict[str, list[str]] = {}
    for _, tasks in task_lists(spec):
        for task in tasks:
            if not isinstance(task, Mapping):
                continue
            uses = task.get("uses")
            if isinstance(uses, str) and uses.startswith("agent:"):
                users.setdefault(uses.removeprefix("agent:"), []).append(str(task.get("id")))
    return users


def _policy_provider_findings(spec: Mapping[str, object]) -> list[Finding]:
    policy, declared = spec.get("policy"), spec.get("providers")
    if spec.get("packs") or not isinstance(policy, Mapping):
        return []  # a pack may declare the provider
    names = policy.get("providers")
    known = set(declared) if isinstance(declared, Mapping) else set()
    listed = sorted(known) if known else ["none"]
    return [
        Finding(
            "missing_reference",
            f"spec.policy.providers.{index}",
            f"policy.providers names `{name}`, which no spec.providers entry declares: "
            "it allows no model call",
            help=f"check the spelling (declared: {', '.join(listed)})",
        )
        for index, name in enumerate(names if isinstance(names, list) else [])
        if isinstance(name, str) and name not in known
    ]


def _pure_uses(actions: Mapping[str, object]) -> dict[str, str]:
    """The kind of each action of a pure kind, by the ``uses`` naming it (``action:NAME``)."""
    kinds = [(name, str(a.get("kind"))) for name, a in actions.items() if isinstance(a, Mapping)]
    return {f"action:{name}": kind for name, kind in kinds if _is_pure(kind)}


def _is_pure(kind: str) -> bool:
    entry = registry.find(kind)
    return entry is not None and entry.is_pure


def _task_findings(path: str, task: Mapping[str, object], pure: Mapping[str, str]) -> list[Finding]:
    uses = task.get("uses")
    if uses == "router":
        keys = [k for k in _ROUTER_KEYS if task.get(k) not in (None, {}, *_DEFAULT_RETRY)]
        why = "a router is evaluated in place: nothing to retry or time out, no `with` read"
        return [_finding(path, key, why) for key in keys]
    kind = pure.get(uses) if isinstance(uses, str) else None
    if kind is None:
        return []
    found: list[Finding] = []
    if task.get(_RETRY) not in (None, {}, *_DEFAULT_RETRY):
        why = f"{kind} is pure: its failures are deterministic and never retried"
        found.append(_finding(path, _RETRY, why))
    if task.get(_TIMEOUT) is not None:
        found.append(
            _finding(path, _TIMEOUT, f"{kind} is pure: evaluated in place, nothing to time out")
        )
    return found


def _finding(path: str, key: str, why: str, help_text: str | None = None) -> Finding:
    return Finding(
        "schema_violation",
        f"{path}.{key}",
        f"`{key}` has no effect here: {why}",
        help=help_text or f"remove `{key}`; it is accepted and ignored",
        point="key",
    )

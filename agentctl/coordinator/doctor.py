"""``agentctl doctor FILE``: what a workflow needs on this machine, and whether it is here.

Job: from the compiled plan alone, list each local prerequisite of a run as a check — the
container engine and each image, every provider credential and MCP/A2A header, each secret
reference of an action's ``env`` and ``policy.network.customCa``, the writable roots, each
program a process action starts, the database — and the remote endpoints it would call,
which are listed as unverified. Ready means every check is available.

Invariants:
- creates no state: no database, no directory, no lock file (the database is looked at through
  ``ledger.probe``, read-only); images are inspected, never pulled;
- credentials by presence only (``credentials.run_secrets`` and ``task_time_secrets``,
  which a run resolves only as a task starts): no value is read and no
  ``{process}`` helper runs — such a helper is reported unverified;
- no network: provider, MCP and A2A endpoints are named in ``unverified``, never contacted,
  not even resolved;
- a program is judged as the run judges it, with the run's own code: the policy's decision
  on its action kind (``core.policy.decide``), ``processAllowlist`` (``core.process_allowlist``),
  the directory it starts in and the file its spawn would execute (``sandbox.program``: the
  child's PATH, never doctor's; a relative command from the workspace, never doctor's cwd);
  nothing is started. An allowlist entry no task uses is reported ``unused`` and never makes
  the workflow not ready;
- every finding is a ``DoctorCheck`` value; a failing probe is a finding, not an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentctl.coordinator.credentials import run_secrets, task_time_secrets
from agentctl.coordinator.launch import container_images, run_trio
from agentctl.core import registry
from agentctl.core.dburl import redact
from agentctl.core.effects import EffectClass
from agentctl.core.egress_reach import plan_endpoints
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list
from agentctl.core.plan import Plan
from agentctl.core.policy import decide, policy_workspace, resolve_root
from agentctl.core.process_allowlist import process_denial, process_name
from agentctl.errors import AgentctlError, PolicyDeniedError
from agentctl.ledger.probe import probe_database
from agentctl.sandbox.paths import resolve_read
from agentctl.sandbox.program import find_program, names_workspace, process_cwd


@dataclass(frozen=True)
class DoctorCheck:
    """One prerequisite: what it is, whether it is available here, and why."""

    check: str  # the kind of prerequisite and its subject: "credential openai"
    available: bool
    status: str  # a snake_case word: present, missing, writable, found, absent, ...
    detail: str

    def to_json(self) -> JsonObject:
        return {
            "check": self.check,
            "available": self.available,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Unverified:
    """Something a run needs that doctor does not verify (a remote endpoint, a helper)."""

    what: str
    target: str
    reason: str

    def to_json(self) -> JsonObject:
        return {"what": self.what, "target": self.target, "reason": self.reason}


@dataclass(frozen=True)
class DoctorReport:
    """What ``doctor`` found for one workflow: each check, what it could not verify, where."""

    workflow: str
    plan_digest: str
    checks: tuple[DoctorCheck, ...]
    unverified: tuple[Unverified, ...]
    workspace: str
    database: str

    @property
    def ready(self) -> bool:
        return all(c.available for c in self.checks)

    def to_json(self) -> JsonObject:
        scope: JsonObject = {
            "workspace": self.workspace,
            "database": self.database,
            "network": "not contacted",
            "images": "inspected locally, never pulled",
            "credentials": "presence only",
            "programs": "looked up as a run's process finds them, never started",
        }
        return {
            "ready": self.ready,
            "workflow": self.workflow,
            "planDigest": self.plan_digest,
            "checks": list[JsonValue](c.to_json() for c in self.checks),
            "unverified": list[JsonValue](u.to_json() for u in self.unverified),
            "scope": scope,
        }


def diagnose(plan: Plan, meta: tuple[str, str], workspace: str, db: str) -> DoctorReport:
    """Every check of ``plan`` on this machine; ``meta`` is (workflow name, plan digest)."""
    found, helpers = credential_checks(plan, workspace)
    programs, in_task = process_checks(plan, workspace)
    checks = (
        container_checks(plan)
        + found
        + writable_root_checks(plan, workspace)
        + programs
        + (database_check(db),)
    )
    remote = tuple(
        Unverified("endpoint", f"{e.owner} {e.url}", "doctor makes no network request")
        for e in plan_endpoints(plan)
    )
    return DoctorReport(meta[0], meta[1], checks, remote + helpers + in_task, workspace, redact(db))


def container_checks(plan: Plan) -> tuple[DoctorCheck, ...]:
    """Each image of a container action, inspected in the engine the action asks for."""
    from agentctl.sandbox.container import preflight

    async def one(runtime: str, image: str) -> DoctorCheck:
        name = f"container image {image}"
        try:
            engine = await preflight(runtime, image)
        except AgentctlError as exc:
            return DoctorCheck(name, False, "missing", exc.message)
        return DoctorCheck(name, True, "present", f"present locally in {engine.binary}")

    async def every() -> tuple[DoctorCheck, ...]:
        return tuple([await one(runtime, image) for runtime, image in sorted(images)])

    images = container_images(plan)
    return run_trio(every) if images else ()


def credential_checks(
    plan: Plan, workspace: str
) -> tuple[tuple[DoctorCheck, ...], tuple[Unverified, ...]]:
    """Each secret reference the plan reaches (its providers', its MCP servers' and A2A
    peers' headers, its actions' ``env``, ``customCa``), by presence."""
    checks: list[DoctorCheck] = []
    helpers: list[Unverified] = []
    for owner in run_secrets(plan, workspace) + task_time_secrets(plan, workspace):
        for secret in owner.secrets:
            reference = f"{secret.kind} {secret.reference}"
            if secret.availability == "unchecked":
                why = "a {process} helper runs only when the run needs the value"
                helpers.append(Unverified("credential helper", reference, why))
                continue
            ok = secret.availability == "present"
            place = "" if secret.place == "credential" else f" {secret.place}"
            name = f"credential {owner.name}{place}"
            checks.append(DoctorCheck(name, ok, secret.availability, reference))
    return tuple(checks), tuple(helpers)


def writable_root_checks(plan: Plan, workspace: str) -> tuple[DoctorCheck, ...]:
    """Each ``policy.writableRoots`` entry: a writable directory, or one that can be made —
    resolved, as a run resolves it, under the policy's ``workspaceRoot``. An absolute entry is
    a mount a run uses as it is and never makes, so a missing one is ``missing``, as ``run``
    refuses it."""
    roots = [str(r) for r in as_list(plan.run.policy.get("writableRoots"))]
    rooted = policy_workspace(workspace, plan.run.policy)
    return tuple(_writable(root, resolve_root(rooted, root)) for root in roots)


def _writable(root: str, path: str) -> DoctorCheck:
    name = f"writable root {root}"
    target = Path(path)
    if target.is_dir():
        ok = os.access(target, os.W_OK | os.X_OK)
        return DoctorCheck(name, ok, "writable" if ok else "not_writable", path)
    if target.exists():
        return DoctorCheck(name, False, "not_a_directory", f"{path} is not a directory")
    if root.startswith("/"):
        why = f"{path} does not exist; an absolute root is never created: create or mount it"
        return DoctorCheck(name, False, "missing", why)
    parent = next((p for p in target.parents if p.exists()), None)
    ok = parent is not None and os.access(parent, os.W_OK | os.X_OK)
    return DoctorCheck(name, ok, "creatable" if ok else "not_writable", f"{path} does not exist")


@dataclass(frozen=True)
class ProcessUse:
    """One program the plan's process actions start, in one setting: one check each."""

    operation: str  # the registry entry (builtin.shell.exec, extension.process)
    command: str  # as written in the action
    cwd: str | None
    # The action sets PATH (a template or a secret reference: the DSL takes no plain string),
    # so its value is known only as the task runs; else the run's cleared environment has none.
    own_path: bool
    image: str | None  # isolation: container — the image the program runs in

    @property
    def check(self) -> str:
        where = [f"in {self.cwd}"] if self.cwd and not names_workspace(self.cwd) else []
        where += ["with its own PATH"] if self.own_path else []
        where += [f"in image {self.image}"] if self.image is not None else []
        return " ".join(["process", self.command, *where])


def process_uses(plan: Plan) -> dict[ProcessUse, list[str]]:
    """Each program the tasks start (in compiled order) and the actions that start it."""
    uses: dict[ProcessUse, list[str]] = {}
    for task in plan.tasks:
        entry, config = task.entry, task.action_config
        if task.kind != "action" or entry is None or config is None:
            continue
        if entry.effect_class is not EffectClass.PROCESS_EXECUTION:
            continue
        actions = uses.setdefault(_process_use(entry.name, config), [])
        if (task.action or task.id) not in actions:
            actions.append(task.action or task.id)
    return uses


def _process_use(operation: str, config: JsonObject) -> ProcessUse:
    env = config.get("env")
    box = config.get("container") if config.get("isolation") == "container" else None
    cwd = config.get("cwd")
    return ProcessUse(
        operation,
        str(config.get("command") or ""),
        cwd if isinstance(cwd, str) else None,
        isinstance(env, dict) and "PATH" in env,
        str(box.get("image")) if isinstance(box, dict) else None,
    )


def process_checks(
    plan: Plan, workspace: str
) -> tuple[tuple[DoctorCheck, ...], tuple[Unverified, ...]]:
    """Each program the tasks start, judged as the run judges it — the policy's decision on
    its kind, then ``processAllowlist`` — and looked up where the run's process would find
    it; then each allowlist entry no task uses, which readiness does not depend on."""
    root = policy_workspace(workspace, plan.run.policy)
    uses = process_uses(plan)
    checks: list[DoctorCheck] = []
    unverified: list[Unverified] = []
    for use, actions in uses.items():
        check, unknown = _process_check(use, plan.run.policy, root)
        by = f" ({'action' if len(actions) == 1 else 'actions'} {', '.join(actions)})"
        checks.append(DoctorCheck(use.check, check.available, check.status, check.detail + by))
        unverified += [unknown] if unknown is not None else []
    used = {process_name(use.command) for use in uses}
    entries = {str(e) for e in as_list(plan.run.policy.get("processAllowlist"))}
    why = "no task starts a program of this name; the run does not need it"
    checks += [
        DoctorCheck(f"process allowlist entry {e}", True, "unused", why)
        for e in sorted(entries - used)
    ]
    return tuple(checks), tuple(unverified)


def _process_check(
    use: ProcessUse, policy: JsonObject, root: str
) -> tuple[DoctorCheck, Unverified | None]:
    """The run's order: its policy decision, its allowlist, its cwd, then its program."""
    entry = registry.lookup(use.operation)
    # Judged as if someone could answer an approval: a required approval pauses a run (or,
    # without one, is refused by ``nonInteractive``) — who is at the terminal, not this machine.
    decision = decide(
        policy,
        name=entry.policy_name or entry.name,
        effect_class=str(entry.effect_class),
        risk=str(entry.risk),
        interactive=True,
    )
    if decision.denied:
        return DoctorCheck(use.check, False, "denied", decision.reason), None
    denial = process_denial(use.command, as_list(policy.get("processAllowlist")))
    if denial is not None:
        return DoctorCheck(use.check, False, "not_allowed", denial), None
    if use.cwd is not None and "${{" in use.cwd:
        later = Unverified("program", use.check, "looked up in the directory its task renders")
        return DoctorCheck(use.check, True, "allowed", "in the directory its task renders"), later
    try:
        cwd = process_cwd(root, use.cwd)
    except PolicyDeniedError as exc:
        if use.cwd is None or not _made_by_run(root, use.cwd, policy):
            return DoctorCheck(use.check, False, "bad_cwd", exc.message), None
        why = f"cwd {use.cwd!r} does not exist yet; a write of the run under its writable root "
        why += "may make it"
        return DoctorCheck(use.check, True, "allowed", why), Unverified("cwd", use.check, why)
    if use.image is not None:
        later = Unverified("program", use.check, "looked up inside the image when the task runs")
        return DoctorCheck(use.check, True, "allowed", "runs in its container"), later
    if use.own_path and "/" not in use.command:
        later = Unverified("program", use.check, "looked up on the PATH its task sets as it runs")
        return DoctorCheck(use.check, True, "allowed", "on the PATH its task sets"), later
    found = find_program(use.command, cwd, None)
    detail = found.detail
    if found.status == "not_found" and "/" not in use.command:
        detail += "; a run clears the environment: give command its full path, or set env.PATH"
    return DoctorCheck(use.check, found.status == "found", found.status, detail), None


def _made_by_run(root: str, cwd: str, policy: JsonObject) -> bool:
    """Whether a process ``cwd`` that is no directory yet may be one when its task runs: it
    resolves inside the workspace, nothing is there, and it lies under a ``writableRoots``
    entry, where an earlier write of the run creates directories as it writes a file."""
    try:
        target = resolve_read(root, cwd)
    except PolicyDeniedError:
        return False
    if os.path.lexists(target):
        return False  # a file, not a directory that is still to come
    rooted = policy_workspace(root, policy)
    roots = [resolve_root(rooted, str(r)) for r in as_list(policy.get("writableRoots"))]
    return any(
        os.path.commonpath([target, os.path.realpath(r)]) == os.path.realpath(r) for r in roots
    )


def database_check(db: str) -> DoctorCheck:
    probe = probe_database(db)
    return DoctorCheck(f"database {probe.path}", probe.available, probe.status, probe.detail)

"""``agentctl doctor FILE``: what a workflow needs on this machine, and whether it is here.

Job: from the compiled plan alone, list each local prerequisite of a run as a check — the
container engine and each image, every provider credential and MCP/A2A header, the writable
roots, the programs the process allowlist names, the database — and the remote endpoints it
would call, which are listed as unverified. Ready means every check is available.

Invariants:
- creates no state: no database, no directory, no lock file (the database is looked at through
  ``ledger.probe``, read-only); images are inspected, never pulled;
- credentials by presence only (``credentials.run_secrets``): no value is read and no
  ``{process}`` helper runs — such a helper is reported unverified;
- no network: provider, MCP and A2A endpoints are named in ``unverified``, never contacted,
  not even resolved;
- every finding is a ``DoctorCheck`` value; a failing probe is a finding, not an error.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agentctl.coordinator.credentials import run_secrets
from agentctl.coordinator.launch import container_images, run_trio
from agentctl.core.dburl import redact
from agentctl.core.egress_reach import plan_endpoints
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list
from agentctl.core.plan import Plan
from agentctl.core.policy import policy_workspace, resolve_root
from agentctl.core.process_allowlist import process_name
from agentctl.errors import AgentctlError
from agentctl.ledger.probe import probe_database


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
    checks = (
        container_checks(plan)
        + found
        + writable_root_checks(plan, workspace)
        + process_checks(plan)
        + (database_check(db),)
    )
    remote = tuple(
        Unverified("endpoint", f"{e.owner} {e.url}", "doctor makes no network request")
        for e in plan_endpoints(plan)
    )
    return DoctorReport(meta[0], meta[1], checks, remote + helpers, workspace, redact(db))


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
    peers' headers), by presence."""
    checks: list[DoctorCheck] = []
    helpers: list[Unverified] = []
    for owner in run_secrets(plan, workspace):
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
    resolved, as a run resolves it, under the policy's ``workspaceRoot``."""
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
    parent = next((p for p in target.parents if p.exists()), None)
    ok = parent is not None and os.access(parent, os.W_OK | os.X_OK)
    return DoctorCheck(name, ok, "creatable" if ok else "not_writable", f"{path} does not exist")


def process_checks(plan: Plan) -> tuple[DoctorCheck, ...]:
    """Each ``policy.processAllowlist`` entry: found on PATH, or as a task's absolute command."""
    commands = [_host_command(task.action_config) for task in plan.tasks]
    absolute = [c for c in commands if c and "/" in c and os.access(c, os.X_OK)]
    checks = []
    for entry in sorted({str(e) for e in as_list(plan.run.policy.get("processAllowlist"))}):
        where = shutil.which(entry) or next(
            (c for c in absolute if process_name(c) == entry), None
        )
        detail = where or f"{entry} is not on PATH nor a task's command"
        checks.append(DoctorCheck(f"process {entry}", where is not None, _found(where), detail))
    return tuple(checks)


def _found(where: str | None) -> str:
    return "found" if where else "not_found"


def _host_command(action: JsonObject | None) -> str | None:
    if not action or action.get("isolation") == "container":
        return None
    command = action.get("command")
    return command if isinstance(command, str) else None


def database_check(db: str) -> DoctorCheck:
    probe = probe_database(db)
    return DoctorCheck(f"database {probe.path}", probe.openable, probe.status, probe.detail)

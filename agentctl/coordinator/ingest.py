"""Ingesting the files a confirmed workspace mutation wrote: the one path for every effect.

An action's effect (``execute.EffectRunner``) and an agent's tool call (``calls.CallGateway``)
both hand the paths a worker's ``Result`` reported (``Result.artifacts``: workspace-relative,
or absolute for a write into an absolute writable root, kept as written for the reference) to
``Ingester.ingest``; the task's completion then commits the references and releases the
leases (``Settled.artifacts`` / ``lease_ids``).

Invariants:
- only files a succeeded effect reported are stored, each a regular file of at most 16 MiB
  (spec/cli.md §8); one gone or replaced by something else since is skipped, not an error,
  and so is a path that names a symlink (a write through a link inside a writable root
  changed the link's target; the store never follows links), judged without following it;
- ingestion (blob row, ``artifactBytes`` metering, a 60-minute lease) commits before the
  effect's outcome does, so a confirmed result's blob is leased until the completion
  transaction names it; the lease and the metering's reservation are one id per effect and
  file (``_lease_id``), so asking again never counts the bytes twice;
- a crash in between (the outcome durable, its task not completed) loses nothing: a confirmed
  ``builtin.write`` reused on resume — an action's (``recovered``) or an agent's tool call's
  (``recover``) — has its file's reference recovered from the recorded ``path`` and
  ``after``: the still stored blob of exactly those bytes is leased again under the same
  id, else the workspace file if it still holds exactly those bytes is ingested; neither
  (changed or gone, and collected) commits no reference and audits
  ``artifact.not_recovered`` instead — the run goes on;
- a file over the run's ``maxArtifactBytes`` raises ``BudgetRefusedError`` before it is
  stored: the effect stays succeeded (it happened), its task fails;
- within one task, a later write to the same path replaces the earlier reference (one
  reference per logical path), while every lease is kept for the completion to release.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.steps import AgentHeld, Settled, WrittenFile
from agentctl.coordinator.store import Store
from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import InvalidOperationError
from agentctl.ledger.artifacts.refs import ArtifactRef
from agentctl.ledger.budget import BudgetRefusedError
from agentctl.ledger.model import IngestRequest
from agentctl.ledger.tasks import AuditSpec

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024


def _storable(path: str) -> bool:
    """Whether ``path`` itself (a symlink is not followed) is a regular file the store takes."""
    try:
        st = os.lstat(path)
    except OSError:
        return False  # gone again: nothing to keep
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_ARTIFACT_BYTES


def _lease_id(effect_id: str, index: int) -> str:
    """The lease and ``artifactBytes`` reservation of an effect's ``index``-th file."""
    return f"ingest-{effect_id}-{index}"


def written_file(operation: str, result: JsonValue) -> WrittenFile | None:
    """The file a confirmed write's recorded result (its own, or an ``applied`` one recording
    the same fields) says it wrote; None for any other operation or a write that changed
    nothing (it stored no file either)."""
    if operation != "builtin.write" or not isinstance(result, dict):
        return None
    path, after = result.get("path"), result.get("after")
    if result.get("changed") is not True or not isinstance(path, str):
        return None
    return WrittenFile(path, after) if isinstance(after, str) else None


@dataclass(frozen=True)
class Ingested:
    """Files stored for one task: their references and the leases holding their blobs, and
    the files a resumed write's reference could not be recovered for (audit events)."""

    refs: tuple[ArtifactRef, ...] = ()
    lease_ids: tuple[str, ...] = ()
    events: tuple[AuditSpec, ...] = ()

    def plus(self, later: Ingested) -> Ingested:
        """These files and ``later``'s, a later reference replacing one of the same path."""
        replaced = {r.logical_path for r in later.refs}
        kept = tuple(r for r in self.refs if r.logical_path not in replaced)
        leases, events = self.lease_ids + later.lease_ids, self.events + later.events
        return Ingested(kept + later.refs, leases, events)

    def settle(self, step: Settled | AgentHeld) -> Settled | AgentHeld:
        """``step`` carrying these files to its completion, which references them when the
        task succeeded and releases their leases whatever its state. A held task has no
        completion yet: its leases are left to expire."""
        if isinstance(step, AgentHeld) or not (self.refs or self.lease_ids or self.events):
            return step
        refs, leases, events = self.refs, self.lease_ids, step.events + self.events
        return dataclasses.replace(step, artifacts=refs, lease_ids=leases, events=events)


@dataclass(frozen=True)
class Ingester:
    """Stores a run's confirmed mutations' files; ``enabled`` False (a drive that opened no
    artifact store) stores none."""

    store: Store
    clock: Clock
    run_id: str
    trace_id: str
    workspace: str
    enabled: bool

    async def ingest(self, task_id: str, paths: Sequence[str], effect_id: str) -> Ingested:
        """Store the files at ``paths`` (workspace-relative, or absolute: ``os.path.join``
        keeps one) that effect ``effect_id`` of ``task_id`` reported, in order."""
        if not paths or not self.enabled:  # a shell step's usual reply: no files
            return Ingested()
        refs: list[ArtifactRef] = []
        leases: list[str] = []
        for index, rel in enumerate(paths):
            path = os.path.join(self.workspace, rel)
            if not _storable(path):
                continue
            lease = _lease_id(effect_id, index)
            now = self.clock.now()
            request = IngestRequest(path, now, self.run_id, task_id, self.trace_id, lease)
            try:
                got = await self.store.ingest_artifact(request)
            except InvalidOperationError:
                continue  # replaced by a link or grew since it was judged: as if gone
            refs.append(got.ref(rel))
            leases.append(got.lease_id)
        return Ingested(tuple(refs), tuple(leases))

    async def recover(self, task_id: str, effect_id: str, written: WrittenFile) -> Ingested:
        """The reference confirmed write ``effect_id`` of ``task_id`` stored (or would have)
        before a crash cut its task's completion off: its bytes' blob, still stored, or the
        file still holding them; an ``artifact.not_recovered`` event when neither is left.
        ``BudgetRefusedError`` when its bytes were never metered and are over the limit."""
        if not self.enabled:
            return Ingested()
        digest = "sha256:" + hashlib.sha256(written.content.encode("utf-8")).hexdigest()
        path = os.path.join(self.workspace, written.path)
        lease = _lease_id(effect_id, 0)  # a write reports its one file
        now = self.clock.now()
        request = IngestRequest(path, now, self.run_id, task_id, self.trace_id, lease, digest)
        try:
            got = await self.store.ingest_artifact(request)
        except InvalidOperationError as exc:
            lost = {"effectId": effect_id, "path": written.path, "digest": digest}
            return Ingested(
                events=(AuditSpec("artifact.not_recovered", {**lost, "reason": exc.message}),)
            )
        return Ingested((got.ref(written.path),), (got.lease_id,))

    async def recovered(self, step: Settled) -> Settled:
        """``step`` (a resumed task completed from its write's recorded outcome) with that
        write's file recovered; failed, as its live run would have, over ``maxArtifactBytes``."""
        written, effect_id = step.written, step.effect_id
        if written is None or effect_id is None:
            return step
        step = dataclasses.replace(step, written=None)
        try:
            files = await self.recover(step.task.id, effect_id, written)
        except BudgetRefusedError as exc:
            error = f"task {step.task.id}: {exc.message}"
            return dataclasses.replace(step, state="failed", output=None, error=error)
        settled = files.settle(step)  # as a live completion carries its files
        return settled if isinstance(settled, Settled) else step

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
  transaction names it; a crash in between leaves the lease to expire and the blob to GC —
  a confirmed outcome reused on resume is not ingested again, for actions and tools alike;
- a file over the run's ``maxArtifactBytes`` raises ``BudgetRefusedError`` before it is
  stored: the effect stays succeeded (it happened), its task fails;
- within one task, a later write to the same path replaces the earlier reference (one
  reference per logical path), while every lease is kept for the completion to release.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.steps import AgentHeld, Settled
from agentctl.coordinator.store import Store
from agentctl.errors import InvalidOperationError
from agentctl.ledger.artifacts.refs import ArtifactRef
from agentctl.ledger.model import IngestRequest

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024


def _storable(path: str) -> bool:
    """Whether ``path`` itself (a symlink is not followed) is a regular file the store takes."""
    try:
        st = os.lstat(path)
    except OSError:
        return False  # gone again: nothing to keep
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_ARTIFACT_BYTES


@dataclass(frozen=True)
class Ingested:
    """Files stored for one task: their references and the leases holding their blobs."""

    refs: tuple[ArtifactRef, ...] = ()
    lease_ids: tuple[str, ...] = ()

    def plus(self, later: Ingested) -> Ingested:
        """These files and ``later``'s, a later reference replacing one of the same path."""
        replaced = {r.logical_path for r in later.refs}
        kept = tuple(r for r in self.refs if r.logical_path not in replaced)
        return Ingested(kept + later.refs, self.lease_ids + later.lease_ids)

    def settle(self, step: Settled | AgentHeld) -> Settled | AgentHeld:
        """``step`` carrying these files to its completion, which references them when the
        task succeeded and releases their leases whatever its state. A held task has no
        completion yet: its leases are left to expire."""
        if isinstance(step, AgentHeld) or not (self.refs or self.lease_ids):
            return step
        return dataclasses.replace(step, artifacts=self.refs, lease_ids=self.lease_ids)


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

    async def ingest(self, task_id: str, paths: Sequence[str]) -> Ingested:
        """Store the files at ``paths`` (workspace-relative, or absolute: ``os.path.join``
        keeps one) for ``task_id``, in order."""
        if not paths or not self.enabled:  # a shell step's usual reply: no files
            return Ingested()
        refs: list[ArtifactRef] = []
        leases: list[str] = []
        for rel in paths:
            path = os.path.join(self.workspace, rel)
            if not _storable(path):
                continue
            try:
                got = await self.store.ingest_artifact(
                    IngestRequest(path, self.clock.now(), self.run_id, task_id, self.trace_id)
                )
            except InvalidOperationError:
                continue  # replaced by a link or grew since it was judged: as if gone
            refs.append(got.ref(rel))
            leases.append(got.lease_id)
        return Ingested(tuple(refs), tuple(leases))

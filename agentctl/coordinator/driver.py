"""The run driver: stable bounded ready batches under the effect protocol, committed in order.

One loop: take the ready tasks in compiled order, at most ``maxConcurrency`` of them; prepare
each against one immutable snapshot; record the effects (``requested``), commit ``started``,
dispatch, commit each outcome at once, then commit the whole batch in compiled order.

Invariants:
- nothing is dispatched before its ``started`` row commits;
- a confirmed outcome is never executed again: on resume it is reused from the ledger;
- a started effect without an outcome is never repeated: it is uncertain and blocks;
- task outputs, memory, audit and the checkpoint of a batch commit in one transaction, in
  compiled order, whatever order the effects finished in.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from agentctl.coordinator.agent import AgentRunner, AgentUncertain
from agentctl.coordinator.clock import Clock
from agentctl.coordinator.prepare import (
    Prepared,
    RunSettings,
    memory_write_output,
    prepare_task,
    resolved_input_digest,
)
from agentctl.coordinator.schedule import SCHEDULABLE, WAITING, Scheduler
from agentctl.coordinator.store import GroupCommitter, Store
from agentctl.core import evaluate as ev
from agentctl.core.canonical import v1_digest
from agentctl.core.plan import PlannedTask
from agentctl.core.redact import Redactor
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import RunFailedError
from agentctl.ledger import model
from agentctl.ledger.effects import EffectRecord, NewEffect
from agentctl.mailbox.messages import Execute, Failure, Result

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
FUSE_LIMIT = 512  # pure results staged at most before a commit


_DEFAULT_CONTRACT_FINGERPRINT = v1_digest(ev.DEFAULT_CONTRACT)


def contract_fingerprint(task: PlannedTask) -> str:
    """The fingerprint of a task's output contract (the default contract when none is set)."""
    if task.output_schema is None:
        return _DEFAULT_CONTRACT_FINGERPRINT  # most tasks: computed once, not per task
    return v1_digest(task.output_schema)


@dataclass
class Inflight:
    """A task found mid-flight on resume, with its effect and any reconciliation."""

    effect: EffectRecord
    reconciliation: str | None = None  # applied | not_applied | compensated
    result: Any = None


@dataclass
class Live:
    """The coordinator's mirror of the run's durable state."""

    inputs: dict[str, Any]
    memory: dict[str, Any]
    states: dict[str, str]
    attempts: dict[str, int]
    outputs: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str | None] = field(default_factory=dict)
    inflight: dict[str, Inflight] = field(default_factory=dict)
    not_before: dict[str, float] = field(default_factory=dict)


class Driver:
    def __init__(
        self,
        store: Store,
        rs: RunSettings,
        live: Live,
        pool: Any,
        clock: Clock,
        trace_id: str,
        on_progress: Callable[[str, str], None] | None = None,
        artifacts: bool = False,
    ) -> None:
        self.artifacts = artifacts
        self.store = store
        self.rs = rs
        self.live = live
        self.pool = pool
        self.clock = clock
        self.trace_id = trace_id
        self.stopped = False
        self.schedule = Scheduler(rs.plan, live.states)
        self.provider_calls: dict[str, int] = {}  # the fake provider's per-run call counter
        self.fused: list[model.Finished] = []  # results applied, not yet committed
        self.fused_compensated: list[model.CompensatedPair] = []
        self.fused_memory = False
        self.fused_finishes: list[model.EffectOutcome] = []
        self.defer_outcome = False
        self.committer = GroupCommitter(store)
        self.on_progress = on_progress or (lambda _task, _state: None)

    # ------------------------------------------------------------------ the loop

    async def drive(self) -> str:
        """Run until nothing is ready; returns succeeded | failed | paused | blocked."""
        limit = self.rs.plan.max_concurrency
        while not self.stopped:
            ready = self.schedule.ready_tasks(self._eligible, limit)
            if not ready:
                if not self.schedule.has_retry():
                    break
                await self._flush()
                await trio.sleep(0.01)
                continue
            await self._run_batch(ready)
        await self._flush()
        return self._final_state()

    def _eligible(self, task: PlannedTask) -> bool:
        state = self.live.states[task.id]
        if state not in SCHEDULABLE:
            return False
        if self.live.not_before.get(task.id, 0.0) > self.clock.monotonic():
            return False
        return state not in WAITING or self._resolved(task.id)

    def _resolved(self, task_id: str) -> bool:
        """A waiting task can move once an operator resolved its effect or approval."""
        found = self.live.inflight.get(task_id)
        if found is None:
            return False
        if self.live.states[task_id] == "waiting_for_approval":
            return found.effect.status in ("requested", "cancelled")
        return True

    def _final_state(self) -> str:
        states = set(self.live.states.values())
        if "waiting_for_effect" in states:
            return "blocked"
        if "waiting_for_approval" in states:
            return "paused"
        if self.stopped or "failed" in states:
            return "failed"
        return "succeeded"

    def view(self) -> ev.RuntimeView:
        # No copies: live mappings change only after a batch is prepared and executed, and
        # memory is replaced (never mutated), so every task of a batch sees one snapshot.
        return ev.RuntimeView(
            inputs=self.live.inputs,
            memory=self.live.memory,
            outputs=self.live.outputs,
            states=self.live.states,
            errors=self.live.errors,
        )

    # ------------------------------------------------------------------ one batch

    async def _run_batch(self, batch: list[PlannedTask]) -> None:
        for task in batch:
            self.schedule.take(task)
        view = self.view()
        preps = [self._prepare(task, view) for task in batch]
        if all(p.kind == "done" for p in preps) and len(self.fused) < FUSE_LIMIT:
            # Pure work is re-derivable, so consecutive pure batches share one commit.
            self._stage(preps)
            return
        await self._flush()
        fresh = [p for p in preps if p.kind == "effect" and not p.recorded]
        if fresh:
            await self._record_requests(fresh)
        agents = [p for p in preps if p.kind == "agent" and not p.recorded]
        if agents:
            await self._start_agents(agents)
        to_start = [p for p in preps if p.kind in ("effect", "agent")]
        if to_start:
            await self._start_and_execute(to_start, view)
        await self._commit([p for p in preps if p.kind != "waiting"])

    def _prepare(self, task: PlannedTask, view: ev.RuntimeView) -> Prepared:
        state = self.live.states[task.id]
        attempt = self.live.attempts.get(task.id, 0)
        found = self.live.inflight.get(task.id)
        if found is not None and state in ("running", "waiting_for_effect", "waiting_for_approval"):
            prep = self._resume_prep(task, view, found, attempt)
            if prep.input_digest is None:
                with contextlib.suppress(RunFailedError):
                    ctx = ev.task_context(task, view)
                    prep.input_digest = resolved_input_digest(task, ctx, view)
            return prep
        return prepare_task(self.rs, task, view, attempt + 1)

    def _resume_prep(
        self, task: PlannedTask, view: ev.RuntimeView, found: Inflight, attempt: int
    ) -> Prepared:
        eff = found.effect
        if task.kind == "agent":
            return self._resume_agent(task, view, found, attempt)
        if eff.status == "succeeded" or found.reconciliation == "applied":
            result = eff.result if eff.status == "succeeded" else found.result
            del self.live.inflight[task.id]
            return self._from_result(task, attempt, eff, result)
        if eff.status == "failed":
            del self.live.inflight[task.id]
            return Prepared(task, attempt, "done", state="failed", error=eff.error)
        if eff.status == "cancelled":
            del self.live.inflight[task.id]
            return Prepared(task, attempt, "done", state="failed", error="approval rejected")
        if found.reconciliation in ("not_applied", "compensated"):
            del self.live.inflight[task.id]
            return prepare_task(self.rs, task, view, attempt + 1)
        del self.live.inflight[task.id]
        prep = prepare_task(self.rs, task, view, attempt)
        prep.recorded = True
        if prep.effect is None or prep.effect.effect_id != eff.effect_id:
            return Prepared(
                task, attempt, "done", state="failed",
                error=f"effect {eff.effect_id} can no longer be re-created identically; "
                "reconcile it and retry the task",
            )  # fmt: skip
        return prep

    def _resume_agent(
        self, task: PlannedTask, view: ev.RuntimeView, found: Inflight, attempt: int
    ) -> Prepared:
        """Re-enter an agent's loop: its confirmed calls are reused by identity, not resent."""
        del self.live.inflight[task.id]
        fresh = found.reconciliation in ("not_applied", "compensated")
        prep = prepare_task(self.rs, task, view, attempt + 1 if fresh else attempt)
        prep.recorded = not fresh
        return prep

    def _from_result(
        self, task: PlannedTask, attempt: int, eff: EffectRecord, result: Any
    ) -> Prepared:
        prep = Prepared(task, attempt, "done", output=result)
        if eff.operation == "builtin.memory.write" and isinstance(eff.request, dict):
            prep.memory_delta = {str(eff.request["key"]): eff.request.get("value")}
        return prep

    async def _record_requests(self, preps: list[Prepared]) -> None:
        rows = []
        for p in preps:
            assert p.effect is not None
            new = self._new_effect(p)
            reason = p.effect.approval_reason if p.effect.needs_approval else None
            rows.append(
                model.RequestRow(
                    p.task.id,
                    self.live.states[p.task.id],
                    p.attempt,
                    new,
                    p.effect.budget,
                    reason,
                )
            )
        denied = await self.store.record_requests(
            model.RequestBatch(self.rs.run_id, rows, self.clock.now(), self.trace_id)
        )
        for p in preps:
            assert p.effect is not None
            waiting = p.effect.needs_approval
            self.live.states[p.task.id] = "waiting_for_approval" if waiting else "running"
            self.live.attempts[p.task.id] = p.attempt
            self.on_progress(p.task.id, self.live.states[p.task.id])
            if waiting:
                p.kind = "waiting"
            else:
                p.started = True
        for p in preps:
            if p.task.id in denied:
                p.kind, p.state = "done", "failed"
                p.error = f"task {p.task.id}: budget exceeded; nothing was dispatched"
        if any(p.kind == "waiting" for p in preps):
            crash_point(CrashPoint.AFTER_REQUESTED)  # held for approval: requested, not started
        if any(p.started for p in preps):
            crash_point(CrashPoint.AFTER_STARTED)

    async def _start_agents(self, preps: list[Prepared]) -> None:
        rows = [model.TaskStart(p.task.id, self.live.states[p.task.id], p.attempt) for p in preps]
        await self.store.start_tasks(
            model.TaskStartBatch(self.rs.run_id, rows, self.clock.now(), self.trace_id)
        )
        for p in preps:
            self.live.states[p.task.id] = "running"
            self.live.attempts[p.task.id] = p.attempt
            self.on_progress(p.task.id, "running")

    def _new_effect(self, p: Prepared) -> NewEffect:
        assert p.effect is not None
        new = NewEffect(
            run_id=self.rs.run_id,
            task_id=p.task.id,
            attempt=p.attempt,
            ordinal=0,
            operation=p.effect.operation,
            request=p.effect.recorded_input,
            effect_class=p.effect.effect_class,
            risk=p.effect.risk,
            idempotency=p.effect.idempotency,
            trace_id=self.trace_id,
            waiting_for_approval=p.effect.needs_approval,
        )
        assert new.effect_id == p.effect.effect_id, "effect identity drifted"
        return new

    async def _start_and_execute(self, preps: list[Prepared], view: ev.RuntimeView) -> None:
        live = [p for p in preps if p.kind in ("effect", "agent")]
        ids = [p.effect.effect_id for p in live if p.effect is not None and not p.started]
        if not live:
            return
        approved = [
            p.task.id for p in live if self.live.states[p.task.id] == "waiting_for_approval"
        ]
        if ids:
            await self.store.start_effects(
                model.EffectStartBatch(
                    self.rs.run_id, ids, approved, self.clock.now(), self.trace_id
                )
            )
            crash_point(CrashPoint.AFTER_STARTED)
        for task_id in approved:
            self.live.states[task_id] = "running"
        # One effect alone commits its outcome with its completion; several share group
        # commits of whatever outcomes are ready, each durable as soon as its group commits.
        self.defer_outcome = len(live) == 1 and live[0].kind == "effect"
        remote = [p for p in live if p.kind == "agent" or (p.effect and not p.effect.in_process)]
        if len(remote) > 1:
            await self.pool.warm(len(remote))
        async with trio.open_nursery() as outer:
            self.committer = GroupCommitter(self.store)
            outer.start_soon(self.committer.serve)
            async with trio.open_nursery() as nursery:
                for p in live:
                    run = self._execute_agent if p.kind == "agent" else self._execute_one
                    nursery.start_soon(run, p, view)
            self.committer.close()

    async def _execute_agent(self, p: Prepared, view: ev.RuntimeView) -> None:
        runner = AgentRunner(self, p.task.id, p.attempt, p.task.agent or "", p.prompt or "")
        try:
            output = await runner.run()
        except AgentUncertain as exc:
            self._settle(p, "uncertain", None, str(exc))
            return
        except RunFailedError as exc:
            p.retryable = exc.retryable
            self._settle(p, "failed", None, f"task {p.task.id}: {exc.message}")
            return
        self._settle(p, "succeeded", output, None)

    async def _execute_one(self, p: Prepared, view: ev.RuntimeView) -> None:
        eff = p.effect
        assert eff is not None
        spent: dict[str, int] | None = dict.fromkeys(eff.budget, 0) if eff.budget else None
        put = None
        if eff.in_process:
            status, output, error = await self._in_process(p, view)
            if eff.operation == "builtin.long_term_memory.write" and status == "succeeded":
                req = eff.request
                put = model.MemoryPut(req["namespace"], req["key"], req.get("value"))
        else:
            status, output, error, retryable = await self._dispatch(p)
            p.retryable = retryable
            if status == "succeeded" and p.artifact_paths:
                error = await self._ingest(p)
                status = "succeeded" if error is None else status
            if spent is not None and output is not None:
                size = len(str(output.get("stdout", ""))) + len(str(output.get("stderr", "")))
                spent = {"processOutputBytes": size}
        if eff.secrets:
            redactor = Redactor(eff.secrets)
            output, error = redactor.redact(output), redactor.redact(error)
        run_id, trace_id = self.rs.run_id, self.trace_id
        finish = model.EffectOutcome(
            run_id, eff.effect_id, status, self.clock.now(), output, error, spent, trace_id, put
        )
        if self.defer_outcome:
            p.deferred_finish = finish
        else:
            await self.committer.commit(finish)
            crash_point(CrashPoint.AFTER_OUTCOME)
        self._settle(p, status, output, error)

    async def _in_process(self, p: Prepared, view: ev.RuntimeView) -> tuple[str, Any, str | None]:
        """Effects on state the coordinator owns: working memory and long-term memory."""
        eff = p.effect
        assert eff is not None
        req = eff.request
        if eff.operation == "builtin.memory.write":
            p.memory_delta = {str(req["key"]): req.get("value")}
            return "succeeded", memory_write_output(view.memory, req), None
        if eff.operation == "builtin.long_term_memory.write":
            return "succeeded", {"status": "changed", "changed": True, "key": req["key"]}, None
        entry = await self.store.long_term_get(req["namespace"], req["key"], self.clock.now())
        if not entry.found:
            return "failed", None, f"no long-term memory entry {req['namespace']}/{req['key']}"
        return "succeeded", {"status": "unchanged", "changed": False, "value": entry.value}, None

    async def _dispatch(self, p: Prepared) -> tuple[str, Any, str | None, bool]:
        eff = p.effect
        assert eff is not None
        msg = Execute(
            effect_id=eff.effect_id,
            run_id=self.rs.run_id,
            task_id=p.task.id,
            attempt=p.attempt,
            operation=eff.operation,
            request=eff.request,
            timeout_seconds=eff.timeout_s,
        )
        reply = await self.pool.execute(msg)
        crash_point(CrashPoint.AFTER_RESULT)
        if isinstance(reply, Result):
            p.artifact_paths = list(reply.artifacts)
            return "succeeded", reply.output, None, False
        assert isinstance(reply, Failure)
        status = "uncertain" if reply.uncertain else "failed"
        return status, None, reply.error.message, reply.error.retryable

    async def _ingest(self, p: Prepared) -> str | None:
        """Ingest the files a confirmed mutation wrote into the artifact store (≤ 16 MiB each)."""
        if not self.artifacts:
            return None
        for rel in p.artifact_paths:
            path = os.path.join(self.rs.workspace, rel)
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            if size > MAX_ARTIFACT_BYTES or not os.path.isfile(path):
                continue
            got = await self.store.ingest_artifact(
                model.IngestRequest(path, self.clock.now(), self.rs.run_id, p.task.id)
            )
            p.artifacts.append(got.ref(rel))
            p.lease_ids.append(got.lease_id)
        return None

    def _settle(self, p: Prepared, status: str, output: Any, error: str | None) -> None:
        p.kind = "done"
        if status == "succeeded":
            try:
                ev.check_contract(p.task, output)
                p.state, p.output = "succeeded", output
            except ev.TaskFailure as exc:
                p.state, p.error = "failed", exc.message
        elif status == "uncertain":
            p.state, p.error = "waiting_for_effect", f"effect outcome uncertain: {error}"
        else:
            p.state, p.error = "failed", error

    # ------------------------------------------------------------------ the batch commit

    async def _commit(self, preps: list[Prepared]) -> None:
        self._stage(preps)
        await self._flush()

    def _stage(self, preps: list[Prepared]) -> None:
        """Apply a batch's results to the live state and queue them for the next commit."""
        for p in preps:
            target = self._target_state(p)
            if p.memory_delta and p.state == "succeeded":
                self.live.memory = {**self.live.memory, **p.memory_delta}
                self.fused_memory = True
            self.fused.append(self._finished(p, target))
            if p.deferred_finish is not None:
                self.fused_finishes.append(p.deferred_finish)
            self.fused_compensated.extend(
                model.CompensatedPair(source_effect, p.effect.effect_id)
                for source_effect in self.rs.compensates.get(p.task.id, ())
                if target == "succeeded" and p.effect is not None
            )
            self._apply(p, target)

    async def _flush(self) -> None:
        """Commit every staged result in compiled order, with memory and one checkpoint."""
        if not self.fused:
            return
        items, compensated = self.fused, self.fused_compensated
        finishes = self.fused_finishes
        memory = self.live.memory if self.fused_memory else None
        self.fused, self.fused_compensated, self.fused_memory = [], [], False
        self.fused_finishes = []
        batch = model.BatchCommit(
            self.rs.run_id, items, memory, self.clock.now(), self.trace_id, compensated, finishes
        )
        await self.store.commit_batch(batch)
        if finishes:
            crash_point(CrashPoint.AFTER_OUTCOME)

    def _finished(self, p: Prepared, target: str) -> model.Finished:
        return model.Finished(
            task_id=p.task.id,
            from_state=self.live.states[p.task.id],
            state=target,
            attempt=max(p.attempt, 1),
            output=p.output,
            error=p.error,
            decision=p.decision,
            definition_fingerprint=p.task.definition_fingerprint or None,
            input_digest=p.input_digest,
            output_contract_fingerprint=contract_fingerprint(p.task),
            state_delta=p.memory_delta if p.state == "succeeded" else None,
            artifacts=tuple(p.artifacts) if target == "succeeded" else (),
            lease_ids=tuple(p.lease_ids),
        )

    def _target_state(self, p: Prepared) -> str:
        if p.state == "failed" and p.retryable and p.attempt < p.task.retry.max_attempts:
            return "retry_scheduled"
        return p.state

    def _apply(self, p: Prepared, state: str) -> None:
        task_id = p.task.id
        self.live.states[task_id] = state
        self.schedule.settle(task_id, state)
        self.live.attempts[task_id] = max(p.attempt, 1)
        self.on_progress(task_id, state)
        if state in ("succeeded", "skipped"):
            self.live.outputs[task_id] = p.output
        self.live.errors[task_id] = p.error
        if state == "retry_scheduled":
            self.live.not_before[task_id] = self.clock.monotonic() + p.task.retry.backoff_ms / 1000
        if state == "failed" and p.task.failure == "stop":
            self.stopped = True

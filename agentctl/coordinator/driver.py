"""The run driver: stable bounded ready batches under the effect protocol, committed in order.

One loop: take the ready tasks in compiled order, at most ``maxConcurrency`` of them; prepare
each against one immutable snapshot; record the effects (``requested``), commit ``started``,
dispatch, commit each outcome at once, then commit the whole batch in compiled order. A lone
effect's outcome and its task's completion are staged instead, and ride in the transaction
that records the next batch's effects (the pipelined commit, ADR 0011): a chain of effects
costs one commit per step. Each
task moves through the states of ``steps.py``; every phase below turns steps into new steps.

Invariants:
- nothing is dispatched before its ``started`` row commits;
- a confirmed outcome is never executed again: on resume it is reused from the ledger, a
  write's file referenced by its task's completion as without the crash (``ingest``);
- a started effect without an outcome is never repeated: it is uncertain and blocks — unless
  its remote work has a durable handle, which the resumed effect observes instead;
- task outputs, memory, audit and the checkpoint of a batch commit in one transaction, in
  compiled order, whatever order the effects finished in;
- staged results (a deferred outcome above all) commit before anything of the next batch
  executes, and no later than the next batch's preparation: with its requests, or alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING

import trio

from agentctl.coordinator.calls import (
    AgentAwaitingApproval,
    AgentUncertain,
    CallGateway,
    RecordedCallChanged,
)
from agentctl.coordinator.clock import Clock, parse_stamp
from agentctl.coordinator.ending import failure_stops, final_state
from agentctl.coordinator.execute import EffectRunner, settle_recorded
from agentctl.coordinator.ingest import Ingester
from agentctl.coordinator.live import Inflight, Live, Retention, settle_output
from agentctl.coordinator.poolref import workers
from agentctl.coordinator.prepare import (
    RunSettings,
    prepare_recorded,
    prepare_task,
    resolved_input_digest,
)
from agentctl.coordinator.schedule import SCHEDULABLE, WAITING, Scheduler
from agentctl.coordinator.staging import Staged, request_row, target_state
from agentctl.coordinator.steps import (
    AgentHeld,
    Executable,
    HeldForApproval,
    PendingAgent,
    PendingEffect,
    Prepared,
    RunningAgent,
    Settled,
    StartedEffect,
    Step,
    running,
    started,
)
from agentctl.coordinator.store import GroupCommitter, Store
from agentctl.coordinator.streaming import StreamListener
from agentctl.core import evaluate as ev
from agentctl.core.plan import PlannedTask
from agentctl.core.states import TERMINAL_TASK_STATES
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import AgentctlError, RunFailedError
from agentctl.ledger import model

if TYPE_CHECKING:  # a pure run imports neither the pool nor its wire (``poolref``)
    from agentctl.coordinator.workerpool import WorkerPool

FUSE_LIMIT = 512  # pure results staged at most before a commit
_RESUMABLE = ("running", "waiting_for_effect", "waiting_for_approval")


class Driver:
    def __init__(
        self,
        store: Store,
        rs: RunSettings,
        live: Live,
        pool: WorkerPool | None,
        clock: Clock,
        trace_id: str,
        on_progress: Callable[[str, str], None] | None = None,
        artifacts: bool = False,
        on_stream: StreamListener | None = None,
    ) -> None:
        self.store = store
        self.rs = rs
        self.live = live
        self.pool = pool
        self.clock = clock
        self.trace_id = trace_id
        # Resumed after a task failed under ``failure: stop``: the run is failed, start nothing.
        self.stopped = failure_stops(rs.plan, live.states)
        self.schedule = Scheduler(rs.plan, live.states)
        self.retention = Retention(rs.plan, live.states, keep_all=rs.check_mode)
        self.staged = Staged()  # results applied to ``live``, not yet committed
        # One ingestion path for an action's files and an agent's tool calls' files.
        ingester = Ingester(store, clock, rs.run_id, trace_id, rs.root, enabled=artifacts)
        self.effects = EffectRunner(store, pool, clock, rs.run_id, trace_id, ingester, live.unsent)
        self.gateway = CallGateway(
            store, pool, clock, rs.run_id, trace_id, rs.context, ingester, on_stream=on_stream
        )
        self.on_progress = on_progress or (lambda _task, _state: None)
        self._view: ev.RuntimeView | None = None  # the last view made (``view``)
        self.stop_requested = False  # the cancel flag was seen (``request_stop``)
        self._restore_backoffs()

    def _restore_backoffs(self) -> None:
        """A retry found scheduled by a resume still waits what is left of its backoff
        (spec/dsl.md §4.5: ``retry_scheduled`` → sleep ``backoffMs`` → ``ready``), counted
        from when it was recorded; a wall-clock step never makes it wait longer than it."""
        now = parse_stamp(self.clock.now())
        for task_id, at in self.live.scheduled_at.items():
            backoff = self.rs.plan.task(task_id).retry.backoff_ms / 1000
            elapsed = max(0.0, (now - parse_stamp(at)).total_seconds())
            if elapsed < backoff:
                self.live.not_before[task_id] = self.clock.monotonic() + backoff - elapsed

    def request_stop(self) -> None:
        """`agentctl cancel` was seen: start no further batch; what is in flight finishes
        and commits (spec/cli.md §6: the flag is honoured at the next boundary)."""
        self.stop_requested = True

    def cut_short(self) -> bool:
        """Whether a requested stop left work undone: with every task ended there was no
        boundary left to honour it at, and the run ends as its tasks did."""
        return self.stop_requested and not all(
            s in TERMINAL_TASK_STATES for s in self.live.states.values()
        )

    # ------------------------------------------------------------------ the loop

    async def drive(self) -> str:
        """Run until nothing is ready; returns succeeded | failed | paused | blocked."""
        try:
            await self._drive_batches()
        except BaseException:
            # A confirmed outcome may be staged for the next batch's commit: a drive cut short
            # (cancelled, or failed in a later step) still commits it rather than leave its
            # effect to be found uncertain.
            with trio.CancelScope(shield=True), contextlib.suppress(AgentctlError):
                await self._flush()
            raise
        await self._flush()
        return final_state(self.live, self.stopped)

    async def _drive_batches(self) -> None:
        limit = self.rs.plan.max_concurrency
        while not self.stopped and not self.stop_requested:
            ready = self.schedule.ready_tasks(self._eligible, limit)
            if not ready:
                if not self.schedule.has_retry():
                    break
                await self._flush()
                await trio.sleep(0.01)
                continue
            await self._run_batch(ready)
        if self.stopped and not self.stop_requested and self.live.halted is None:
            # A failure stopped the drive; a task whose approval was rejected still fails now
            # (no work to do): left waiting, it would keep the run paused (spec/cli.md §5).
            settle = self.schedule.ready_tasks(self._rejected, len(self.live.states))
            if settle:
                await self._run_batch(settle)

    def _eligible(self, task: PlannedTask) -> bool:
        state = self.live.states[task.id]
        if state not in SCHEDULABLE:
            return False
        not_before = self.live.not_before.get(task.id)  # a retry's backoff; no clock read else
        if not_before is not None and not_before > self.clock.monotonic():
            return False
        return state not in WAITING or self._resolved(task.id)

    def _rejected(self, task: PlannedTask) -> bool:
        return self.live.decision(task.id) == "cancelled"

    def _resolved(self, task_id: str) -> bool:
        """A waiting task can move once an operator resolved its effect or approval."""
        if self.live.states[task_id] == "waiting_for_approval":
            return self.live.decision(task_id) is not None
        return task_id in self.live.inflight

    def view(self) -> ev.RuntimeView:
        # No copies: live mappings change only after a batch is prepared and executed, and
        # memory is replaced (never mutated), so every task of a batch sees one snapshot. The
        # view holds the mappings themselves, so one serves every batch until one of them is
        # replaced (memory, by a task that writes it): not one view made per chain step.
        live, last = self.live, self._view
        if (
            last is None
            or last.memory is not live.memory
            or last.inputs is not live.inputs
            or last.outputs is not live.outputs
            or last.states is not live.states
            or last.errors is not live.errors
            or last.output_texts is not live.output_texts
        ):
            last = self._view = ev.RuntimeView(
                inputs=live.inputs,
                memory=live.memory,
                outputs=live.outputs,
                states=live.states,
                errors=live.errors,
                output_texts=live.output_texts,
            )
        return last

    # ------------------------------------------------------------------ one batch

    async def _run_batch(self, batch: list[PlannedTask]) -> None:
        for task in batch:
            self.schedule.take(task)
        missing = self.retention.missing(self.live, batch)
        if missing:  # most batches of a fresh run: none, and no coroutine made to say so
            await self._read_back(missing)
        view = self.view()
        steps: list[Step] = [self._prepare(task, view) for task in batch]
        if any(isinstance(s, Settled) and s.written is not None for s in steps):
            # A resumed confirmed write (``_resume``): its file referenced as the live run's
            # completion would have.
            steps = [await self._recovered(s) for s in steps]
        if all(map(isinstance, steps, repeat(Settled))):  # no generator frame per batch
            self._stage(steps)
            # Pure work is re-derivable, so consecutive pure batches share one commit; an
            # effect outcome staged by the batch before waits for this one batch, no longer.
            if self.staged.outcomes or len(self.staged.finished) >= FUSE_LIMIT:
                await self._flush()
            return
        # The previous batch's staged results ride in the transaction that records this
        # batch's fresh effects or starts its agents (one commit per chain step); whatever
        # they did not carry commits on its own — either way before anything here executes.
        steps = await self._record(steps)
        steps = await self._start(steps)
        await self._flush()
        steps = await self._execute(steps, view)
        self._stage(steps)  # committed by the next batch's first transaction, or drive's end

    async def _read_back(self, missing: list[str]) -> None:
        """Read the finished outputs a batch needs and memory no longer holds (``missing``; a
        resumed run holds none) in one ledger read; staged results commit first, so it sees
        them."""
        await self._flush()
        self.live.outputs.update(await self.store.read_outputs(self.rs.run_id, missing))

    def _prepare(self, task: PlannedTask, view: ev.RuntimeView) -> Prepared | StartedEffect:
        attempt = self.live.attempts.get(task.id, 0)
        found = self.live.inflight.pop(task.id, None)
        if found is None or self.live.states[task.id] not in _RESUMABLE:
            return prepare_task(self.rs, task, view, attempt + 1)
        prep = self._resume(task, view, found, attempt)
        if prep.input_digest is None:
            with contextlib.suppress(RunFailedError):
                ctx = ev.task_context(task, view)
                prep = dataclasses.replace(
                    prep, input_digest=resolved_input_digest(task, ctx, view)
                )
        return prep

    def _resume(
        self, task: PlannedTask, view: ev.RuntimeView, found: Inflight, attempt: int
    ) -> Prepared | StartedEffect:
        """A task found mid-flight: reuse its outcome, or re-create its effect identically."""
        eff = found.effect
        fresh = found.reconciliation in ("not_applied", "compensated")
        held = self.live.states[task.id] == "waiting_for_approval"  # resolved since
        if task.kind == "agent":
            # Re-enter the loop: its confirmed calls are reused by identity, not resent.
            prep = prepare_task(self.rs, task, view, attempt + 1 if fresh else attempt)
            if isinstance(prep, PendingAgent):
                # A task paused at a held tool call moves back to running (same attempt)
                # before its loop re-enters; the gateway then finds the approval's outcome.
                return dataclasses.replace(prep, recorded=not fresh and not held)
            return prep
        if eff.status == "succeeded" or found.reconciliation == "applied":
            result = eff.result if eff.status == "succeeded" else found.result
            return settle_recorded(task, attempt, eff, result)
        if eff.status in ("failed", "cancelled"):  # result: what a failed one still produced
            error = eff.error if eff.status == "failed" else "approval rejected"
            return Settled(task, attempt, "failed", eff.result, error)
        if fresh:
            return prepare_task(self.rs, task, view, attempt + 1)
        prep = prepare_recorded(self.rs, task, view, attempt, eff, approved=held)
        if isinstance(prep, PendingEffect) and found.remote is not None and eff.status == "started":
            # Its remote work is known and durable: observe it, never send it again.
            observe = {**prep.effect.request, "continueTaskId": found.remote.remote_task_id}
            return started(
                dataclasses.replace(prep, effect=dataclasses.replace(prep.effect, request=observe))
            )
        return prep

    async def _recovered(self, step: Step) -> Step:
        return await self.effects.ingester.recovered(step) if isinstance(step, Settled) else step

    # ------------------------------------------------------------------ record and start

    async def _record(self, steps: list[Step]) -> list[Step]:
        """Fresh effects: request (+ start, or hold for approval) and reserve, in one commit."""
        fresh = [s for s in steps if isinstance(s, PendingEffect) and not s.recorded]
        if not fresh:
            return steps
        run, states = self.rs.run_id, self.live.states
        rows = [request_row(s, run, self.trace_id, states[s.task.id]) for s in fresh]
        now = self.clock.now()
        after = self._staged_commit(now)
        batch = model.RequestBatch(self.rs.run_id, rows, now, self.trace_id, after)
        denied = {d.task_id: d for d in await self.store.record_requests(batch)}
        self.staged = Staged()  # only once it committed: a failed commit is retried on exit
        moved = {id(step): self._recorded(step, denied.get(step.task.id)) for step in fresh}
        kinds = {type(s) for s in moved.values()}
        if HeldForApproval in kinds:
            crash_point(CrashPoint.AFTER_REQUESTED)  # held for approval: requested, not started
        if StartedEffect in kinds:
            crash_point(CrashPoint.AFTER_STARTED)
        if len(steps) == 1:  # a chain step: nothing else to keep in order
            return list(moved.values())
        return [moved.get(id(s), s) for s in steps]

    def _recorded(self, step: PendingEffect, denied: model.BudgetDenial | None) -> Step:
        """The step after its request committed, mirrored into the live state."""
        held = step.effect.needs_approval and denied is None
        self._mirror(step.task.id, "waiting_for_approval" if held else "running", step.attempt)
        if denied is not None:  # the overrun is recorded, no effect row; say which limit
            error = (
                f"task {step.task.id}: budget exceeded: {denied.described()} before"
                f" {step.effect.operation}; nothing was dispatched"
            )
            return Settled(step.task, step.attempt, "failed", error=error)
        if held:
            return HeldForApproval(step.task, step.attempt, step.effect)
        return started(step)

    def _mirror(self, task_id: str, state: str, attempt: int) -> None:
        self.live.states[task_id] = state
        self.live.attempts[task_id] = attempt
        self.on_progress(task_id, state)

    async def _start(self, steps: list[Step]) -> list[Step]:
        """Fresh agents to running; resumed (already recorded) effects to ``started``."""
        agents = [s for s in steps if isinstance(s, PendingAgent) and not s.recorded]
        if agents:
            rows = [
                model.TaskStart(s.task.id, self.live.states[s.task.id], s.attempt) for s in agents
            ]
            now = self.clock.now()
            after = self._staged_commit(now)  # carried, like ``_record``'s requests
            await self.store.start_tasks(
                model.TaskStartBatch(self.rs.run_id, rows, now, self.trace_id, after)
            )
            self.staged = Staged()
            for step in agents:
                self._mirror(step.task.id, "running", step.attempt)
        resumed = [s for s in steps if isinstance(s, PendingEffect)]
        if resumed:
            await self._start_recorded(resumed)
        return [_started_step(s) for s in steps]

    async def _start_recorded(self, resumed: Sequence[PendingEffect]) -> None:
        ids = [s.effect.effect_id for s in resumed]
        waiting = "waiting_for_approval"
        approved = [s.task.id for s in resumed if self.live.states[s.task.id] == waiting]
        start = model.EffectStartBatch(
            self.rs.run_id, ids, approved, self.clock.now(), self.trace_id
        )
        await self.store.start_effects(start)
        crash_point(CrashPoint.AFTER_STARTED)
        for task_id in approved:
            self.live.states[task_id] = "running"

    # ------------------------------------------------------------------ execute

    async def _execute(self, steps: list[Step], view: ev.RuntimeView) -> list[Step]:
        """Run every started effect and agent of the batch concurrently."""
        work = [s for s in steps if isinstance(s, (StartedEffect, RunningAgent))]
        if not work:
            return steps
        done: dict[int, Step] = {}
        lone = work[0] if len(work) == 1 else None
        if isinstance(lone, StartedEffect):
            # One effect alone defers its outcome into its completion (no committer, no
            # nursery: a chain step pays for neither).
            done[id(lone)] = await self.effects.run(lone, view.memory, None)
            return [done.get(id(s), s) for s in steps]
        # Several share group commits of whatever outcomes are ready, each durable as soon
        # as its group commits.
        remote = [s for s in work if isinstance(s, RunningAgent) or not s.effect.in_process]
        if len(remote) > 1:
            await workers(self.pool).warm(len(remote))
        async with trio.open_nursery() as outer:
            committer = GroupCommitter(self.store)
            outer.start_soon(committer.serve)
            async with trio.open_nursery() as nursery:
                for step in work:
                    nursery.start_soon(self._execute_one, step, view, committer, done)
            committer.close()
        return [done.get(id(s), s) for s in steps]

    async def _execute_one(
        self,
        step: Executable,
        view: ev.RuntimeView,
        committer: GroupCommitter,
        done: dict[int, Step],
    ) -> None:
        if isinstance(step, RunningAgent):
            got = await self._run_agent(step)
            # Its tool calls' files: referenced if it succeeded, their leases released anyway.
            done[id(step)] = self.gateway.take_ingested(step.task.id, step.attempt).settle(got)
        else:
            done[id(step)] = await self.effects.run(step, view.memory, committer)

    async def _run_agent(self, step: RunningAgent) -> Settled | AgentHeld:
        from agentctl.coordinator.agent import AgentRunner  # only a plan with agents loads it

        runner = AgentRunner(step, self.gateway)
        base = Settled(
            step.task, step.attempt, "succeeded", None, None, step.decision, step.input_digest
        )
        try:
            output = await runner.run()
        except AgentAwaitingApproval:
            self._mirror(step.task.id, "waiting_for_approval", step.attempt)
            return AgentHeld(step.task, step.attempt)
        except RecordedCallChanged as exc:
            # Nothing sent, nothing recorded: the task stays as it is, the drive stops and
            # the run is left paused (``ending.final_state``) for a resume that matches.
            self.live.refused = f"task {step.task.id}: {exc}"
            self.stopped = True
            return AgentHeld(step.task, step.attempt)
        except AgentUncertain as exc:
            error = f"effect outcome uncertain: {exc}"
            return dataclasses.replace(base, state="waiting_for_effect", error=error)
        except RunFailedError as exc:
            base = dataclasses.replace(base, answered=runner.unrecorded())  # no call carried them
            own = f"task {step.task.id}: "  # a message naming its task already is not named twice
            error = exc.message if exc.message.startswith(own) else own + exc.message
            return dataclasses.replace(base, state="failed", error=error, retryable=exc.retryable)
        try:
            ev.check_contract(step.task, output)
        except ev.TaskFailure as exc:
            return dataclasses.replace(base, state="failed", error=exc.message)
        return dataclasses.replace(base, output=output)

    # ------------------------------------------------------------------ the batch commit

    def _stage(self, steps: Sequence[Step]) -> None:
        """Apply a batch's results to the live state and queue them for the next commit."""
        for step in steps:
            if not isinstance(step, Settled):
                continue  # held for approval: its pause committed with its request
            target = target_state(step)
            if step.memory_delta and step.state == "succeeded":
                self.live.memory = {**self.live.memory, **step.memory_delta}
                self.staged.memory_changed = True
            links = self.rs.compensates.get(step.task.id, ()) if target == "succeeded" else ()
            from_state = self.live.states[step.task.id]
            # Mirrored first: an output a later task reads is encoded there, once for both.
            text = self._apply(step, target)
            self.staged.add(step, from_state, target, links, text, new_id=self.clock.new_id)

    def _staged_commit(self, now: str) -> model.BatchCommit | None:
        """The staged results as one commit in compiled order (None when nothing is staged)."""
        if not self.staged:
            return None
        memory = self.live.memory if self.staged.memory_changed else None
        return self.staged.batch(self.rs.run_id, memory, now, self.trace_id)

    async def _flush(self) -> None:
        """Commit every staged result in compiled order, with memory and one checkpoint."""
        if not self.staged:  # the common case after a carried commit: no clock read either
            return
        commit = self._staged_commit(self.clock.now())
        if commit is None:
            return
        await self.store.commit_batch(commit)
        self.staged = Staged()  # only once it committed: a failed commit is retried on exit
        if commit.outcomes:
            crash_point(CrashPoint.AFTER_OUTCOME)

    def _apply(self, step: Settled, state: str) -> str | None:
        """Mirror ``step`` into the live state; returns its output's canonical JSON when that
        was encoded (``settle_output``)."""
        task_id = step.task.id
        self.live.states[task_id] = state
        self.schedule.settle(task_id, state)
        self.live.attempts[task_id] = max(step.attempt, 1)
        self.on_progress(task_id, state)
        text = settle_output(self.live, self.retention, task_id, step.output)
        self.live.errors[task_id] = step.error
        if state == "retry_scheduled":
            backoff = step.task.retry.backoff_ms / 1000
            self.live.not_before[task_id] = self.clock.monotonic() + backoff
        if state == "failed" and step.task.failure == "stop":
            self.stopped = True
        if step.stops_run:
            self.live.halted = f"task {task_id}: {step.error}"
            self.stopped = True
        return text


def _started_step(step: Step) -> Step:
    if isinstance(step, PendingEffect):
        return started(step)
    if isinstance(step, PendingAgent):
        return running(step)
    return step

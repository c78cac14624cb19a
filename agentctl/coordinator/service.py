"""Run-level operations behind the CLI: start a run, resume one, and supervise the drive.

Invariants:
- a run is created (run row with its document and compiled plan, pending tasks, budget
  ledger, audit, checkpoint, lease) in one transaction, only after the workflow compiled;
- driving reads the run's configuration only from the plan, never from the document; a
  resumed run loads the plan it was created with (``creation.load_plan``), never compiling;
- exactly one live coordinator drives a run (the lease); a second one is refused;
- SIGINT, SIGTERM, ``agentctl cancel`` and ``--timeout-seconds`` converge on one path: in-flight
  work is cancelled, started-unconfirmed effects become uncertain, the run is cancelled (130);
  a drive of its own holds SIGINT and SIGTERM from its start to its end, so a further signal
  while the run stops changes nothing (never a KeyboardInterrupt inside the teardown);
- ``maxWallTimeSeconds`` counts from the durable ``created_at``, so resuming cannot reset it.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from agentctl.coordinator.clock import Clock, parse_stamp
from agentctl.coordinator.creation import new_run_ids, owner_identity, stored_plan
from agentctl.coordinator.driver import Driver
from agentctl.coordinator.events import current_sink
from agentctl.coordinator.live import Live, live_from
from agentctl.coordinator.otel import export_run
from agentctl.coordinator.prepare import RunSettings
from agentctl.coordinator.store import Store
from agentctl.coordinator.streaming import StreamListener
from agentctl.coordinator.workerproc import pool_size, reap_stale_workers
from agentctl.coordinator.workerstart import Prestarted
from agentctl.core.collector import collector_paused
from agentctl.core.compiler.reads import run_output_reads
from agentctl.core.evaluate import RuntimeView, TaskFailure, render_run_outputs
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import Plan
from agentctl.core.states import cancellable
from agentctl.core.workload import Workload, workload
from agentctl.errors import (
    TASK_DISK_FULL_HINT,
    BlockedError,
    CancelledRunError,
    RunFailedError,
    TaskDiskFullError,
)
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import CancelRun, SettleRun, UnsentEffect
from agentctl.ledger.runs import NewRun, RunHead

if TYPE_CHECKING:  # a pure run imports neither the pool nor its wire (``poolref``)
    from agentctl.coordinator.workerpool import WorkerPool

CANCEL_POLL_S = 0.1
Progress = Callable[[str, str], None]


@dataclass(frozen=True)
class RunOutcome:
    """A driven run's final state, output and task errors, as the CLI prints them."""

    run_id: str
    trace_id: str
    state: str
    output: JsonValue
    errors: Mapping[str, str | None] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "traceId": self.trace_id,
            "state": self.state,
            "output": self.output,
        }


@dataclass(frozen=True)
class DriveRequest:
    """Everything ``drive_run`` needs for one created run: its ledger, plan and workspace."""

    ledger: RunLedger
    run_id: str
    trace_id: str
    plan: Plan
    workspace: str
    timeout_s: float | None = None
    progress: Progress | None = None
    clock: Clock = field(default_factory=Clock)
    check_mode: bool = False
    diff: bool = False
    # `--interactive`: an approval is asked for at the terminal after the run pauses, so the
    # policy's `nonInteractive` (deny or fail instead of pausing) does not apply.
    interactive: bool = False
    compensates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    on_stream: StreamListener | None = None  # each durable stream event, live
    prestarted: Prestarted | None = None  # workers started before the run was created
    # A ``serve`` drive: its process-wide worker pool, and the event that hands the run back
    # (SIGINT/SIGTERM of the serve) instead of this drive watching signals itself.
    pool: WorkerPool | None = None
    stop: trio.Event | None = None
    # How often the durable cancel flag is read: a serve's many drives read it less often.
    cancel_poll_s: float = CANCEL_POLL_S


@collector_paused()
def create_run(
    ledger: RunLedger,
    *,
    plan: Plan,
    document: Mapping[str, Any],
    inputs: Mapping[str, Any],
    workspace: str,
    clock: Clock,
    mode: str = "execute",
    source_run_id: str | None = None,
    queued: bool = False,
    trace_id: str | None = None,
    ids: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """Create the run (document and compiled plan stored) and take its lease in one txn;
    ``queued``: submit it instead, with no lease, for a ``serve`` to claim. ``document`` is the
    object ``plan`` was compiled from, unchanged since: the compile's text of it is stored.
    ``ids``: the run and trace ids the caller minted (``new_run_ids``) before this write."""
    run_id, trace_id = ids or new_run_ids(clock, trace_id)
    new = NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name=plan.name,
        workflow_digest=plan.workflow_digest,
        plan_digest=plan.plan_digest,
        workflow=dict(document),
        plan={},  # no printed plan stored (``RunRecord.plan`` derives it): ~7 MB at 10,000 tasks
        inputs=dict(inputs),
        working_memory=dict(plan.run.working_memory),
        trace_id=trace_id,
        base_path=workspace,
        parent_run_id=source_run_id,
        source_run_id=source_run_id,
        budget_limits=plan.run.budget_limits(),
        compiled_plan_json=stored_plan(plan),
        state="queued" if queued else "running",
        workflow_text=plan.take_document_text(document),  # the compile's encoding, if of it
    )
    _record(ledger, new, plan.order, clock.now(), queued=queued)
    return run_id, trace_id


def _record(
    ledger: RunLedger, new: NewRun, order: Sequence[str], now: str, *, queued: bool
) -> None:
    """Store the new run: submitted (queued, no lease) or under this process's lease."""
    if queued:
        ledger.submit_run(new, order, now)
    else:
        ledger.create_run(new, order, owner_identity(), now)


@trio.lowlevel.enable_ki_protection
async def drive_run(req: DriveRequest) -> RunOutcome:
    """Drive a created or resumed run to a resting state under the one cancellation path.

    Protected from trio's KeyboardInterrupt: inside, the drive's signal receiver (or a
    serve's) takes every SIGINT and SIGTERM; one landing after the receiver has closed, when
    the run is settled, is left pending for ``run_trio``, which keeps the decided outcome."""
    stop = trio.CancelScope()  # entered around the driver; cancelling it first is allowed
    if req.stop is not None:  # a serve's drive: the serve owns the process's signals
        return await _drive_run(req, stop)
    # One receiver for the whole drive, the pool's shutdown and the final commit included:
    # the first SIGINT or SIGTERM stops the run; a later one, while it stops, is taken and
    # dropped. Outside a receiver trio raises it as KeyboardInterrupt wherever the code is,
    # e.g. between the pool's ``__aexit__`` being called and awaited: a torn-down exit.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, signals, stop)
            try:
                outcome = await _drive_run(req, stop)
            finally:
                nursery.cancel_scope.cancel()
    return outcome


async def _drive_run(req: DriveRequest, stop: trio.CancelScope) -> RunOutcome:
    sink = current_sink()
    if sink is not None:  # --output jsonl: show what this drive commits, as it commits
        req = replace(req, on_stream=sink.stream)
    store = Store(req.ledger, sink.tap(req.run_id, req.trace_id) if sink else None)
    live = live_from(await store.load_live(req.run_id))
    # A serve's shared pool keeps its own registry (and must not be reaped as stale here).
    registry = worker_registry(req.ledger.location) if req.pool is None else ""
    try:
        final, cancelled, wall_expired = await _drive_with_workers(store, req, live, registry, stop)
    finally:
        # Also when the drive failed (a full disk): every worker is dead, nothing to record.
        drop_worker_registry(registry)
    if wall_expired:
        final = "wall_time_exceeded"
    outcome: RunOutcome | None = None
    with trio.CancelScope(shield=True):
        outcome = await _finish(store, req, live, final, cancelled)
    assert outcome is not None
    await export_run(store, req.run_id, outcome.state)  # only with an OTLP endpoint set
    return outcome


async def _drive_with_workers(
    store: Store, req: DriveRequest, live: Live, registry: str, scope: trio.CancelScope
) -> tuple[str, bool, bool]:
    """Run the driver inside the worker pool and the cancellation scopes (``scope``: the
    drive's own, which a stop cancels); returns the final state, whether the run was
    cancelled, and whether its wall time ran out."""
    needs = workload(req.plan)  # once: it walks every task
    size = pool_size(req.plan, needs)
    wall_deadline = await _wall_deadline(store, req)
    # What a drive cut short by a signal, a deadline or the wall clock reports.
    final, flagged = "failed", False
    async with _open_pool(req, size, registry, needs) as pool:
        if pool is not None:  # artifacts come only from workers: a pure drive stores none
            await store.open_artifacts()
        driver = Driver(
            store,
            _settings(req),
            live,
            pool,
            req.clock,
            req.trace_id,
            req.progress,
            artifacts=True,
            on_stream=req.on_stream,
        )
        with scope, trio.CancelScope(deadline=wall_deadline) as wall:
            # A run whose cancellation was requested before this drive claimed it (a paused
            # run cancelled, then resumed; a serve's claim): the first boundary, start nothing.
            if await store.is_cancel_requested(req.run_id):
                scope.cancel()
                await trio.lowlevel.checkpoint()  # raises Cancelled (caught by ``scope``)
            async with trio.open_nursery() as nursery:
                _start_watchers(nursery, store, req, (scope, driver), pool, size)
                if req.timeout_s is not None:
                    scope.deadline = trio.current_time() + req.timeout_s
                final, flagged = await _drive_until_flagged(driver)
                nursery.cancel_scope.cancel()
    cancelled = scope.cancelled_caught or flagged
    return final, cancelled, wall.cancelled_caught and not cancelled


async def _drive_until_flagged(driver: Driver) -> tuple[str, bool]:
    """The drive's final state, and whether `agentctl cancel` stopped it: seen by the
    watcher between batches with work left (``Driver.cut_short``), or by a transaction
    about to start work (``runs.refuse_if_cancel_requested_txn``: nothing of it started)."""
    try:
        final = await driver.drive()
    except CancelledRunError:
        return "failed", True
    except BaseExceptionGroup as group:  # from parallel agents' calls: all of them, or raise
        if group.split(CancelledRunError)[1] is not None:
            raise
        return "failed", True
    return final, driver.cut_short()


def _start_watchers(
    nursery: trio.Nursery,
    store: Store,
    req: DriveRequest,
    stoppable: tuple[trio.CancelScope, Driver],
    pool: WorkerPool | None,
    size: int,
) -> None:
    """What runs beside the driver: a serve's stop, which cuts the drive's scope
    (``drive_run`` watches the signals of a drive of its own), the cancel flag, which asks
    the driver to stop at its next boundary, warm-up."""
    scope, driver = stoppable
    if req.stop is None:
        # Worker start-up (~0.1-0.3 s) overlaps the run's first transactions.
        nursery.start_soon(_warm, pool, _warm_count(req, size))
    else:
        nursery.start_soon(_watch_stop, req.stop, scope)
    nursery.start_soon(_watch_cancel_flag, store, req, driver)


@contextlib.asynccontextmanager
async def _open_pool(
    req: DriveRequest, size: int, registry: str, needs: Workload
) -> AsyncIterator[WorkerPool | None]:
    """The drive's own worker pool, the ``serve``'s shared one (left open), or none for a
    plan with no worker-placed task (``poolref``: nor is the pool's wire imported)."""
    if req.pool is not None:
        yield req.pool
        return
    if needs.worker_tasks == 0:
        yield None
        return
    from agentctl.coordinator.workerpool import open_worker_pool

    async with open_worker_pool(
        size, registry_path=registry, preload=needs.modules(), prestarted=req.prestarted
    ) as pool:
        pool.trace_id = req.trace_id
        yield pool


def _settings(req: DriveRequest) -> RunSettings:
    return RunSettings(
        req.run_id,
        req.plan,
        req.workspace,
        interactive=req.interactive,
        check_mode=req.check_mode,
        diff=req.diff,
        compensates=req.compensates,
        protected_paths=req.ledger.own_state_paths(),
    )


async def _warm(pool: WorkerPool | None, count: int) -> None:
    if pool is not None:
        await pool.warm(count)


def _warm_count(req: DriveRequest, size: int) -> int:
    """Workers to start as the drive begins: every prestarted one (so it is adopted while
    the driver prepares), and the whole pool when concurrent worker tasks will want it."""
    prestarted = req.prestarted.started if req.prestarted is not None else 0
    return max(prestarted, size if _wide_effects(req.plan) else 0)


def _wide_effects(plan: Plan) -> bool:
    """Whether the run will want more than one worker: concurrent worker-executed tasks."""
    if plan.max_concurrency < 2:
        return False
    remote = 0
    for task in plan.tasks:
        entry = task.entry if task.kind in ("action", "agent") else None
        remote += entry is not None and entry.placement == "worker"
        if remote > 1:
            return True
    return False


def drop_worker_registry(registry: str) -> None:
    """Remove a coordinator's registry once its pool closed (every worker is dead): "" is
    none; a file already gone is fine."""
    with contextlib.suppress(OSError):
        if registry:
            os.unlink(registry)


def worker_registry(location: Path) -> str:
    """This coordinator's worker registry; kills the workers left by dead coordinators."""
    folder = Path(f"{location}.workers")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # a server's: under .agentctl/
    reap_stale_workers(location)
    return str(folder / f"{os.getpid()}.json")


async def _wall_deadline(store: Store, req: DriveRequest) -> float:
    """``maxWallTimeSeconds`` counts from the durable run creation, across pauses and resumes."""
    limit = req.plan.run.wall_time_limit()
    if limit is None:
        return math.inf
    run = await store.get_run(req.run_id)
    elapsed = (parse_stamp(req.clock.now()) - parse_stamp(run.created_at)).total_seconds()
    return trio.current_time() + max(0.0, limit - elapsed)


async def _watch_signals(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    async for _ in signals:
        scope.cancel()  # once stopping (or stopped), a further signal changes nothing


async def _watch_stop(stop: trio.Event, scope: trio.CancelScope) -> None:
    await stop.wait()
    scope.cancel()


async def _watch_cancel_flag(store: Store, req: DriveRequest, driver: Driver) -> None:
    """`agentctl cancel` from any shell: the driver starts no further batch, and what is in
    flight finishes and commits (a signal or a deadline, by contrast, cuts it: its effects
    become uncertain). A transaction about to start work checks the flag itself, so this
    poll only spares the work between two effects."""
    while True:
        await trio.sleep(req.cancel_poll_s)
        if await store.is_cancel_requested(req.run_id):
            driver.request_stop()
            return


async def _finish(
    store: Store, req: DriveRequest, live: Live, final: str, cancelled: bool
) -> RunOutcome:
    now = req.clock.now()
    if cancelled and req.stop is not None and req.stop.is_set():
        # A stopping ``serve``: in-flight effects end as on cancellation, but the run stays
        # running (no task cancelled), its lease released: another ``serve`` continues it.
        await store.cancel_run(_stop(req, live, now, "running", None))
        return RunOutcome(req.run_id, req.trace_id, "released", None, live.errors)
    if cancelled:
        await store.cancel_run(_stop(req, live, now, "cancelled", None))
        return RunOutcome(req.run_id, req.trace_id, "cancelled", None, live.errors)
    if final == "wall_time_exceeded":
        reason = "budget maxWallTimeSeconds exceeded (counted from run creation)"
        await store.cancel_run(_stop(req, live, now, "failed", reason))
        return RunOutcome(req.run_id, req.trace_id, "failed", None, {"run": reason})
    errors: dict[str, str | None] = (
        dict(live.errors) if (stop := live.refused or live.halted) is None else {"run": stop}
    )
    final, output, errors = await _run_output(store, req, live, final, errors)
    state = {"blocked": "running", "halted": "running", "refused": "paused"}.get(final, final)
    # An approved task a failure stopped before it started is as never started as a pending one.
    never_started = tuple(
        t for t, st in live.states.items() if st in _NOT_STARTED and final == "failed"
    )
    pid, trace = os.getpid(), req.trace_id
    await store.settle_run(SettleRun(req.run_id, state, output, now, pid, never_started, trace))
    return RunOutcome(req.run_id, req.trace_id, final, output, errors)


_NOT_STARTED = frozenset({"pending", "waiting_for_approval"})
_RAN_TO_ITS_END = frozenset({"succeeded", "failed", "skipped"})


async def _run_output(
    store: Store, req: DriveRequest, live: Live, final: str, errors: dict[str, str | None]
) -> tuple[str, JsonValue, dict[str, str | None]]:
    """The run's state, output and errors once its ``outputs`` are rendered (spec/dsl.md §2:
    at run end). A run that succeeded renders them, and fails if they cannot be; so does one
    that failed but ran to its end (``failure: continue``: every task succeeded, failed or was
    skipped) — its output is what can be rendered, else null, its failure unchanged."""
    ran_out = final == "failed" and all(st in _RAN_TO_ITS_END for st in live.states.values())
    if final != "succeeded" and not ran_out:
        return final, None, errors
    # Finished outputs live in the ledger; read back only those the run's output reads.
    outputs = await store.read_outputs(req.run_id, run_output_reads(req.plan))
    view = RuntimeView(live.inputs, live.memory, outputs, live.states, live.errors)
    try:
        return final, render_run_outputs(req.plan.run.outputs, req.plan.run.vars, view), errors
    except TaskFailure as exc:
        if req.check_mode:  # a preview cannot know what unexecuted work would return
            return final, {"unavailableInCheckMode": exc.message}, errors
        if final == "failed":
            return final, None, errors
        return "failed", None, {**live.errors, "outputs": exc.message}


def _stop(req: DriveRequest, live: Live, now: str, state: str, reason: str | None) -> CancelRun:
    """Stop in-flight work durably: started effects → uncertain (cancelled: those never
    sent), tasks → cancelled (none when a ``serve`` hands the run back: ``running``)."""
    unsent = tuple(UnsentEffect(effect_id, error) for effect_id, error in live.unsent.items())
    tasks = cancellable(live.states) if state != "running" else ()
    trace, pid = req.trace_id, os.getpid()
    return CancelRun(req.run_id, state, now, pid, tasks, reason, trace_id=trace, unsent=unsent)


# ------------------------------------------------------------------------- outcomes → errors

# Each suggested command in backticks: the CLI adds this invocation's --db to each.
_BLOCKED_HINT = (
    "`agentctl effects list {run}`, then `agentctl effects "
    "reconcile EFFECT --status applied|not-applied --reason …` (--approved where the "
    "policy asks approval for the effect), then `agentctl resume {run}`"
)
_UNRESOLVED_HINT = (
    "`agentctl effects reconcile EFFECT --status applied|not-applied "
    "--reason …` (append-only; --approved where the policy asks approval for the effect), "
    "then resume again"
)


_NAMED_FAILURES = 5  # a failed run's error names this many task errors, then counts the rest


def outcome_or_raise(outcome: RunOutcome, details: JsonObject | None = None) -> RunOutcome:
    """Paused/cancelled/succeeded outcomes are returned; failed, halted, refused and blocked
    ones raise (``details``: what the command adds to a failed run's error, e.g. a
    compensation's source run and the tasks it did compensate)."""
    if outcome.state == "failed":
        failed = [f"{t}: {e}" for t, e in outcome.errors.items() if e]
        if len(failed) > _NAMED_FAILURES:  # say the list is cut, or it reads as complete
            more = len(failed) - _NAMED_FAILURES
            failed = [*failed[:_NAMED_FAILURES], f"and {more} more: inspect the run"]
        raise RunFailedError(
            "run failed" + (": " + "; ".join(failed) if failed else ""),
            run_id=outcome.run_id,
            trace_id=outcome.trace_id,
            data=details,
        )
    if outcome.state == "halted":
        raise TaskDiskFullError(
            f"{outcome.errors.get('run')}; the run stopped and stays resumable",
            run_id=outcome.run_id,
            trace_id=outcome.trace_id,
            data={"hint": TASK_DISK_FULL_HINT.replace("RUN", outcome.run_id)},
        )
    if outcome.state == "refused":  # a resumed call's identity changed: the run left paused
        why = str(outcome.errors["run"])
        raise BlockedError(why, run_id=outcome.run_id, trace_id=outcome.trace_id)
    if outcome.state == "blocked":
        raise RunFailedError(
            "an effect's outcome is uncertain; the run stays resumable after reconciliation",
            run_id=outcome.run_id,
            trace_id=outcome.trace_id,
            data={"hint": _BLOCKED_HINT.format(run=outcome.run_id)},
        )
    return outcome


def check_resumable(ledger: RunLedger, run_id: str, clock: Clock, trace_id: str) -> RunHead:
    """Refuse terminal runs and unresolved effects; take the lease; returns the run record.
    What it writes is the resume's: audited with its ``trace_id``."""
    owner = owner_identity()
    reap_stale_workers(ledger.location)  # none may still run an effect the claim judges
    # Judged in the claim's transaction: a refused resume takes no lease and leaves the run
    # row (its updatedAt, its lease) as it was; only the crash's started effects are settled.
    claim = ledger.claim_for_resume(run_id, owner, clock.now(), trace_id=trace_id)
    run, unresolved = claim.run, claim.unresolved
    if unresolved:
        ids = ", ".join(f"{e.effect_id} (task {e.task_id}, {e.status})" for e in unresolved)
        raise BlockedError(
            f"run {run.run_id} has unresolved effects: {ids}",
            run_id=run.run_id,
            data={"hint": _UNRESOLVED_HINT},
        )
    if run.state == "paused":
        ledger.set_run_state(run.run_id, "running", clock.now(), trace_id=trace_id)
    return run

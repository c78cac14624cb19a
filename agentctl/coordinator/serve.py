"""``agentctl serve``: claim queued or orphaned runs and drive each to a stop, under a lease.

One trio process: a claim loop, a heartbeat and up to ``max_runs`` drives at once, all
sharing one worker pool. Each claimed run is driven through its own ledger connection opened
with the claim's fence (``ledger.queue.Fence``), so every write made for it checks the
fencing token first.

Invariants:
- a run is driven only between its claim and the end of its drive, and only while the
  heartbeat keeps finding its lease under our token; a lost lease (the heartbeat, or any
  fenced write, finds a higher token) stops that drive at once — it commits nothing more, and
  what it had in flight is left to the new owner's resume rules;
- the claim and heartbeat share one control connection, one call at a time (a limiter);
- SIGINT/SIGTERM: no more claims; every drive hands its run back (in-flight effects become
  uncertain, as on cancellation — those whose worker said their request never left end
  cancelled, their tasks ``retry_scheduled`` for a new attempt; the run stays ``running``
  with its lease released, so another ``serve`` continues it once they are reconciled); then
  the process exits; a signal sent again meanwhile is dropped, never cutting the hand-back;
- a paused run (approval) is released by its drive; it is claimed again once no approval of
  it is pending (``ledger.queue``), so an approval given on any host continues it;
- a takeover (the previous holder's lease expired or was released) removes the containers
  labelled with the run before the run is driven or reported (``orphans``), also when the
  claim handed it back blocked or cancelled it: their holder is gone, and a container it left
  would go on acting while an operator reconciles its effect, or for ever.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TypeVar

import trio

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, owner_identity
from agentctl.coordinator.launch import user_error
from agentctl.coordinator.orphans import remove_run_containers
from agentctl.coordinator.service import (
    DriveRequest,
    RunOutcome,
    drive_run,
    drop_worker_registry,
    worker_registry,
)
from agentctl.coordinator.workerpool import WorkerPool, open_worker_pool
from agentctl.core.dburl import is_postgres_url
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import compensates_automatically
from agentctl.errors import AgentctlError, LeaseLostError
from agentctl.ledger import open_ledger
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import Owner
from agentctl.ledger.queue import ClaimedRun, ClaimRequest, Fence, Heartbeat
from agentctl.ledger.runs import RunRecord

T = TypeVar("T")
# A drive reads its run's cancel flag this often: with many drives per process and many
# processes per database, `run`'s 0.1 s would make these reads most of the database's load.
SERVE_CANCEL_POLL_S = 0.5
# The runs this process drives: each one's claim and its drive's cancel scope.
Held = dict[str, tuple[Fence, trio.CancelScope]]


@dataclass(frozen=True)
class ServeOptions:
    """How ``serve`` claims and drives queued runs from one database."""

    db: str
    max_runs: int = 4
    lease_s: float = 30.0
    poll_s: float = 1.0
    once: bool = False  # claim once, drive what was claimed, exit
    exit_when_idle: bool = False  # exit when nothing is claimable nor held by any serve


@dataclass(frozen=True)
class Driven:
    """What became of one claimed run in this process."""

    run_id: str
    token: int
    takeover: bool
    state: str  # the drive's outcome, or "lost" (fenced out) or "error"
    error: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "token": self.token,
            "takeover": self.takeover,
            "state": self.state,
            "error": self.error,
        }


@dataclass
class _Serve:
    """The state one ``serve`` process shares between its claim loop, heartbeat and drives."""

    opts: ServeOptions
    control: RunLedger
    owner: Owner
    holder: str
    pool: WorkerPool
    clock: Clock = field(default_factory=Clock)
    limiter: trio.CapacityLimiter = field(default_factory=lambda: trio.CapacityLimiter(1))
    stop: trio.Event = field(default_factory=trio.Event)
    wake: trio.Event = field(default_factory=trio.Event)
    held: Held = field(default_factory=dict)
    driven: list[Driven] = field(default_factory=list)
    stopped_by: str = "idle"

    async def call(self, fn: Callable[[], T]) -> T:
        """One control-ledger call in a thread (not abandoned when the caller is cancelled)."""
        return await trio.to_thread.run_sync(fn, limiter=self.limiter)


@dataclass(frozen=True)
class ServeReport:
    """What one ``serve`` did: who held the leases, why it stopped, the runs it drove."""

    holder: str
    stopped_by: str
    driven: tuple[Driven, ...]

    def counts(self) -> dict[str, int]:
        """Driven runs per final state."""
        found: dict[str, int] = {}
        for d in self.driven:
            found[d.state] = found.get(d.state, 0) + 1
        return found

    def to_json(self) -> JsonObject:
        return {
            "holder": self.holder,
            "stoppedBy": self.stopped_by,
            "counts": dict[str, JsonValue](self.counts()),
            "runs": [d.to_json() for d in self.driven],
        }


@trio.lowlevel.enable_ki_protection
async def serve_queue(opts: ServeOptions) -> ServeReport:
    """Claim and drive runs until stopped (signal), idle (``exit_when_idle``) or ``once``.

    One signal receiver spans the whole serve, its worker pool's shutdown included: the first
    SIGINT or SIGTERM stops it, a later one is taken and dropped (as in ``run``'s drive).
    Outside a receiver trio would raise it as KeyboardInterrupt wherever the hand-back was —
    the process died with exit 130, the cut effect left ``started`` under a live lease."""
    owner = owner_identity()
    holder = f"{socket.gethostname()}:{owner.pid}"
    control = await trio.to_thread.run_sync(lambda: open_ledger(opts.db, verify=False))
    serve: _Serve | None = None
    registry = ""
    try:
        registry = worker_registry(control.location)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as guard:  # outlives the pool: its shutdown too
                async with open_worker_pool(opts.max_runs, registry_path=registry) as pool:
                    serve = _Serve(opts, control, owner, holder, pool)
                    guard.start_soon(_watch_signals, serve, signals)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_heartbeat, serve)
                        await _claim_loop(serve)
                        serve.stop.set()  # ended: a signal from now on changes nothing
                        nursery.cancel_scope.cancel()
                guard.cancel_scope.cancel()
        return ServeReport(holder, serve.stopped_by, tuple(serve.driven))
    finally:
        drop_worker_registry(registry)  # its workers are gone with the pool, as `run`'s
        last = control if serve is None else serve.control  # a reconnect replaces it
        with contextlib.suppress(AgentctlError):
            await trio.to_thread.run_sync(last.close)


async def _watch_signals(serve: _Serve, signals: AsyncIterator[int]) -> None:
    """The first signal stops the serve (unless it already ended by itself: ``once`` or
    idle, whose reason stands); every later one is dropped until the serve has ended."""
    async for signum in signals:
        if not serve.stop.is_set():
            serve.stopped_by = signal.Signals(signum).name
            serve.stop.set()
            serve.wake.set()


async def _claim_loop(serve: _Serve) -> None:
    """Claim while slots are free; return once stopped, idle or (``once``) claimed."""
    opts = serve.opts
    async with trio.open_nursery() as drives:
        while not serve.stop.is_set():
            claimed = await _claim(serve, opts.max_runs - len(serve.held))
            for run in claimed:
                if run.ended is not None:  # the claim itself ended or handed it back
                    drives.start_soon(_settle_ended, serve, run)
                    continue
                scope = trio.CancelScope()
                hold(serve.held, run, scope)
                drives.start_soon(_drive_one, serve, run, scope)
            if opts.once:
                serve.stopped_by = "once"
                return
            if opts.exit_when_idle and not claimed and await _idle(serve):
                return
            serve.wake = trio.Event()
            with trio.move_on_after(opts.poll_s):
                await serve.wake.wait()


_ENDED_BY_CLAIM = {
    "blocked": "an effect the previous holder started awaits reconciliation (effects reconcile)",
    "cancelled": "its cancellation was requested while no serve drove it",
}


async def _settle_ended(serve: _Serve, run: ClaimedRun) -> None:
    """Report a run the claim ended, once the containers its dead holder left are removed:
    nothing drives it now (``resume`` and ``cancel`` remove them alike). A removal that fails
    is reported with it; the run stays as the claim left it."""
    assert run.ended is not None
    why = _ENDED_BY_CLAIM[run.ended]
    try:
        found = await serve.call(lambda: serve.control.get_run(run.run_id))
        plan = await trio.to_thread.run_sync(lambda: load_plan(found))
        await remove_run_containers(plan, run.run_id)
    except Exception as exc:  # reported as a failed drive's is: the serve goes on
        _state, error = drive_failure(exc)
        why += f"; the containers its previous holder left were not removed: {error}"
    serve.driven.append(Driven(run.run_id, run.token, run.takeover, run.ended, why))


def hold(held: Held, run: ClaimedRun, scope: trio.CancelScope) -> None:
    """Record a claimed run's drive; a drive of an earlier claim of it stops.

    We claim a run we hold only when our own lease on it expired (the database was out of
    reach longer than the lease): the earlier drive is fenced out already.
    """
    earlier = held.get(run.run_id)
    if earlier is not None:
        earlier[1].cancel()
    held[run.run_id] = (Fence(run.run_id, run.token), scope)


def release(held: Held, run: ClaimedRun) -> None:
    """Forget a finished drive, unless a later claim of its run holds the entry now."""
    found = held.get(run.run_id)
    if found is not None and found[0].token == run.token:
        del held[run.run_id]


async def _claim(serve: _Serve, free: int) -> tuple[ClaimedRun, ...]:
    if free <= 0:
        return ()
    now = serve.clock.now()
    # Each drive's trace, minted before its claim: the claim's events are the drive's own.
    traces = tuple(serve.clock.new_id("trace") for _ in range(free))
    expires = serve.clock.later(serve.opts.lease_s)
    claim = ClaimRequest(serve.holder, serve.owner, free, expires, now, trace_ids=traces)
    try:
        return await serve.call(lambda: serve.control.claim_runs(claim))
    except AgentctlError:  # a busy or restarted database: the next round claims again
        await _reconnect(serve)
        return ()


async def _reconnect(serve: _Serve) -> None:
    """A fresh PostgreSQL control connection (the old one may have died with a restart).

    Never on SQLite: its connection does not die, and opening the file anew (then closing
    it) would drop every POSIX lock this process holds on it, the drives' connections' too.
    """
    if not is_postgres_url(serve.opts.db):
        return

    def swap() -> None:
        with contextlib.suppress(AgentctlError):
            serve.control.close()
        serve.control = open_ledger(serve.opts.db, verify=False)

    with contextlib.suppress(AgentctlError):  # still down: the next round tries again
        await serve.call(swap)


async def _idle(serve: _Serve) -> bool:
    """Nothing held here, and no submitted run claimable or leased by any serve."""
    if serve.held:
        return False
    now = serve.clock.now()
    try:
        return not await serve.call(lambda: serve.control.queue_busy(now))
    except AgentctlError:  # unknown: not idle (the claim round reconnects)
        return False


async def _heartbeat(serve: _Serve) -> None:
    """Push the held leases' expiry on; stop the drives whose lease was taken over."""
    while True:
        await trio.sleep(serve.opts.lease_s / 3)
        leases = tuple(fence for fence, _scope in serve.held.values())
        if not leases:
            continue
        beat = Heartbeat(leases, serve.clock.later(serve.opts.lease_s), serve.clock.now())
        try:
            lost = await serve.call(partial(serve.control.heartbeat, beat))
        except AgentctlError:  # a busy or restarted database: the fence guards every write
            await _reconnect(serve)
            continue
        for run_id in lost:
            if run_id in serve.held:
                serve.held[run_id][1].cancel()


async def _drive_one(serve: _Serve, run: ClaimedRun, scope: trio.CancelScope) -> None:
    outcome: RunOutcome | None = None
    error: str | None = None
    state = "lost"
    with scope:
        try:
            outcome = await _drive_claimed(serve, run)
        except BaseException as exc:  # a group: the drive's tasks' errors (and Cancelled)
            state, error = drive_failure(exc)
    release(serve.held, run)
    if outcome is not None:
        state = outcome.state
    serve.driven.append(Driven(run.run_id, run.token, run.takeover, state, error))
    serve.wake.set()


def drive_failure(exc: BaseException) -> tuple[str, str]:
    """How a drive that raised ``exc`` is reported (``lost`` or ``error``, and why).

    Only this drive stops: an unexpected error (a bug) is reported like any other, so the
    serve's other drives go on. Cancellation and interrupts (no ``Exception``) propagate.
    """
    found = user_error(exc)
    if found is not None:
        return ("lost" if isinstance(found, LeaseLostError) else "error"), found.message
    if not isinstance(exc, Exception):
        raise exc
    leaf: BaseException = exc
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return "error", f"internal error: {type(leaf).__name__}: {leaf}"


async def _drive_claimed(serve: _Serve, run: ClaimedRun) -> RunOutcome:
    fence = Fence(run.run_id, run.token)
    ledger = await serve.call(lambda: serve.control.open_fenced(fence))
    try:
        found = await trio.to_thread.run_sync(lambda: ledger.get_run(run.run_id))
        plan = await trio.to_thread.run_sync(lambda: load_plan(found))
        if run.takeover:  # its previous holder is gone: so must be what it left running
            await remove_run_containers(plan, run.run_id)
        base = found.base_path or os.getcwd()
        trace_id = run.trace_id or serve.clock.new_id("trace")
        req = DriveRequest(ledger, run.run_id, trace_id, plan, base, clock=serve.clock)
        req = _for_serve(req, serve, check_mode=found.mode == "check")
        if found.mode == "compensation":
            links = await trio.to_thread.run_sync(lambda: _compensation_links(ledger, found))
            req = replace(req, compensates=links)
        outcome = await drive_run(req)
        if compensates_automatically(plan, outcome.state, found.mode):
            with trio.CancelScope(shield=True):  # the run is over: its compensation is due
                await trio.to_thread.run_sync(lambda: _queue_compensation(ledger, run.run_id))
        return outcome
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(ledger.close)


def _for_serve(req: DriveRequest, serve: _Serve, *, check_mode: bool) -> DriveRequest:
    poll = SERVE_CANCEL_POLL_S
    return replace(req, check_mode=check_mode, pool=serve.pool, stop=serve.stop, cancel_poll_s=poll)


def _compensation_links(ledger: RunLedger, run: RunRecord) -> dict[str, tuple[str, ...]]:
    """What a compensation run's inverses compensate, so that each one confirmed records
    ``compensated`` on its source effects (as ``compensate`` and ``resume`` do)."""
    # Imported here: compensation is not on a serve's ordinary drive path.
    from agentctl.coordinator.remedy import compensation_links

    return compensation_links(ledger, run)


def _queue_compensation(ledger: RunLedger, run_id: str) -> None:
    """``compensation.onFailure: automatic`` after a drive that failed, as ``run`` does: the
    compensation run is queued through this drive's fenced ledger, once the run's own ledger
    work is done; a ``serve`` (this one or any other) claims and drives it."""
    from agentctl.coordinator.remedy import queue_compensation

    queue_compensation(ledger, run_id)

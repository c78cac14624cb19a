"""What every CLI operation that drives a run shares: refusing what cannot run and running
trio with the user-facing error unwrapped.

Invariant: every check here runs before any state is created (a refused workflow writes
nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar, TypeVarTuple

import trio

from agentctl.coordinator.credentials import preflight_credentials
from agentctl.coordinator.egress_preflight import preflight_egress
from agentctl.core import registry
from agentctl.core.compiler.diagnostics import Locator
from agentctl.core.egress_reach import provider_endpoint_diagnostics
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.policy import policy_workspace
from agentctl.errors import (
    AgentctlError,
    CancelledRunError,
    Diagnostic,
    NotFoundError,
    ValidationError,
    was_interrupted,
)
from agentctl.ledger.interface import RunLedger
from agentctl.sandbox.paths import absolute_roots
from agentctl.sigint import note_received, trio_handles_interrupts

T = TypeVar("T")
Args = TypeVarTuple("Args")


def run_trio(fn: Callable[[*Args], Awaitable[T]], *args: *Args) -> T:
    """``trio.run``, with a nursery's exception group unwrapped to the error a user should see.

    An interrupt that arrives once ``fn`` has returned does not take its result away: trio
    raises an interrupt still pending when its main task finishes in place of that task's
    result, so a run that had ended ``succeeded`` — durably — was reported interrupted (exit
    130). Its outcome was decided; an interrupt from then on changes nothing (cli_main). Only
    the few statements after ``fn`` are protected; ``fn`` itself is interrupted as before."""
    finished: list[T] = []

    @trio.lowlevel.enable_ki_protection
    async def main() -> T:
        finished.append(await _unprotected(fn, *args))
        return finished[0]

    try:
        with trio_handles_interrupts():
            return trio.run(main)
    except KeyboardInterrupt:
        if finished:
            note_received()  # the outcome stands; nothing new starts after it
            return finished[0]
        raise
    except BaseExceptionGroup as group:
        raise _first_leaf(group) from group


@trio.lowlevel.disable_ki_protection
async def _unprotected(fn: Callable[[*Args], Awaitable[T]], *args: *Args) -> T:
    return await fn(*args)


def user_error(exc: BaseException) -> AgentctlError | None:
    """The error a user should see in ``exc`` (itself, or the first in its group), if any."""
    found = _first_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
    return found if isinstance(found, AgentctlError) else None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if isinstance(leaf, AgentctlError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, KeyboardInterrupt):
            return leaf
    for leaf in leaves:  # an interrupt Python wrapped (``raise … from group`` would hide it)
        if was_interrupted(leaf):
            return KeyboardInterrupt()
    return leaves[0] if leaves else group


@contextlib.contextmanager
def naming_run(run_id: str, trace_id: str | None = None) -> Iterator[None]:
    """Errors escaping a drive carry the run's id (a full disk: the run to resume later) and,
    when given, the trace id this invocation minted."""
    try:
        yield
    except AgentctlError as exc:
        if exc.run_id is None:
            exc.run_id = run_id
        if exc.trace_id is None:
            exc.trace_id = trace_id
        raise


def run_exists(ledger: RunLedger, run_id: str) -> Callable[[], bool]:
    """Whether the run ``run_id`` is in ``ledger`` (``driving_run``'s ``exists``), asked
    after an interrupt: a creating write it cut short was rolled back, so a read is safe."""

    def found() -> bool:
        try:
            ledger.get_run(run_id)
        except NotFoundError:
            return False
        except AgentctlError:  # cannot tell: name it, as if the write had committed
            return True
        return True

    return found


@contextlib.contextmanager
def driving_run(
    run_id: str, trace_id: str | None = None, *, exists: Callable[[], bool] | None = None
) -> Iterator[None]:
    """Around a run's drive, from its creation (or, for ``resume``, from before its claim):
    an interrupt that lands before the drive takes the signals (``on_created``, ``trio.run``
    starting) or once the drive has handed them back leaves the run as it is — ``running``,
    with nothing driving it, when its drive never began — so the exit-130 error names the
    run and what to do about it (``naming_run`` names it in every other error).

    Entered before the creating write (the ids minted first), with ``exists`` saying whether
    that write committed: an interrupt landing in it, or just after its commit, names the run
    only if it exists; before the commit nothing was created and the plain interrupt stands."""
    try:
        yield
    except KeyboardInterrupt:
        if exists is not None and not exists():
            raise
        hint = (
            f"`agentctl inspect {run_id}` shows the state it was left in; left running (its "
            f"drive never began), it is ended at once by `agentctl cancel {run_id}` or "
            f"continued by `agentctl resume {run_id}`"
        )
        raise CancelledRunError(
            f"interrupted (SIGINT or SIGTERM) before the command finished, outside the drive "
            f"of run {run_id}",
            run_id=run_id,
            trace_id=trace_id,
            data={"hint": hint},
        ) from None


def check_executable(plan: Plan, *, file: str | None = None, locate: Locator | None = None) -> None:
    """Refuse, before any state exists, a workflow using what this version cannot execute:
    an operation that does not run yet, or a provider endpoint its adapter cannot call (every
    call to it would fail, after the run had been created and its budget charged). ``check``
    refuses the endpoint too; ``plan``, ``doctor`` and ``auth check`` take both, so they still
    report on such a workflow."""
    later = "`agentctl check` and `plan` accept it; run does not"
    gaps = [
        (f"this version of agentctl cannot run {what} yet", path, later)
        for what, path in filter(None, map(_capability_gap, plan.tasks))
    ]
    found: list[Diagnostic] = []
    for message, path, help_text in gaps:
        line, column = (locate(path) if locate else None) or (None, None)
        found.append(
            Diagnostic(
                "unsupported_capability",
                message,
                file=file,
                line=line,
                column=column,
                path=path,
                help=help_text,
            )
        )
    found += provider_endpoint_diagnostics(plan, file=file, locate=locate)
    if found:
        # One refusal is said as itself; its diagnostic gives the place and the help.
        message = (
            found[0].message
            if len(found) == 1
            else "the workflow uses features this version cannot run"
        )
        raise ValidationError(message, diagnostics=found)


def _capability_gap(task: PlannedTask) -> tuple[str, str] | None:
    """(what, dotted path) of a registry operation this task uses that does not run yet."""
    entry = task.entry
    if task.kind == "agent" and task.agent_config is not None:
        if entry is None or not entry.runnable:
            name, kind = task.agent_config.provider_name, task.agent_config.provider_kind
            runnable = [op.name for op in registry.entries("model") if op.runnable]
            only = ", ".join(runnable)
            what = f"{kind} providers (task {task.id}); only {only} runs"
            return what, f"spec.providers.{name}.kind"
    elif task.kind == "action" and (entry is None or not entry.runnable):
        return f"action kind {task.operation} (task {task.id})", f"spec.actions.{task.action}.kind"
    return None


def container_images(plan: Plan) -> set[tuple[str, str]]:
    """(engine preference, image) of every container action of ``plan``."""
    wanted = set()
    for task in plan.tasks:
        action = task.action_config if task.kind == "action" else None
        box = action.get("container") if action and action.get("isolation") == "container" else None
        if isinstance(box, dict):
            wanted.add((str(box.get("runtime") or "auto"), str(box["image"])))
    return wanted


def preflight_containers(plan: Plan) -> None:
    """Fail closed before any state exists: every container action's engine and image."""
    wanted = container_images(plan)
    if not wanted:
        return  # the engine module is not even imported by a run without containers
    from agentctl.sandbox.container import preflight

    async def check_all() -> None:
        for runtime, image in sorted(wanted):
            await preflight(runtime, image)

    run_trio(check_all)


def refuse_before_state(
    plan: Plan,
    workspace: str,
    *,
    preview: bool,
    file: str | None = None,
    locate: Locator | None = None,
) -> None:
    """Every refusal ``run`` (and ``fork``) makes before it creates anything: capabilities,
    container engines and images, provider credentials (a preview needs none), then egress (a
    preview resolves no name). Credentials come first, as in the original: a missing key is
    exit 6 even when the endpoint it is for would also be refused by the network policy."""
    require_workspace(workspace, plan.run.policy)
    check_executable(plan, file=file, locate=locate)
    preflight_containers(plan)
    preflight_credentials(plan, workspace, preview=preview)
    preflight_egress(plan, resolve=not preview)


def require_workspace(workspace: str, policy: Mapping[str, JsonValue] | None = None) -> None:
    """Refuse a workspace that is not a directory before any state changes. ``--workspace`` is
    checked as it is parsed; this catches the one a run stored (``resume``, ``fork``,
    ``compensate`` reuse it) once its checkout was moved or deleted: driven there, every task
    that touches a file would fail for good, when ``--workspace`` can name where it went.
    With ``policy``, its ``workspaceRoot`` (the directory paths are confined to) as well, and
    each absolute ``writableRoots`` entry (a mount: writes never create it)."""
    if not Path(workspace).is_dir():
        raise ValidationError(
            f"workspace {workspace} does not exist or is not a directory (moved or deleted?); "
            "pass --workspace DIR to use the directory it is in now"
        )
    rooted = policy_workspace(workspace, policy) if policy is not None else workspace
    if rooted != workspace and not Path(rooted).is_dir():
        raise ValidationError(
            f"policy.workspaceRoot names {rooted}, which does not exist or is not a "
            "directory; create it, or pass another --workspace"
        )
    if policy is not None:
        _require_absolute_roots(policy)


def _require_absolute_roots(policy: Mapping[str, JsonValue]) -> None:
    """An absolute writable root is used as it is, symlinks resolved (``sandbox.paths``): one
    that is not an existing directory would deny every write into it, so the run is refused
    before it starts rather than failing at its first write there."""
    given = policy.get("writableRoots")
    entries = [str(e) for e in given] if isinstance(given, list) else []
    for entry, canonical in absolute_roots(entries).items():
        if not Path(canonical).is_dir():
            raise ValidationError(
                f"policy.writableRoots entry {entry} does not exist or is not a directory; "
                "an absolute writable root is used as it is (a mount), never created: "
                "create or mount it"
            )

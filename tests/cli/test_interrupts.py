"""SIGINT (or SIGTERM) at any moment of a command (issue 18): exit 130 with an error envelope in
JSON mode (or the command's own outcome if it finished first) — never a traceback, never
silence.

The signal is sent at several delays after agentctl's entry point is loaded: the child is
``python -c`` importing ``agentctl.entry`` (stdlib only), writing one byte to a pipe, then
calling ``entry.main()`` exactly as ``python -m agentctl`` does. Before that byte, only the
interpreter's own start-up runs, where no program's code can react yet. The early delays land
in the start-up imports (typer, pydantic, the compiler, the ledger).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: slowish }
spec:
  policy: { approval: never, processAllowlist: [sleep] }
  actions:
    put: { kind: builtin.assign }
    nap: { kind: builtin.shell.exec, command: /bin/sleep, args: ["0.3"], timeoutSeconds: 10 }
  tasks:
    - { id: a, uses: action:put, with: { x: 1 } }
    - { id: b, uses: action:nap, needs: [a] }
"""
DELAYS_S = [0.0, 0.02, 0.05, 0.1, 0.2]
COMMANDS = {
    "check": ["check", "wf.yaml"],
    "run": ["run", "wf.yaml", "--db", "s/r.db"],
    "inspect": ["inspect", "run-none", "--db", "s/r.db"],
}
# What each command exits with when it finishes before the signal lands.
FINISHED = {"check": 0, "run": 0, "inspect": 5}


# The byte is written once SIGINT is deferred and SIGTERM forwarded the way ``entry.main`` sets
# them first thing: a signal between the write and ``main``'s first line would otherwise land
# in this harness line (a KeyboardInterrupt in ``<string>``, or a SIGTERM's default kill when
# a loaded machine holds the child there past the delay), which is not agentctl's code.
BOOT = (
    "import os, sys, signal; import agentctl.entry as e, agentctl.sigint as s; "
    "signal.signal(signal.SIGINT, s.defer); signal.signal(signal.SIGTERM, s.forward_term); "
    "fd = int(sys.argv.pop(1)); os.write(fd, b'!'); os.close(fd); e.main()"
)


def _popen(
    args: list[str], cwd: Path, env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[str]:
    """``python ARGS`` with its output captured as text and no standard input."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,
    )


def _interrupt(
    target: LedgerTarget, root: Path, args: list[str], delay: float, sig: int = signal.SIGINT
) -> tuple[int, str, str]:
    ready, ready_w = os.pipe()
    how = target.invocation(["--output", "json", *args], root)
    proc = _popen(["-c", BOOT, str(ready_w), *how.args], root, how.env, pass_fds=(ready_w,))
    os.close(ready_w)
    assert os.read(ready, 1) == b"!"
    os.close(ready)
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


# SIGTERM (what `kill`, systemd and container engines send) is handled as SIGINT is, from the
# moment ``entry.main`` runs (and from the harness's byte on, BOOT setting the same handler).
SIGNALS = [(sig, delay) for sig in (signal.SIGINT, signal.SIGTERM) for delay in DELAYS_S]


@pytest.mark.parametrize(("sig", "delay"), SIGNALS, ids=lambda v: getattr(v, "name", v))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigint_is_exit_130_with_an_envelope(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, command: str, sig: int, delay: float
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    if command == "inspect":
        assert cli("db", "migrate", "--db", "s/r.db").rc == 0
    rc, out, err = _interrupt(ledger_target, tmp_path, COMMANDS[command], delay, sig)
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == FINISHED[command] and rc != 130:  # it completed before the signal arrived
        assert (out or err).strip(), "silent"
        return
    assert rc == 130, (rc, out, err)
    if out.strip():  # a run that was being driven reports its cancelled RunOutcome
        assert json.loads(out)["data"]["state"] == "cancelled"
    else:
        error = json.loads(err.strip().splitlines()[-1])["error"]
        assert error["exitCode"] == 130 and "interrupt" in error["message"]


# A library that catches the KeyboardInterrupt inside its own code and raises an error of its
# own instead: pydantic-core building a serializer when SIGINT lands gives a SchemaError naming
# KeyboardInterrupt in its text, no cause attached; a Rust panic surfaces as pyo3's
# PanicException, a BaseException. The stand-in command does that, or raises without a SIGINT.
STAND_IN = (
    "import os, signal, sys, agentctl.cli_main as m\n"
    "class PanicException(BaseException): pass\n"
    "ERROR = {'schema': ValueError, 'panic': PanicException}[sys.argv.pop(1)]\n"
    "SIGNAL = sys.argv.pop(1) == 'sigint'\n"
    "def stand_in(argv, settings):\n"
    "    try:\n"
    "        if SIGNAL: os.kill(os.getpid(), signal.SIGINT)\n"
    "    except KeyboardInterrupt:\n"
    "        pass\n"
    "    raise ERROR('Error building serializer: KeyboardInterrupt')\n"
    "m._dispatch = stand_in\n"
    "import agentctl.entry as e; e.main()"
)


def _stand_in(tmp_path: Path, error: str, signalled: str) -> tuple[int, str, str]:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["-c", STAND_IN, error, signalled, "--output", "json", "check", "wf.yaml"]
    proc = _popen(args, tmp_path, env)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.parametrize("error", ["schema", "panic"])
def test_an_interrupt_a_library_reports_as_its_own_error_is_still_exit_130(
    tmp_path: Path, error: str
) -> None:
    rc, out, err = _stand_in(tmp_path, error, "sigint")
    assert rc == 130, (out, err)
    reported = json.loads(err.strip().splitlines()[-1])["error"]
    assert reported["exitCode"] == 130 and "interrupt" in reported["message"]
    assert "internal error" not in err and "Traceback" not in err


def test_a_native_panic_without_an_interrupt_is_an_internal_error_not_a_traceback(
    tmp_path: Path,
) -> None:
    rc, out, err = _stand_in(tmp_path, "panic", "none")
    assert rc == 4, (out, err)
    reported = json.loads(err.strip().splitlines()[-1])["error"]
    assert reported["message"].startswith("internal error: PanicException")
    assert "Traceback" not in err


# SIGINT landing in a weakref callback (the import system's module locks use them): Python
# cannot raise there and hands the KeyboardInterrupt to ``sys.unraisablehook``. The stand-in
# command then goes on as a command that finishes would: exit 0 unless the interrupt comes back.
IN_CALLBACK = (
    "import os, signal, time, weakref, agentctl.cli_main as m\n"
    "class Held: pass\n"
    "def stand_in(argv, settings):\n"
    "    held = Held()\n"
    "    ref = weakref.ref(held, lambda _: os.kill(os.getpid(), signal.SIGINT))\n"
    "    del held\n"
    "    began = time.monotonic()\n"
    "    try:\n"
    "        time.sleep(5)  # one blocking call: only a signal sent again ends it early\n"
    "    except KeyboardInterrupt:\n"
    "        if time.monotonic() - began < 4: raise\n"
    "    return 0  # the interrupt came back only once the call was over: as good as lost\n"
    "m._dispatch = stand_in\n"
    "import agentctl.entry as e; e.main()"
)


def test_an_interrupt_raised_inside_a_weakref_callback_still_ends_the_command(
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["-c", IN_CALLBACK, "--output", "json", "check", "wf.yaml"]
    _out, err = _popen(args, tmp_path, env).communicate(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    reported = json.loads(err.strip().splitlines()[-1])["error"]
    assert reported["exitCode"] == 130 and "interrupt" in reported["message"]


# A second SIGINT that lands while the unraisable hook itself runs (its handler would raise in
# the hook, where the interrupt is swallowed once more). The one point inside the hook a test
# can reach is the start of its sending thread: the stand-in sends the signal right there.
IN_HOOK = IN_CALLBACK.replace(
    "    del held\n",
    "    import _thread\n"
    "    start = _thread.start_new_thread\n"
    "    def start_then_signal(*args):\n"
    "        ident = start(*args)\n"
    "        os.kill(os.getpid(), signal.SIGINT)\n"
    "        return ident\n"
    "    _thread.start_new_thread = start_then_signal\n"
    "    del held\n"
    "    _thread.start_new_thread = start\n",
)


def test_an_interrupt_landing_inside_the_unraisable_hook_still_ends_the_command(
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["-c", IN_HOOK, "--output", "json", "check", "wf.yaml"]
    proc = _popen(args, tmp_path, env)
    _out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert proc.returncode == 130, err
    reported = json.loads(err.strip().splitlines()[-1])["error"]
    assert reported["exitCode"] == 130 and "interrupt" in reported["message"]


CHAIN_STEPS = 3000


def _memory_chain(n: int) -> str:
    """``n`` recorded ``builtin.memory.write`` effects in a chain: run in the coordinator, so
    the drive's only scheduling points are its ledger calls (no worker hop)."""
    tasks = ["    - { id: m0, uses: action:put, with: { key: k, value: 0 } }"]
    tasks += [
        f"    - {{ id: m{i}, uses: action:put, needs: [m{i - 1}], with: {{ key: k, value: {i} }} }}"
        for i in range(1, n)
    ]
    head = (
        "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: long-chain }\n"
        "spec:\n  policy: { approval: never }\n"
        "  actions:\n    put: { kind: builtin.memory.write }\n  tasks:\n"
    )
    return head + "\n".join(tasks) + "\n"


def _count(target: LedgerTarget, db: Path, where: str) -> int:
    """``SELECT COUNT(*) FROM <where>``; 0 while the ledger (or its schema) is not there yet."""
    try:
        rows = target.sql(db, f"SELECT COUNT(*) FROM {where}")
    except Exception:  # not created yet: nothing to count
        return 0
    return int(rows[0][0])


def _succeeded(target: LedgerTarget, db: Path) -> int:
    return _count(target, db, "task_states WHERE state = 'succeeded'")


def _start_chain(target: LedgerTarget, root: Path) -> tuple[subprocess.Popen[str], Path]:
    """`agentctl run` of a long memory.write chain, returned once 20 steps succeeded."""
    (root / "wf.yaml").write_text(_memory_chain(CHAIN_STEPS), encoding="utf-8")
    db = root / "s" / "r.db"
    how = target.invocation(["--output", "json", "run", "wf.yaml", "--db", "s/r.db"], root)
    proc = _popen(["-m", "agentctl", *how.args], root, how.env)
    deadline = time.monotonic() + 60
    while _succeeded(target, db) < 20 and proc.poll() is None:
        assert time.monotonic() < deadline, "the chain never started"
        time.sleep(0.01)
    assert proc.poll() is None, "the chain finished before it could be stopped"
    return proc, db


def _assert_stopped_midway(target: LedgerTarget, proc: subprocess.Popen[str], db: Path) -> None:
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert json.loads(out)["data"]["state"] == "cancelled"
    assert _succeeded(target, db) < CHAIN_STEPS


def test_sigint_lands_in_the_middle_of_an_in_process_effect_chain(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """The signal handler runs while a chain of coordinator-side effects is being driven:
    the inline ledger calls still yield to the scheduler (at most every few ms, not after
    each step), so the run stops as cancelled long before its last step."""
    proc, db = _start_chain(ledger_target, tmp_path)
    os.kill(proc.pid, signal.SIGINT)
    _assert_stopped_midway(ledger_target, proc, db)


def test_cancel_from_another_shell_lands_in_the_middle_of_an_in_process_effect_chain(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """`agentctl cancel` while a chain of coordinator-side effects is driven: the cancel
    watcher (a ledger read in its thread) gets its turn although the drive's ledger calls run
    inline — they yield to the scheduler every few ms — so the run stops as cancelled."""
    proc, db = _start_chain(ledger_target, tmp_path)
    run_id = str(ledger_target.sql(db, "SELECT run_id FROM runs")[0][0])
    asked = ledger_target.invocation(["cancel", run_id, "--db", "s/r.db"], tmp_path)
    cancel = _popen(["-m", "agentctl", *asked.args], tmp_path, asked.env)
    assert cancel.wait(timeout=60) == 0, cancel.communicate()
    _assert_stopped_midway(ledger_target, proc, db)


NAPPING = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: napping }
spec:
  policy: { approval: never, processAllowlist: [sleep] }
  actions:
    nap: { kind: builtin.shell.exec, command: /bin/sleep, args: ["5"], timeoutSeconds: 30 }
  tasks:
    - { id: a, uses: action:nap }
"""


def _start_napping(
    target: LedgerTarget, root: Path, text: str = NAPPING
) -> tuple[subprocess.Popen[str], Path, float]:
    """`agentctl run` of NAPPING (or ``text``), returned once its effect is started (with its
    database and the deadline of the waits that follow)."""
    (root / "wf.yaml").write_text(text, encoding="utf-8")
    db = root / "s" / "r.db"
    how = target.invocation(["--output", "json", "run", "wf.yaml", "--db", "s/r.db"], root)
    proc = _popen(["-m", "agentctl", *how.args], root, how.env)
    deadline = time.monotonic() + 60
    while _count(target, db, "effects WHERE status = 'started'") < 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    return proc, db, deadline


def test_a_second_sigint_while_the_run_stops_leaves_no_half_torn_down_trio_run(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """Ctrl-C twice: the first stops the run, the second lands while it is stopping (the
    worker pool's shutdown). Inside ``trio.run`` trio must own SIGINT — a KeyboardInterrupt
    raised in its scheduler abandons the run with its cleanup unrun and a warning on stderr."""
    proc, _db, _deadline = _start_napping(ledger_target, tmp_path)
    time.sleep(0.5)  # the drive parked on the worker's reply, its signal receiver open
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(0.005)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, out, err)
    for sign in ("Traceback", "Exception ignored", "abandoned", "internal error"):
        assert sign not in err, err


def test_a_second_sigint_while_the_pool_waits_out_its_grace_changes_nothing(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """The second Ctrl-C made certain to land in the teardown: the worker is stopped, so the
    pool waits out its graces (seconds) before killing it. The run is still recorded
    cancelled and reported so (130); nothing is raised in the middle of the teardown."""
    proc, db, deadline = _start_napping(ledger_target, tmp_path)
    workers = [p for p in psutil.Process(proc.pid).children() if "agentctl.workers" in p.cmdline()]
    assert workers
    while not any(w.children() for w in workers):  # the effect's `sleep` runs: no reply due
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    try:
        for worker in workers:
            worker.send_signal(signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None  # held by the stopped worker's graces
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        for worker in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert json.loads(out)["data"]["state"] == "cancelled", (out, err)
    for sign in ("Traceback", "Exception ignored", "abandoned", "internal error"):
        assert sign not in err, err
    [state] = ledger_target.sql(db, "SELECT state FROM runs")
    assert state[0] == "cancelled"


@pytest.mark.parametrize("worker_fate", ["stopped", "killed"])
@pytest.mark.parametrize("verdict", ["resume", "reconcile"])
def test_a_worker_its_dead_coordinator_left_is_killed_before_any_verdict(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, verdict: str, worker_fate: str
) -> None:
    """The coordinator is killed while its worker is stopped (it cannot see its socket
    close), or both are killed at once (an OOM or cgroup kill): the worker or at least the
    effect's process would live on and finish the effect after an operator judged it. The
    next `resume` (which stops at the unresolved effect) or `effects reconcile` kills them
    first, so no verdict is overtaken by the process judged."""
    # A nap far longer than the waits below: only a kill ends it before they do.
    long_nap = NAPPING.replace('args: ["5"]', 'args: ["300"]').replace("30 }", "600 }")
    proc, _db, deadline = _start_napping(ledger_target, tmp_path, long_nap)
    [worker] = [p for p in psutil.Process(proc.pid).children() if "agentctl.workers" in p.cmdline()]
    while not worker.children(recursive=True):  # the effect's `sleep` runs
        assert time.monotonic() < deadline
        time.sleep(0.01)
    left = [worker, *worker.children(recursive=True)]
    if worker_fate == "stopped":
        worker.send_signal(signal.SIGSTOP)
    else:  # the coordinator held still, so that it cannot clean up after its worker
        os.kill(proc.pid, signal.SIGSTOP)
        worker.kill()
        left.remove(worker)  # its effect's processes stay, orphaned in its session
    proc.kill()
    proc.wait(timeout=60)  # (not its pipes: the stopped worker holds them open)
    psutil.wait_procs([worker] if worker_fate == "killed" else [], timeout=10)  # init reaps it
    try:
        assert all(p.is_running() for p in left)
        run_id = cli("--output", "json", "runs", "list", "--db", "s/r.db").data["runs"][0]["runId"]
        if verdict == "resume":
            assert cli("--output", "json", "resume", run_id, "--db", "s/r.db").rc == 3
        else:
            [effect] = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db").data[
                "effects"
            ]
            why = ("--status", "not-applied", "--reason", "it never ran")
            done = cli("effects", "reconcile", effect["effectId"], *why, "--db", "s/r.db")
            assert done.rc == 0, done.stderr
        gone = psutil.wait_procs(left, timeout=10)[0]
        assert sorted(p.pid for p in gone) == sorted(p.pid for p in left)
    finally:
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_a_refused_resume_shows_on_the_event_stream_what_it_committed(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """The resume after a kill -9 settles the crash (the started effect is uncertain, its
    task waits) and refuses, exit 3; under `--output jsonl` those events are lines, as a
    drive's are, before the error on stderr."""
    proc, _db, _deadline = _start_napping(ledger_target, tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    run_id = cli("--output", "json", "runs", "list", "--db", "s/r.db").data["runs"][0]["runId"]
    refused = cli("--output", "jsonl", "resume", run_id, "--db", "s/r.db")
    assert refused.rc == 3, refused.stderr
    lines = [json.loads(line) for line in refused.stdout.splitlines()]
    shown = [(e["data"]["type"], e["data"]["taskId"]) for e in lines if e["kind"] == "RunEvent"]
    assert ("effect.uncertain", "a") in shown and ("task.waiting_for_effect", "a") in shown
    trace = refused.error["error"]["traceId"]
    assert {e["data"]["traceId"] for e in lines} == {trace}

"""Benchmark: crash recovery — SIGKILL a run after 10,000 completed tasks, then resume it.

Each round: a pure chain of ``total`` tasks (default 11,000) is started with
``agentctl --output json run`` as a subprocess; the benchmark polls the database file through
a read-only connection and SIGKILLs the coordinator as soon as ``kill_at`` (default 10,000)
tasks have succeeded — a real crash, with whatever the WAL holds at that instant. Then the
run is resumed in-process (``api.resume``), timed to completion, with:
- ``resume_to_completion``: open the ledger (WAL recovery), take the lease, recompile the
  stored workflow, rebuild the run's live state, run the remaining tasks;
- ``resume_to_first_task``: the same up to the first task the resumed run completes — the
  recovery overhead itself, independent of how much work was left.
The 11,000-task chain (rather than 20,000) keeps the work left after the kill small, so the
figure is dominated by recovering a 10,000-task history. The CLI ``agentctl resume`` adds the
cold start measured by ``bench_check_startup``. Target (never asserted): ≤ 2 s.

Run: ``python benchmarks/bench_recovery.py [--total 11000] [--kill-at 10000] [--runs 5]``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

POLL_S = 0.02


def crash_at(yaml_path: Path, db: Path, kill_at: int, cap_s: float) -> dict[str, Any]:
    """Run the chain in a subprocess and SIGKILL it once ``kill_at`` tasks succeeded."""
    argv = benchkit.agentctl_argv("--output", "json", "run", str(yaml_path), "--db", str(db))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=yaml_path.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    done = 0
    while proc.poll() is None and time.perf_counter() - t0 < cap_s:
        done = benchkit.count_succeeded(db)
        if done >= kill_at:
            break
        time.sleep(POLL_S)
    if proc.poll() is not None:
        raise RuntimeError(f"the run exited ({proc.returncode}) before it could be killed")
    os.kill(proc.pid, signal.SIGKILL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = -9
    return {
        "secondsToKill": time.perf_counter() - t0,
        "doneAtKill": benchkit.count_succeeded(db),
        "reached": done >= kill_at,
        "killedRssMb": usage.ru_maxrss / 1024,
    }


def resume_timed(db: Path, workdir: Path) -> dict[str, float]:
    from agentctl.coordinator import api

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    conn.close()
    first: list[float] = []

    def progress(_task: str, state: str) -> None:
        if state == "succeeded" and not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    out = api.resume(run_id, db=str(db), workspace=str(workdir), timeout_s=None, progress=progress)
    elapsed = time.perf_counter() - t0
    if out.state != "succeeded":
        raise RuntimeError(f"the resumed run ended {out.state}")
    return {"toCompletion": elapsed, "toFirstTask": (first[0] - t0) if first else elapsed}


def _rounds(
    total: int, kill_at: int, runs: int, cap_s: float, budget_s: float, workdir: Path | None
) -> list[dict[str, Any]]:
    """Crash-then-resume rounds, each on a fresh database, until ``runs`` or the budget."""
    rounds: list[dict[str, Any]] = []
    spent = 0.0
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        yaml_path = benchkit.write_yaml(benchkit.pure_chain(total), Path(tmp) / "chain.yaml")
        for k in range(runs):
            if k and spent > budget_s:
                break
            d = Path(tmp) / f"round-{k}"
            d.mkdir()
            t0 = time.perf_counter()
            crash = crash_at(yaml_path, d / "runtime.db", kill_at, cap_s)
            resumed = resume_timed(d / "runtime.db", d)
            if benchkit.count_succeeded(d / "runtime.db") != total:
                raise RuntimeError("the resumed run did not complete every task")
            rounds.append({**crash, **resumed})
            spent += time.perf_counter() - t0
    return rounds


def _figures(
    rounds: list[dict[str, Any]], total: int, kill_at: int, runs: int
) -> list[benchkit.Figure]:
    note = _note(rounds, runs, kill_at)
    left = [total - r["doneAtKill"] for r in rounds]
    extra = {"total": total, "killAt": kill_at, "rounds": rounds, "tasksLeftAtKill": left}
    # Per task after the first: only rounds the kill left two tasks or more (a kill that lands
    # after the chain's last task leaves none, and the resume settles the run alone).
    per_task = [
        (r["toCompletion"] - r["toFirstTask"]) * 1000 / (n - 1)
        for r, n in zip(rounds, left, strict=True)
        if n >= 2
    ]
    figures = [
        benchkit.figure(
            f"resume_{kill_at}_to_completion",
            "s",
            [r["toCompletion"] for r in rounds],
            note=note,
            extra=extra,
        ),
        benchkit.figure(
            f"resume_{kill_at}_to_first_task", "s", [r["toFirstTask"] for r in rounds], note=note
        ),
        benchkit.figure(
            f"crash_run_{kill_at}_peak_rss", "MB", [r["killedRssMb"] for r in rounds], note=note
        ),
    ]
    if per_task:
        name = f"resume_{kill_at}_remaining_ms_per_task"
        figures.insert(2, benchkit.figure(name, "ms/task", per_task, note=note))
    return figures


def main(
    total: int = 11000,
    kill_at: int = 10000,
    runs: int = 5,
    cap_s: float = 420.0,
    budget_s: float = 150.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """``budget_s``: stop repeating once the rounds took that long (≥ 1 round)."""
    if not 0 < kill_at < total:
        raise ValueError("kill_at must be between 0 and total")
    rounds = _rounds(total, kill_at, runs, cap_s, budget_s, workdir)
    figures = _figures(rounds, total, kill_at, runs)
    return {"benchmark": "recovery", "figures": [f.to_json() for f in figures]}


def _note(rounds: list[dict[str, Any]], wanted: int, kill_at: int) -> str:
    notes = []
    if not all(r["reached"] for r in rounds):
        notes.append(f"CAPPED: some runs were killed before {kill_at} tasks were done")
    if len(rounds) < wanted:
        each = sum(r["secondsToKill"] for r in rounds) / len(rounds)
        notes.append(
            f"ONLY {len(rounds)} of {wanted} rounds: reaching the kill point takes {each:.0f} s"
        )
    return "; ".join(notes)


if __name__ == "__main__":
    defaults = {
        "total": 11000,
        "kill_at": 10000,
        "runs": 5,
        "cap_s": 420.0,
        "budget_s": 150.0,
    }
    benchkit.module_cli(__doc__, main, defaults)

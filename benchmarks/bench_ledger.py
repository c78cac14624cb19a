"""Micro-benchmark: a task-completion commit through the ledger API vs a bare SQLite commit.

Both run in the same process on the same disk, WAL + ``synchronous=FULL``. The task commit
writes the task's output, an audit event, a checkpoint and the run's ``updated_at`` in one
``BEGIN IMMEDIATE`` transaction. Target (DESIGN.md §8): ratio of medians ≤ 1.5×.

Run: ``python benchmarks/bench_ledger.py [--reps 5] [--commits 200]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentctl.ledger import NewRun, TaskCompletion
from agentctl.ledger.connection import open_database
from agentctl.ledger.runs import create_run_txn
from agentctl.ledger.tasks import commit_tasks_txn

NOW = "2024-05-01T12:00:00.000Z"


def _bare(path: Path) -> Callable[[int], None]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT)")

    def commit(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (payload) VALUES (?)", (f'{{"i":{i}}}',))
        conn.execute("COMMIT")

    return commit


def _ledger(path: Path, total: int) -> Callable[[int], None]:
    led = open_database(path)
    tasks = [f"t{i}" for i in range(total)]
    run = NewRun(
        run_id="run-bench",
        mode="execute",
        workflow_name="bench",
        workflow_digest="w",
        plan_digest="p",
        workflow={},
        plan={},
        inputs={},
        working_memory={},
        trace_id="trace",
    )
    with led.transaction() as conn:
        create_run_txn(conn, run, tasks, NOW)

    def commit(i: int) -> None:
        done = TaskCompletion(tasks[i], "succeeded", 1, output={"i": i})
        with led.transaction() as conn:
            commit_tasks_txn(conn, "run-bench", [done], None, NOW)

    return commit


def _measure(commit: Callable[[int], None], start: int, count: int) -> float:
    """Milliseconds per commit over ``count`` commits."""
    t0 = time.perf_counter()
    for i in range(start, start + count):
        commit(i)
    return (time.perf_counter() - t0) * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases live")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bare = _bare(Path(tmp) / "bare.db")
        task = _ledger(Path(tmp) / "ledger.db", args.reps * args.commits)
        bare_ms, task_ms = [], []
        for rep in range(args.reps):  # interleaved so disk drift hits both alike
            bare_ms.append(_measure(bare, rep * args.commits, args.commits))
            task_ms.append(_measure(task, rep * args.commits, args.commits))
    for name, values in (("bare one-row commit", bare_ms), ("task completion commit", task_ms)):
        print(
            f"{name:24s} min {min(values):.3f}  median {statistics.median(values):.3f}"
            f"  max {max(values):.3f} ms/commit"
        )
    ratio = statistics.median(task_ms) / statistics.median(bare_ms)
    verdict = "meets" if ratio <= 1.5 else "misses"
    print(f"ratio (median task / median bare): {ratio:.2f}x — {verdict} the 1.5x target")


if __name__ == "__main__":
    main()

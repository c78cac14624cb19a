"""Count, per effect kind, the SQLite commits and the fsyncs one chain step costs.

For each kind, a chain of N and one of 2N steps run in-process (``api.start_run``, the
coordinator and its workers); the difference divided by N is what one step adds, so start-up,
run creation and settlement cancel out. Commits are counted by an ``sqlite3`` trace callback on
every coordinator connection (``COMMIT`` statements); fsyncs by ``strace -f`` over the whole
process tree (``fsync``/``fdatasync`` system calls of the coordinator *and* its workers — SQLite
WAL commits, artifact ingestion, and a worker's own durable file write). Without ``strace``
only commits are reported. SQL statements are counted by the same trace (every statement run,
each row of an ``executemany`` included; the run's creation inserts one task row per task, so
one statement of a step's figure is creation, not the step). Feeds ``commits_per_effect.md``.

Run: ``python benchmarks/count_commits.py [--n 20] [--json]``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

KINDS = ("pure", "memory", "write", "shell", "agent")


def agent_chain(n: int) -> dict[str, Any]:
    """Each task one agent turn against the fake provider: one recorded model call."""
    agent = {"provider": "sim", "model": "m", "instructions": "Answer.", "maxTurns": 2}
    tasks = [
        {"id": f"t{i}", "uses": "agent:a", "with": {"prompt": f"q{i}"}}
        | ({"needs": [f"t{i - 1}"]} if i else {})
        for i in range(n)
    ]
    return benchkit.document(
        "agent-chain", tasks, providers={"sim": {"kind": "fake"}}, agents={"a": agent}
    )


def _doc(kind: str, n: int) -> dict[str, Any]:
    makers = {
        "pure": benchkit.pure_chain,
        "memory": benchkit.memory_chain,
        "write": benchkit.write_chain,
        "shell": benchkit.shell_chain,
        "agent": agent_chain,
    }
    return makers[kind](n)


def _child(kind: str, n: int, workdir: Path) -> str:
    """Run one chain in this process; returns the coordinator's commits and statements."""
    import sqlite3

    commits = statements = 0
    connect = sqlite3.connect

    def counted(*args: Any, **kw: Any) -> sqlite3.Connection:
        conn = connect(*args, **kw)

        def trace(sql: str) -> None:
            # One call per statement run (each row of an ``executemany`` too).
            nonlocal commits, statements
            commits += sql.lstrip().upper().startswith("COMMIT")
            statements += 1

        conn.set_trace_callback(trace)
        return conn

    sqlite3.connect = counted  # type: ignore[assignment]  # counting only, never in agentctl
    timed = benchkit.run_inprocess(_doc(kind, n), workdir)
    if timed.state != "succeeded":
        raise RuntimeError(f"the {kind} chain ended {timed.state}")
    return f"{commits} {statements}"


def _fsyncs(trace_file: Path) -> int:
    """The fsync + fdatasync calls in an ``strace -c`` summary."""
    total = 0
    for line in trace_file.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
        if m:
            total += int(m.group(1))
    return total


def _measure(kind: str, n: int, workdir: Path) -> tuple[int, int, int | None]:
    """(commits, statements, fsyncs) of one chain of ``n`` steps, in a fresh process."""
    here = workdir / f"{kind}{n}"
    here.mkdir(parents=True)
    argv = [sys.executable, __file__, "--child", kind, str(n), str(here)]
    strace = shutil.which("strace")
    trace_file = here / "strace.txt"
    if strace:
        argv = [strace, "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", str(trace_file)]
        argv += [sys.executable, __file__, "--child", kind, str(n), str(here)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, env=os.environ)
    commits, statements = (int(x) for x in done.stdout.strip().splitlines()[-1].split())
    return commits, statements, _fsyncs(trace_file) if strace else None


def main(n: int = 20, workdir: Path | None = None) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for kind in KINDS:
            c1, s1, f1 = _measure(kind, n, Path(tmp))
            c2, s2, f2 = _measure(kind, 2 * n, Path(tmp))
            fsyncs = None if f1 is None or f2 is None else (f2 - f1) / n
            rows[kind] = {
                "commitsPerStep": (c2 - c1) / n,
                "statementsPerStep": (s2 - s1) / n,
                "fsyncsPerStep": fsyncs,
            }
    return {"benchmark": "commits_per_effect", "n": n, "kinds": rows}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(_child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])))
    else:
        as_json = "--json" in sys.argv
        size = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 20
        result = main(size)
        print(json.dumps(result) if as_json else json.dumps(result, indent=2))

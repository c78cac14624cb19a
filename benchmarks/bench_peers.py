"""Benchmark: the same N-step durable chain in agentctl, DBOS Transact and LangGraph.

All three run in this one process, on the same disk, interleaved round by round (so load
drift from other processes hits each alike), each round in fresh database files:
- agentctl, two ways (``api.start_run``; WAL, ``synchronous=FULL``): a pure chain of N
  ``builtin.assign`` tasks — deterministic results, which the runtime may group-commit since
  a resume re-derives them — and a chain of N ``builtin.memory.write`` effects, each recorded
  through the effect protocol, its outcome durable before the next task's effect may run (it
  commits in the transaction that records that start, ADR 0011) — the like-for-like match
  of a peer's individually persisted step;
- DBOS Transact on SQLite (its default configuration: rollback journal, SQLite's default
  ``synchronous=FULL``): one ``@DBOS.workflow`` calling a ``@DBOS.step`` N times — DBOS
  records each step's output before the workflow continues;
- LangGraph with ``SqliteSaver`` (WAL, ``synchronous=FULL``): a one-node graph that loops N
  times, ``durability="sync"`` (each superstep's checkpoint is written before the next step
  runs — the guarantee comparable to ours); ``durability="async"``, LangGraph's default, is
  reported too for context.
Besides time, each system's database is inspected after a run: rows and bytes written per
step, so RESULTS.md can say what each one persists. A peer that cannot be imported or run
is reported as unavailable, with the reason, and the others carry on.
Targets (reported, never asserted): ≥ 2× faster than DBOS, ≥ 1.5× faster than LangGraph.

Run: ``python benchmarks/bench_peers.py [--n 1000] [--runs 5] [--json]``.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

Runner = Callable[[Path], float]  # one N-step chain in a fresh directory → seconds


def table_rows(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith("sqlite_")
        ]
        return {n: int(conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0]) for n in names}
    finally:
        conn.close()


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def persisted(db: Path, n: int) -> dict[str, Any]:
    """Rows per table and bytes on disk, per step, of one finished run's database."""
    rows = {k: v for k, v in table_rows(db).items() if v}
    return {
        "rowsPerStep": round(sum(rows.values()) / n, 2),
        "rowsByTable": rows,
        "bytesPerStep": round(db_bytes(db) / n),
        "journalMode": _pragma(db, "journal_mode"),
    }


def _pragma(db: Path, name: str) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


# --------------------------------------------------------------------------- agentctl


def agentctl_runner(n: int, kind: str) -> tuple[Runner, Callable[[Path], Path]]:
    doc = benchkit.pure_chain(n) if kind == "pure" else benchkit.memory_chain(n)

    def run(d: Path) -> float:
        return benchkit.run_inprocess(doc, d).seconds

    return run, lambda d: d / "runtime.db"


# --------------------------------------------------------------------------- DBOS


def dbos_runner(n: int) -> tuple[Runner, Callable[[Path], Path]]:
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)

    @DBOS.step()
    def step(x: int) -> int:
        return x + 1

    @DBOS.workflow()
    def chain(count: int) -> int:
        x = 0
        for _ in range(count):
            x = step(x)
        return x

    def run(d: Path) -> float:
        url = f"sqlite:///{d / 'dbos.sqlite'}"
        DBOS(
            config={
                "name": "bench",
                "system_database_url": url,
                "run_admin_server": False,
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        try:
            chain(2)  # warm-up outside the clock: first-call caches, prepared statements
            t0 = time.perf_counter()
            if chain(n) != n:
                raise RuntimeError("DBOS chain returned a wrong result")
            return time.perf_counter() - t0
        finally:
            DBOS.destroy(destroy_registry=False)

    return run, lambda d: d / "dbos.sqlite"


# --------------------------------------------------------------------------- LangGraph


class State(TypedDict):
    """LangGraph's graph state (module level: the graph resolves its annotations here)."""

    i: int


def langgraph_runner(n: int, durability: str) -> tuple[Runner, Callable[[Path], Path]]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    def step(s: State) -> State:
        return {"i": s["i"] + 1}

    def route(s: State) -> str:
        return "step" if s["i"] < n else END

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", route)

    def run(d: Path) -> float:
        conn = sqlite3.connect(d / "langgraph.db", check_same_thread=False)
        try:
            app = graph.compile(checkpointer=SqliteSaver(conn))
            warm = {"configurable": {"thread_id": "warm"}, "recursion_limit": n + 10}
            app.invoke({"i": n - 1}, warm, durability=durability)  # type: ignore[arg-type]
            cfg = {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10}
            t0 = time.perf_counter()
            out = app.invoke({"i": 0}, cfg, durability=durability)  # type: ignore[arg-type]
            elapsed = time.perf_counter() - t0
        finally:
            conn.close()
        if out["i"] != n:
            raise RuntimeError("LangGraph chain returned a wrong result")
        return elapsed

    return run, lambda d: d / "langgraph.db"


# --------------------------------------------------------------------------- the comparison


SYSTEMS: dict[str, Callable[[int], tuple[Runner, Callable[[Path], Path]]]] = {
    "agentctl_pure": lambda n: agentctl_runner(n, "pure"),
    "agentctl_effect": lambda n: agentctl_runner(n, "effect"),
    "dbos": dbos_runner,
    "langgraph_sync": lambda n: langgraph_runner(n, "sync"),
    "langgraph_async": lambda n: langgraph_runner(n, "async"),
}


def main(n: int = 1000, runs: int = 5, workdir: Path | None = None) -> dict[str, Any]:
    ready: dict[str, tuple[Runner, Callable[[Path], Path]]] = {}
    unavailable: dict[str, str] = {}
    for name, make in SYSTEMS.items():
        try:
            ready[name] = make(n)
        except ImportError as exc:
            unavailable[name] = f"not installed ({exc}); pip install -e '.[bench]'"
        except Exception as exc:  # an optional peer broken here must not stop the suite
            unavailable[name] = f"{type(exc).__name__}: {exc}"
    samples: dict[str, list[float]] = {name: [] for name in ready}
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for k in range(runs):
            for name, (run, db_of) in list(ready.items()):
                d = Path(tmp) / f"{name}-{k}"
                d.mkdir()
                try:
                    samples[name].append(run(d) * 1000 / n)
                except Exception as exc:
                    unavailable[name] = f"failed while running: {type(exc).__name__}: {exc}"
                    del ready[name], samples[name]
                    continue
                if k == 0:
                    details[name] = persisted(db_of(d), n)
    figures = [
        benchkit.figure(f"durable_step_{name}", "ms/step", values, extra=details.get(name, {}))
        for name, values in samples.items()
    ]
    return {
        "benchmark": "peers",
        "n": n,
        "figures": [f.to_json() for f in figures],
        "unavailable": unavailable,
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("agentctl", "dbos", "langgraph", "langgraph-checkpoint-sqlite", "SQLAlchemy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


if __name__ == "__main__":
    benchkit.module_cli(__doc__, main, {"n": 1000, "runs": 5})

"""Benchmark: the run queue against PostgreSQL — 1, 2 and 3 ``serve`` processes, and the floor.

Per round and per serve count, a fresh database on the server gets ``--runs`` queued runs
(``api.submit_run``, untimed), each a chain of ``--effects`` ``builtin.memory.write`` effects
(each recorded through the effect protocol: its outcome durable before the next one runs).
Then that many ``agentctl serve --exit-when-idle`` processes start together; the clock runs
from their start until the last one has exited, so it includes their start-up (~0.5 s each,
in parallel) and the last idle poll. Every run must end ``succeeded``.
Reported: runs/s and effects/s per serve count, and beside them the PostgreSQL commit floor —
one single-row INSERT + COMMIT with ``synchronous_commit = on`` over one connection, the
ceiling a single connection's sequential commits can reach on this machine.

PostgreSQL: ``--pg-url`` or ``$AGENTCTL_BENCH_PG_URL`` or ``$AGENTCTL_TEST_PG_URL`` (a URL on
a database whose user may ``CREATE DATABASE``); without one, or when it cannot be reached, the
benchmark reports itself skipped (no figures) and the suite carries on.

Run: ``python benchmarks/bench_scaleout.py [--runs 300] [--effects 3] [--rounds 3] [--json]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

SERVE_COUNTS = (1, 2, 3)
MAX_RUNS = 4  # per serve


def _pg_url(given: str) -> str:
    return (
        given
        or os.environ.get("AGENTCTL_BENCH_PG_URL")
        or os.environ.get("AGENTCTL_TEST_PG_URL", "")
    )


def _with_db(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name``."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def commit_floor(url: str, rounds: int, reps: int) -> benchkit.Figure:
    """ms per single-row INSERT + COMMIT, ``synchronous_commit = on``, one connection."""
    import psycopg

    samples = []
    with psycopg.connect(url) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TEMP TABLE floor (id BIGSERIAL PRIMARY KEY, v TEXT)")
        conn.commit()
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                conn.execute("INSERT INTO floor (v) VALUES ('x')")
                conn.commit()
            samples.append((time.perf_counter() - t0) * 1000 / reps)
    return benchkit.figure("pg_commit_floor", "ms/commit", samples)


def _submit(db_url: str, workdir: Path, runs: int, effects: int) -> None:
    from agentctl.cli_commands import RunRequest, prepare_run
    from agentctl.coordinator import api

    os.environ["AGENTCTL_ARTIFACTS"] = str(workdir / "artifacts")  # not under the cwd
    path = benchkit.write_yaml(benchkit.memory_chain(effects), workdir / "wf.yaml")
    prepared = prepare_run(RunRequest(path, db_url))
    document, plan, inputs = prepared.document, prepared.plan, prepared.inputs
    for _ in range(runs):
        api.submit_run(
            document=document,
            plan=plan,
            inputs=inputs,
            db=db_url,
            workspace=str(workdir),
        )


def _serve_all(db_url: str, workdir: Path, serves: int) -> float:
    """Start ``serves`` serve processes at once; seconds until the last one exited."""
    argv = benchkit.agentctl_argv(
        "--output",
        "json",
        "serve",
        "--db",
        db_url,
        "--exit-when-idle",
        "--max-runs",
        str(MAX_RUNS),
        "--poll-seconds",
        "0.1",
    )
    env = {**os.environ, "AGENTCTL_ARTIFACTS": str(workdir / "artifacts")}
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(serves)
    ]
    for proc in procs:
        _out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"serve exited {proc.returncode}: {err[-500:]}")
    return time.perf_counter() - t0


def _succeeded(db_url: str) -> int:
    import psycopg

    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT COUNT(*) FROM runs WHERE state = 'succeeded'").fetchone()
    return int(row[0]) if row else 0


def one_round(url: str, workdir: Path, serves: int, runs: int, effects: int) -> float:
    """A fresh database, ``runs`` queued runs, ``serves`` processes: seconds to drain it."""
    name = f"runqueue_bench_{uuid.uuid4().hex[:12]}"
    _admin(url, f'CREATE DATABASE "{name}"')
    try:
        db_url = _with_db(url, name)
        _submit(db_url, workdir, runs, effects)
        seconds = _serve_all(db_url, workdir, serves)
        done = _succeeded(db_url)
        if done != runs:
            raise RuntimeError(f"{done} of {runs} runs succeeded")
        return seconds
    finally:
        _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _reachable(url: str) -> str:
    """Why PostgreSQL cannot be used ('' when it can)."""
    if not url:
        return "no PostgreSQL URL (--pg-url, $AGENTCTL_BENCH_PG_URL or $AGENTCTL_TEST_PG_URL)"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5):
            return ""
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    except Exception as exc:  # any failure to connect means: skip, with the reason
        return f"PostgreSQL unreachable: {type(exc).__name__}"


def _throughput(n: int, seconds: list[float], runs: int, effects: int) -> list[benchkit.Figure]:
    """Runs and effects per second that ``n`` serve processes drained, one sample a round."""
    return [
        benchkit.figure(
            f"scaleout_runs_per_s_{n}_serve", "runs/s", [runs / s for s in seconds], higher=True
        ),
        benchkit.figure(
            f"scaleout_effects_per_s_{n}_serve",
            "effects/s",
            [runs * effects / s for s in seconds],
            higher=True,
        ),
    ]


def main(
    runs: int = 300,
    effects: int = 3,
    rounds: int = 3,
    floor_reps: int = 200,
    pg_url: str = "",
    workdir: Path | None = None,
) -> dict[str, Any]:
    url = _pg_url(pg_url)
    why = _reachable(url)
    if why:
        return {"benchmark": "scaleout", "skipped": why, "figures": [], "notes": [why]}
    samples: dict[int, list[float]] = {n: [] for n in SERVE_COUNTS}
    with tempfile.TemporaryDirectory(dir=workdir, prefix="scaleout-") as tmp:
        for k in range(rounds):  # interleaved, so load drift hits every serve count alike
            for n in SERVE_COUNTS:
                where = Path(tmp) / f"r{k}-s{n}"
                where.mkdir()
                samples[n].append(one_round(url, where, n, runs, effects))
    figures = [commit_floor(url, max(rounds, 3), floor_reps)]
    for n in SERVE_COUNTS:
        figures += _throughput(n, samples[n], runs, effects)
    return {
        "benchmark": "scaleout",
        "runs": runs,
        "effects": effects,
        "maxRunsPerServe": MAX_RUNS,
        "figures": [f.to_json() for f in figures],
    }


if __name__ == "__main__":
    benchkit.module_cli(
        __doc__,
        main,
        {
            "runs": 300,
            "effects": 3,
            "rounds": 3,
            "floor_reps": 200,
            "pg_url": "",
        },
    )

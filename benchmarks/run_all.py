"""Run the whole benchmark suite and write ``benchmarks/RESULTS.md`` (``make bench``).

Each benchmark module runs in its own subprocess (``--json``), so one module's imports,
global state (DBOS is a process-wide singleton) or crash cannot skew or stop another; a
module that fails or times out is reported as such in RESULTS.md and the suite carries on.
All databases live under one temporary directory, on one disk, named in the report.
``bench_check_startup`` (cold start of ``agentctl check``) is imported and run as is.

Run: ``python benchmarks/run_all.py [--tiny] [--out PATH] [--json-out PATH] [--dir DIR]``.
``--tiny`` runs every benchmark at a toy size (for tests: it proves they all still run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_check_startup  # noqa: E402
import benchkit  # noqa: E402
import results_md  # noqa: E402

# module → (full-size arguments, tiny arguments, timeout in seconds at full size)
PLAN: dict[str, tuple[list[str], list[str], float]] = {
    "bench_floors": (["--runs", "15", "--reps", "100"], ["--runs", "2", "--reps", "5"], 300),
    "bench_bare_steps": (["--n", "1000", "--runs", "7"], ["--n", "3", "--runs", "1"], 300),
    "bench_chain": (
        ["--sizes", "1000,10000", "--runs", "5"],
        ["--sizes", "5", "--compile-sizes", "5", "--runs", "1"],
        1500,
    ),
    "bench_effects": (["--n", "1000", "--runs", "5"], ["--n", "3", "--runs", "1"], 1200),
    "bench_parallel": (
        ["--runs", "5"],
        ["--sleepers", "4", "--sleep-s", "0.05", "--children", "6", "--runs", "1"],
        600,
    ),
    "bench_peers": (["--n", "1000", "--runs", "5"], ["--n", "5", "--runs", "1"], 900),
    "bench_recovery": (
        ["--total", "11000", "--kill-at", "10000", "--runs", "5"],
        # More than one commit group (pure results are committed in groups), so the kill
        # lands mid-run even at this size.
        ["--total", "1100", "--kill-at", "1", "--runs", "1"],
        1500,
    ),
    "bench_providers": (
        ["--runs", "5"],
        ["--agents", "2", "--delay-s", "0.05", "--runs", "1"],
        600,
    ),
    # Skips itself (no figures) when no PostgreSQL is reachable: $AGENTCTL_BENCH_PG_URL.
    "bench_scaleout": (
        ["--runs", "300", "--rounds", "3"],
        ["--runs", "4", "--effects", "2", "--rounds", "1", "--floor-reps", "10"],
        1500,
    ),
    "bench_profile": (
        ["--chain", "10000", "--effects", "1000"],
        ["--chain", "5", "--effects", "3", "--resume-total", "1100", "--resume-kill-at", "1"],
        900,
    ),
}


def run_module(name: str, args: list[str], workdir: Path, timeout_s: float) -> dict[str, Any]:
    argv = [sys.executable, str(HERE / f"{name}.py"), "--json", "--dir", str(workdir), *args]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return {"benchmark": name, "error": f"timed out after {timeout_s:.0f} s", "figures": []}
    elapsed = time.perf_counter() - t0
    for line in done.stdout.splitlines():
        if line.startswith("BENCH-JSON "):
            result: dict[str, Any] = json.loads(line.removeprefix("BENCH-JSON "))
            result["module"], result["elapsedS"] = name, elapsed
            return result
    tail = (done.stderr or done.stdout)[-1500:]
    return {"benchmark": name, "error": f"exit {done.returncode}: {tail}", "figures": []}


def run_startup(runs: int) -> dict[str, Any]:
    try:
        got = bench_check_startup.main(runs)
    except Exception as exc:  # reported, never fatal
        return {"benchmark": "startup", "error": f"{type(exc).__name__}: {exc}", "figures": []}
    # python -c pass, check and a one-task run, timed in turn per round (same minutes).
    return {"benchmark": "startup", "figures": got["figures"]}


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "agentctl"],
            cwd=HERE,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + (" (agentctl/ has uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: proves it all runs")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases live")
    parser.add_argument("--only", default="", help="comma-separated module names")
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": benchkit.machine(),
        "commit": git_commit(),
        "loadBefore": load_average(),
        "tiny": args.tiny,
        "command": "make bench" if not args.tiny else "run_all.py --tiny",
    }
    results: list[dict[str, Any]] = []
    only = {m for m in args.only.split(",") if m}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="agentctl-bench-") as tmp:
        meta["disk"] = benchkit.disk_of(Path(tmp))
        for name, (full, tiny, timeout_s) in PLAN.items():
            if only and name not in only:
                continue
            print(f"[bench] {name} …", file=sys.stderr, flush=True)
            results.append(run_module(name, tiny if args.tiny else full, Path(tmp), timeout_s))
        if not only or "startup" in only:
            print("[bench] startup …", file=sys.stderr, flush=True)
            results.append(run_startup(2 if args.tiny else 10))
    meta["suiteSeconds"] = time.perf_counter() - t0
    meta["loadAfter"] = load_average()
    report = {"meta": meta, "results": results}
    args.out.write_text(results_md.render(report), encoding="utf-8")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"[bench] wrote {args.out} in {meta['suiteSeconds']:.0f} s", file=sys.stderr)
    return report


if __name__ == "__main__":
    benchkit.run_as_installed()
    main()

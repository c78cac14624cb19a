"""Benchmark: cold start of ``agentctl check examples/hello.yaml``.

Each measurement is a fresh subprocess — interpreter start, imports, load, compile, render —
timed from spawn to exit, so it is what a user (or a CI script calling agentctl in a loop)
waits for. One untimed warm-up run first makes sure bytecode caches exist, as they do after
installation. Target: median ≤ 300 ms.

Run: ``python benchmarks/bench_check_startup.py [--runs 20]``; ``main(runs)`` returns the
figures as a dict for a caller that wants to run it small.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "examples" / "hello.yaml"
TARGET_MS = 300.0


def _command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m agentctl``."""
    script = Path(sys.executable).parent / "agentctl"
    if script.exists():
        return [str(script), "check", str(WORKFLOW)]
    return [sys.executable, "-m", "agentctl", "check", str(WORKFLOW)]


def _once(argv: list[str]) -> float:
    """Milliseconds for one fresh ``agentctl check``; the check itself must succeed."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, stdin=subprocess.DEVNULL)
    elapsed = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def main(runs: int = 20) -> dict[str, Any]:
    """Time ``runs`` cold starts; returns {runs, minMs, medianMs, maxMs, targetMs, meetsTarget}."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    argv = _command()
    _once(argv)  # warm-up: bytecode caches, page cache
    samples = [_once(argv) for _ in range(runs)]
    median = statistics.median(samples)
    return {
        "command": " ".join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv)),
        "runs": runs,
        "minMs": round(min(samples), 1),
        "medianMs": round(median, 1),
        "maxMs": round(max(samples), 1),
        "targetMs": TARGET_MS,
        "meetsTarget": median <= TARGET_MS,
    }


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="timed runs (at least 10 advised)")
    args = parser.parse_args()
    result = main(args.runs)
    print(f"{result['command']}  ({result['runs']} fresh processes)")
    print(
        f"min {result['minMs']:.1f}  median {result['medianMs']:.1f}  max {result['maxMs']:.1f} ms"
    )
    verdict = "meets" if result["meetsTarget"] else "misses"
    print(f"target: median <= {TARGET_MS:.0f} ms — {verdict} it")


if __name__ == "__main__":
    _cli()

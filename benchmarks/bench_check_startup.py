"""Benchmark: cold start of ``agentctl check`` and ``agentctl run``, against ``python -c pass``.

Each measurement is a fresh subprocess — interpreter start, imports, load, compile, render
(and for ``run``: database creation, the run, the outcome) — timed from spawn to exit, so it
is what a user (or a CI script calling agentctl in a loop) waits for. The three commands are
timed in turn, round after round, so a load change on a shared machine hits all of them alike;
the ratios to ``python -c pass`` are what issue 15 sets goals for (check ≤ 8×, run ≤ 12×).
One untimed warm-up round first makes sure bytecode caches exist, as they do after
installation (so ``PYTHONDONTWRITEBYTECODE`` is dropped from the children's environment).

Figures: ``python_pass``, ``check_cold_start`` (``examples/hello.yaml``), ``run_one_task_cold``
(a one-task ``builtin.assign`` workflow, each run in a fresh directory: a new database), all in
ms; ``check_vs_python`` and ``run_vs_python``, the ratios of the medians.

Run: ``python benchmarks/bench_check_startup.py [--runs 20] [--json] [--dir DIR]``;
``main(runs)`` returns the figures as a dict for a caller that wants to run it small.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "examples" / "hello.yaml"
TARGET_MS = 300.0
CHECK_GOAL, RUN_GOAL = 8.0, 12.0
ONE_TASK = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: one-task }
spec:
  actions:
    put: { kind: builtin.assign }
  tasks:
    - id: only
      uses: action:put
      with: { message: hello }
"""


def _command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m agentctl``."""
    return [*benchkit.agentctl_argv("check"), str(WORKFLOW)]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _once(argv: list[str], cwd: Path = REPO) -> float:
    """Milliseconds for one fresh process running ``argv``; it must succeed."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL, env=_env())
    elapsed = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def _run_once(workdir: Path, k: int) -> float:
    """One ``agentctl run`` of the one-task workflow in a fresh directory (a new database)."""
    run_dir = workdir / f"run-{k}"
    run_dir.mkdir(parents=True)
    (run_dir / "one.yaml").write_text(ONE_TASK, encoding="utf-8")
    return _once(benchkit.agentctl_argv("run", "one.yaml"), cwd=run_dir)


def _rounds(runs: int, workdir: Path) -> dict[str, list[float]]:
    """``runs`` timed rounds (after one untimed), each timing the three commands in turn."""
    check = _command()
    samples: dict[str, list[float]] = {"python_pass": [], "check": [], "run": []}
    for k in range(runs + 1):
        got = {
            "python_pass": _once([sys.executable, "-c", "pass"]),
            "check": _once(check),
            "run": _run_once(workdir, k),
        }
        if k:  # round 0 is the warm-up
            for name, ms in got.items():
                samples[name].append(ms)
    return samples


def _ratio(name: str, over: list[float], base: list[float], goal: float) -> dict[str, Any]:
    ratio = statistics.median(over) / statistics.median(base)
    fig = benchkit.figure(name, "×", [ratio], note=f"ratio of medians; goal ≤ {goal:g}×")
    fig.extra = {"goal": goal, "meetsGoal": ratio <= goal}
    return fig.to_json()


def main(runs: int = 20, workdir: Path | None = None) -> dict[str, Any]:
    """Time ``runs`` rounds. Returns the ``check`` summary (runs, minMs, medianMs, maxMs,
    targetMs, meetsTarget, command) and ``figures`` in the shape of the other modules."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    with tempfile.TemporaryDirectory(dir=workdir, prefix="startup-") as tmp:
        samples = _rounds(runs, Path(tmp))
    check, run, base = samples["check"], samples["run"], samples["python_pass"]
    command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(_command()))
    figures = [
        benchkit.figure("python_pass", "ms", base, note="python -c pass").to_json(),
        benchkit.figure("check_cold_start", "ms", check, note=command).to_json(),
        benchkit.figure(
            "run_one_task_cold", "ms", run, note="agentctl run, one builtin.assign task, new db"
        ).to_json(),
        _ratio("check_vs_python", check, base, CHECK_GOAL),
        _ratio("run_vs_python", run, base, RUN_GOAL),
    ]
    median = statistics.median(check)
    return {
        "benchmark": "startup",
        "command": command,
        "runs": runs,
        "minMs": round(min(check), 1),
        "medianMs": round(median, 1),
        "maxMs": round(max(check), 1),
        "targetMs": TARGET_MS,
        "meetsTarget": median <= TARGET_MS,
        "figures": figures,
    }


def _cli() -> None:
    benchkit.run_as_installed()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="timed rounds (at least 10 advised)")
    parser.add_argument("--dir", type=Path, default=None, help="where the run directories live")
    parser.add_argument("--json", action="store_true", help="one BENCH-JSON line for run_all")
    args = parser.parse_args()
    result = main(args.runs, args.dir)
    if args.json:
        benchkit.emit(result)
        return
    print(f"{result['runs']} rounds of fresh processes")
    for f in result["figures"]:
        print(
            f"{f['name']:20s} min {f['min']:8.1f}  median {f['median']:8.1f}  "
            f"max {f['max']:8.1f} {f['unit']:2s}  {f['note']}"
        )


if __name__ == "__main__":
    _cli()

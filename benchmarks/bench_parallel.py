"""Benchmark: parallel batches at ``maxConcurrency: 64``.

- sleep batch: 64 independent ``builtin.shell.exec`` tasks, each ``/bin/sleep 0.5``; the ideal
  wall time is one sleep (0.5 s). The pool is ``min(64, cpu_count)`` workers, each running
  many effects at once; the figure includes starting them. Target: ≤ 0.75 s wall.
- foreach fan-out: 1,000 ``builtin.assign`` children (foreach is capped at 256 items per
  task, so four foreach tasks of 250; plus their four aggregates) — children per second.
Both measured in-process (around ``api.start_run``) and via the CLI.

Run: ``python benchmarks/bench_parallel.py [--sleepers 64] [--sleep-s 0.5] [--children 1000]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit


def _both(doc: dict[str, Any], runs: int, workdir: Path, tag: str, budget_s: float) -> Any:
    inproc = benchkit.series(
        runs, lambda d: benchkit.run_inprocess(doc, d), workdir, f"{tag}-in", budget_s
    )
    yaml_path = benchkit.write_yaml(doc, workdir / f"{tag}.yaml")
    cli = benchkit.series(
        runs, lambda d: benchkit.run_cli(yaml_path, d / "runtime.db"), workdir, f"{tag}-cli",
        budget_s,
    )  # fmt: skip
    return inproc, cli


def main(
    sleepers: int = 64,
    sleep_s: float = 0.5,
    children: int = 1000,
    runs: int = 5,
    budget_s: float = 60.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        base = Path(tmp)
        doc = benchkit.sleep_batch(sleepers, sleep_s)
        s_in, s_cli = _both(doc, runs, base, "sleep", budget_s)
        f_in, f_cli = _both(benchkit.foreach_fanout(children), runs, base, "fanout", budget_s)
    ideal = f"ideal {sleep_s:g} s"
    figures = [
        benchkit.figure(f"sleep_batch_{sleepers}_inprocess", "s", s_in.seconds, note=ideal),
        benchkit.figure(f"sleep_batch_{sleepers}_cli", "s", s_cli.seconds, note=ideal),
        benchkit.rate_figure(f"foreach_{children}_inprocess", f_in, children, "children/s"),
        benchkit.per_item_figure(f"foreach_{children}_inprocess_per_child", f_in, children),
        benchkit.rate_figure(f"foreach_{children}_cli", f_cli, children, "children/s"),
    ]
    return {"benchmark": "parallel", "figures": [f.to_json() for f in figures]}


if __name__ == "__main__":
    defaults = {"sleepers": 64, "sleep_s": 0.5, "children": 1000, "runs": 5, "budget_s": 60.0}
    benchkit.module_cli(__doc__, main, defaults)

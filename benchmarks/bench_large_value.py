"""Measurement: how much a large ``builtin.write`` grows the ledger (ADR 0008, issue 18 item 4).

One run on a fresh ledger through the CLI: a process task prints ``--mib`` MiB, a
``builtin.write`` writes that output to a file. Reported: the empty ledger's size, the database
after the run (its WAL is checkpointed away when the process exits), the stored length of the
largest content columns, the artifact store's blob bytes, and the run's wall time. Before
ADR 0008 the database grew by about nine copies of the content here (47.4 MB for 5 MiB);
after it, by a few KiB of rows, with the content once in ``artifacts/``. Sizes are exact and
repeatable; the wall time is informative only. Not part of ``run_all`` (nothing in it is a
timing target).

Run: ``python benchmarks/bench_large_value.py [--mib 5]``.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit

WORKFLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: large-value }}
spec:
  policy: {{ approval: never, writableRoots: [out], processAllowlist: [{exe}] }}
  actions:
    gen:
      kind: builtin.shell.exec
      command: {python}
      args: ["-c", "import sys; sys.stdout.write('x' * {size})"]
      stdoutLimitBytes: {limit}
      combinedOutputLimitBytes: {limit}
    save: {{ kind: builtin.write }}
  tasks:
    - {{ id: gen, uses: action:gen }}
    - id: save
      uses: action:save
      needs: [gen]
      with: {{ path: out/big.txt, content: "${{{{ tasks.gen.output.stdout }}}}" }}
"""

_COLUMNS = """SELECT 'effects.request_json', MAX(LENGTH(request_json)) FROM effects
    UNION ALL SELECT 'effects.result_json', MAX(LENGTH(result_json)) FROM effects
    UNION ALL SELECT 'task_states.output_json', MAX(LENGTH(output_json)) FROM task_states
    UNION ALL SELECT 'runs.output_json', MAX(LENGTH(output_json)) FROM runs"""


def _cli(where: Path, *args: str) -> None:
    argv = benchkit.agentctl_argv("--output", "json", *args)
    done = subprocess.run(argv, cwd=where, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"agentctl {' '.join(args)} failed: {done.stderr.strip()}")


def _blob_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "sha256").rglob("*") if p.is_file())


def measure(mib: int, where: Path) -> list[tuple[str, int | float]]:
    python = shutil.which("python3") or sys.executable
    size = mib * 1024 * 1024
    text = WORKFLOW.format(exe=Path(python).name, python=python, size=size, limit=2 * size)
    (where / "wf.yaml").write_text(text, encoding="utf-8")
    _cli(where, "db", "migrate", "--db", "empty.db")
    t0 = time.perf_counter()
    _cli(where, "run", "wf.yaml", "--db", "s/r.db")
    wall = time.perf_counter() - t0
    raw = sqlite3.connect(where / "s" / "r.db")
    try:
        columns = [(f"largest {name} (B)", int(n or 0)) for name, n in raw.execute(_COLUMNS)]
    finally:
        raw.close()
    empty, after = (where / "empty.db").stat().st_size, (where / "s" / "r.db").stat().st_size
    return [
        ("content written (B)", size),
        ("empty ledger (B)", empty),
        ("ledger after the run (B)", after),
        ("ledger growth (B)", after - empty),
        *columns,
        ("artifact blob bytes (B)", _blob_bytes(where / "s" / "artifacts")),
        ("run wall time (s)", round(wall, 2)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-large-value-") as tmp:
        rows = measure(args.mib, Path(tmp))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>14,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

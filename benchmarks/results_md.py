"""Render the suite's collected figures as ``benchmarks/RESULTS.md``.

Invariants: every number printed comes from this run's figures (nothing hard-coded but the
targets and the prose that explains what is measured); a figure with fewer runs than asked,
a capped run, a failed module or an unavailable peer is said in so many words; targets are
compared on medians, and a miss states by how much.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from results_figures import Figures, fmt
from results_targets import misses_section, targets_section

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------- floors


def floor_of(name: str, figs: Figures) -> tuple[float | None, str]:
    """The machine floor an agentctl figure is compared with, and how it is composed."""
    commit = figs.median("sqlite_commit")
    # The effect chains take no spin before parking (ADR 0014): their floors use the parked
    # round trip where this run measured it.
    rtt = figs.median("frame_round_trip_parked") or figs.median("frame_round_trip")
    spawn = figs.median("spawn_true")
    if commit is None:
        return None, ""
    if name.startswith("pure_chain_") and not name.endswith(
        ("_rate", "_wall", "_load", "_compile")
    ):
        return commit, "1 commit"
    replay = figs.median("memory_step_sql_replay")
    if name.startswith("effect_chain_memory") and replay is not None:
        return replay, "the step's own SQL replayed, no agentctl code, measured"
    if name.startswith("effect_chain_memory"):
        return commit, "1 commit"
    bare_write = figs.median("write_chain_bare")
    if name.startswith("effect_chain_write") and bare_write is not None:
        return bare_write, "bare write chain: 2 commits + 1 round trip + 2 durable files, measured"
    new_file = figs.median("durable_new_file")
    if name.startswith("effect_chain_write") and rtt is not None and new_file is not None:
        return 2 * commit + rtt + 2 * new_file, "2 commits + 1 round trip + 2 durable files"
    bare_shell = figs.median("shell_chain_bare")
    if name.startswith("effect_chain_shell") and bare_shell is not None:
        # Measured whole: the composed sum below leaves out how the parts' wake-ups overlap.
        return bare_shell, "bare shell chain: 1 commit + 1 round trip + 1 spawn, measured"
    if name.startswith("effect_chain_shell") and rtt is not None and spawn is not None:
        return commit + rtt + spawn, "1 commit + 1 round trip + 1 spawn"
    ping_pong = figs.median("wire_ping_pong")
    if name in ("frame_round_trip", "frame_round_trip_parked") and ping_pong is not None:
        return ping_pong, "bare trio ping-pong"
    if name.startswith("foreach_") and name.endswith("_per_child"):
        return commit / 64, "1 commit per batch of 64"
    if name.startswith("sleep_batch_"):
        ideal = re.search(r"ideal ([\d.]+) s", figs.by_name[name].get("note", ""))
        return (float(ideal.group(1)), "one sleep") if ideal else (None, "")
    return None, ""


def table(figs: Figures, names: list[str]) -> list[str]:
    rows = [
        "| figure | unit | runs | min | median | max | floor (what) | × floor | note |",
        "|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for name in names:
        fig = figs.get(name)
        if fig is None:
            continue
        floor, what = floor_of(name, figs)
        ratio = fig["median"] / floor if floor else None
        floor_txt = f"{fmt(floor, 4)} ({what})" if floor else "—"
        rows.append(
            f"| `{name}` | {fig['unit']} | {fig['runs']} | {fmt(fig['min'])} | "
            f"**{fmt(fig['median'])}** | {fmt(fig['max'])} | {floor_txt} | "
            f"{fmt(ratio, 2) + '×' if ratio else '—'} | {fig.get('note', '')} |"
        )
    return rows


# --------------------------------------------------------------------------- sections


def peers_section(report: dict[str, Any], figs: Figures) -> list[str]:
    peers = next((r for r in report["results"] if r.get("benchmark") == "peers"), None)
    lines = ["## Peers: the same N-step durable chain, same process, same disk, interleaved", ""]
    if peers is None or "error" in peers:
        lines.append(f"The peer benchmark did not run: {peers and peers.get('error')}")
        return lines
    lines += [
        f"N = {peers['n']} steps per run; versions: "
        + ", ".join(f"{k} {v}" for k, v in peers["versions"].items())
        + ".",
        "",
    ]
    for name, why in peers.get("unavailable", {}).items():
        lines.append(f"- **{name} unavailable here**: {why}")
    base = figs.median("durable_step_agentctl_effect")
    lines += [
        "",
        "| system | runs | min | median | max ms/step | peer ÷ agentctl effect step "
        "| rows kept/step | bytes on disk/step | journal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for fig in peers["figures"]:
        x = fig["extra"]
        ratio = fig["median"] / base if base else None
        system = fig["name"].removeprefix("durable_step_")
        lines.append(
            f"| `{system}` | {fig['runs']} | {fmt(fig['min'])} | "
            f"**{fmt(fig['median'])}** | {fmt(fig['max'])} | {fmt(ratio, 2)} | "
            f"{x.get('rowsPerStep', '—')} | {x.get('bytesPerStep', '—')} | "
            f"{x.get('journalMode', '—')} |"
        )
    lines += ["", "Rows present per table after one run:", ""]
    for fig in peers["figures"]:
        rows = fig["extra"].get("rowsByTable", {})
        n = peers["n"]
        per = ", ".join(f"{t} {c / n:.2f}" for t, c in rows.items())
        lines.append(f"- `{fig['name'].removeprefix('durable_step_')}` (per step): {per}")
    return [*lines, "", PERSISTS]


PERSISTS = """What each system makes durable per step (so the ratios can be read fairly):

- **agentctl, effect step** (`builtin.memory.write` chain, the like-for-like row): one
  `BEGIN IMMEDIATE` transaction per step (WAL mode, `synchronous=FULL`: one WAL fsync) holds
  the step's effect row `requested` + `started` — durable before the effect runs — together
  with the previous step's outcome, the task's state, output, digests, the working-memory
  delta, its audit events and one checkpoint (the pipelined commit, ADR 0011). So a confirmed
  outcome is durable before the next effect runs, and a crash leaves at most the one started
  effect uncertain. The rows-by-table line below shows the audit events per step.
- **agentctl, pure step** (`builtin.assign` chain): the task's state, output, input digest,
  output digest and an audit event; deterministic results are staged and committed in groups
  (one checkpoint per group), because a resume re-derives any pure result lost in a crash.
  This is cheaper *by design*, not like for like with a peer's arbitrary step.
- **DBOS Transact** (SQLite system database, its default rollback journal, `synchronous=FULL`):
  one `operation_outputs` row per step (workflow id, step number, function name, pickled
  output, timestamps), inserted in its own transaction before the workflow continues; plus a
  few rows per workflow (status, input, output).
- **LangGraph + SqliteSaver** (WAL, `synchronous=FULL`): per superstep a `checkpoints` row
  (serialised channel values + metadata) and `writes` rows (one per channel write), written
  before the next superstep with `durability="sync"`; `durability="async"` (the default)
  overlaps that write with the next step, so a crash may lose the last step.

"rows kept/step" counts rows present after one run (agentctl updates each task's one
`task_states` row in place); "bytes on disk/step" is the database plus WAL/journal size after
one run, divided by N (for tiny N it is dominated by fixed schema pages)."""


def profile_section(report: dict[str, Any]) -> list[str]:
    prof = next((r for r in report["results"] if r.get("benchmark") == "profile"), None)
    lines = ["## Profile of the hottest paths (pyinstrument)", ""]
    if prof is None or "error" in prof or prof.get("unavailable"):
        why = prof and (prof.get("error") or prof.get("unavailable"))
        return [*lines, f"The profile did not run: {why}"]
    lines.append(
        "Ledger calls inlined into the coordinator thread for the profile (see "
        "`bench_profile.py`). *Attributed* = time charged to the innermost agentctl function "
        "on the stack (its library calls included); *via* = its agentctl caller."
    )
    for name, p in prof["profiles"].items():
        lines += [
            "",
            f"### `{name}` — {fmt(p['seconds'])} s profiled",
            "",
            "| share | attributed to | via |",
            "|---:|---|---|",
        ]
        for row in p["attributed"][:10]:
            lines.append(
                f"| {row['share'] * 100:.1f}% | `{row['function']}` | `{row.get('via', '')}` |"
            )
        lines += ["", "| share | self time in |", "|---:|---|"]
        for row in p["selfTime"][:8]:
            lines.append(f"| {row['share'] * 100:.1f}% | `{row['function']}` |")
        lines += [
            "",
            "<details><summary>call tree</summary>",
            "",
            "```",
            p["tree"],
            "```",
            "",
            "</details>",
        ]
    return lines


FLOORS = (
    r"(sqlite_commit|ledger_task_commit|fsync|durable_new_file|frame_round_trip(_parked)?"
    r"|wire_ping_pong"
    r"|shell_effect_worker|shell_chain_bare|spawn_true|memory_step_sql_replay|write_chain_bare"
    r"|python_pass|check_cold_start|run_one_task_cold)"
)
RSS = r"(coordinator_peak_rss|crash_run)_.*"


NOT_MEASURED = "No figure in this run: the module that measures it was skipped (see the top)."
SECTIONS = [
    ("Floors of this machine", FLOORS),
    ("Pure chain (sequential builtin.assign)", r"pure_chain_.*"),
    ("Effect chain (sequential effects)", r"effect_chain_.*"),
    ("Parallel batch and fan-out (maxConcurrency 64)", r"(sleep_batch|foreach)_.*"),
    ("Memory: coordinator peak RSS (kernel high-water mark, wait4)", RSS),
    ("Recovery: SIGKILL, then resume", r"resume_.*"),
    ("Model calls: concurrent agents against a 1 s provider", r"provider_batch_.*"),
    ("Scale-out: serve processes on PostgreSQL", r"(pg_commit_floor|scaleout_.*)"),
]


def _header(report: dict[str, Any]) -> list[str]:
    """Where and how the figures were taken, then any module that failed or was skipped."""
    meta = report["meta"]
    m = meta["machine"]
    out = [
        "# agentctl benchmark results",
        "",
        f"Generated by `{meta['command']}` (benchmarks/run_all.py) on {meta['date']}, "
        f"commit {meta['commit']}; the whole suite took {meta['suiteSeconds']:.0f} s.",
        "",
        f"- machine: {m.get('cpu', '?')}, {m.get('cpus')} CPUs, {m.get('memoryGiB', '?')} GiB; "
        f"{m.get('platform')}; Python {m.get('python')}; SQLite {m.get('sqlite')}",
        f"- disk (every database of this run): {meta.get('disk', '?')}",
        f"- load average before / after: {meta['loadBefore']} / {meta['loadAfter']} "
        "(other work on the machine shows up as spread between min and max)",
        "- each figure: min / **median** / max over its runs, each run on a fresh database; "
        "ratios and targets use medians",
        "",
    ]
    if meta.get("tiny"):
        out += ["**TINY RUN — toy sizes to prove the suite runs; these are not results.**", ""]
    errors = [r for r in report["results"] if r.get("error")]
    for r in errors:
        out.append(f"- **{r['benchmark']} failed**: {r['error']}")
    for r in report["results"]:
        if r.get("skipped"):  # e.g. no PostgreSQL to measure against: say so, once, here
            out.append(f"- **{r['benchmark']} not measured in this run**: {r['skipped']}")
    return out if out[-1] == "" else [*out, ""]


def render(report: dict[str, Any]) -> str:
    figs = Figures(report)
    out = _header(report)
    out += [*targets_section(figs), ""]
    for title, pattern in SECTIONS:
        names = [n for n in figs.by_name if re.fullmatch(pattern, n)]
        rows = table(figs, names) if names else [NOT_MEASURED]
        out += [f"## {title}", "", *rows, ""]
        out += SECTION_NOTES.get(title, [])
    out += [*peers_section(report, figs), ""]
    out += [*_fragment("commits_per_effect.md"), ""]
    out += [*misses_section(figs, _gaps()), ""]
    out += [*FIXES, ""]
    out += [*profile_section(report), ""]
    return "\n".join(out)


def _fragment(name: str) -> list[str]:
    """A hand-written section kept beside the benchmarks (derived from the code, not timed)."""
    path = HERE / name
    return path.read_text(encoding="utf-8").rstrip().splitlines() if path.exists() else []


def _gaps() -> dict[str, str]:
    """``gaps.md``: for a goal this run may miss, the profile and the floor that block it.

    Each entry is a ``- <words of the goal's name>: <explanation>`` line.
    """
    found: dict[str, str] = {}
    for line in _fragment("gaps.md"):
        key, sep, text = line.removeprefix("- ").partition(": ")
        if line.startswith("- ") and sep:
            found[key] = text
    return found


# What the profiles led to, in the order the changes landed (see docs/adr/).
FIXES = [
    "## Fixes the profiles led to",
    "",
    "1. **Ready tasks tracked incrementally, no per-batch snapshot copies.** The first driver "
    "rescanned the plan and copied every output for each batch: quadratic in the number of "
    "tasks. Unfinished-need counters and read-only views made scheduling linear.",
    "2. **Consecutive pure batches share one commit** (ADR 0003): a 1,000-task pure chain went "
    "from 3.2 s to 1.0 s end to end; pure work is re-derivable, so it is staged (≤ 512) and "
    "always committed before any effect is recorded.",
    "3. **libyaml composes the YAML node tree** when the source cannot hold anchors or "
    "aliases; PyYAML's pure-Python scanner was ~60% of a large workflow's load.",
    "4. **Two commits per effect instead of four:** `requested` and `started` share one "
    "transaction (the request still commits before dispatch), a lone effect's outcome commits "
    "with its task's completion, and concurrent outcomes group-commit.",
    "5. **The default output-contract fingerprint is computed once** instead of one canonical "
    "JSON digest per task.",
    "",
    "6. **One commit per effect step** (ADR 0011): a lone effect's outcome and its task's "
    "completion ride in the transaction that records the next effect's `requested`/`started` "
    "rows; short protocol transactions run on the trio thread when the connection is free (a "
    "thread hop cost about half a commit); an artifact's ingestion is one transaction without "
    "the `tmp/` directory fsync. Counts per kind: the next section.",
    "7. **Start-up does only what the command needs:** the ~110 state-group commands are built "
    "only when the command line may name one, the collector is off while importing, state "
    "commands never build the workflow models, a new ledger is built aside and renamed into "
    "place (2 fsyncs instead of 18), a run without worker effects starts no worker.",
    "8. **Frames skip the scheduler when the kernel is ready** (non-blocking socket I/O, the "
    "send lock only when a frame must wait), wire validators are built on first use, and "
    "process effects share a worker (a second worker's start-up cost more than it saved here).",
    "9. **Live state sized to what runs:** an output stays in memory only while an unfinished "
    "reader needs it and is read back in one batch; a run's workflow and plans moved out of "
    "the `runs` row (schema v12), which every batch commit rewrote whole (16 MB at 10,000 "
    "tasks); resume reads only the live task rows.",
    "10. **Audit without re-reads:** an effect's status change is audited from the columns "
    "its UPDATE returns; an effect's id and digest are computed once.",
    "11. **The artifact store's lock on `fcntl.flock`** (ADR 0016): each take of filelock's "
    "lock cost a `builtin.write` step ~0.5 ms of coordinator CPU; the step went from 7.7 "
    "times its measured floor to 4.8–5.6 (the runs of 2026-12-06 18:17, 19:49 and 20:51).",
    "",
    "Still open, in the order of their cost: see *Where a goal is missed* above.",
]


SECTION_NOTES = {
    "Scale-out: serve processes on PostgreSQL": [
        "300 queued runs of 3 `builtin.memory.write` effects each, drained by 1, 2 or 3 "
        "`agentctl serve --exit-when-idle --max-runs 4` processes on this machine (start-up "
        "included) against the PostgreSQL server named by `$AGENTCTL_BENCH_PG_URL`; "
        "`pg_commit_floor` is one single-row INSERT + COMMIT (`synchronous_commit = on`) on "
        "one connection. With no server reachable the benchmark skips itself, and the top of "
        "this file says why. This machine has 2 cores shared by the server and every `serve`, "
        "so more processes add contention, not capacity.",
        "",
    ],
    "Pure chain (sequential builtin.assign)": [
        "`_inprocess`: the clock runs around `api.start_run` only (compiled before). `_cli`: "
        "`agentctl run` as a fresh process, end to end (start-up, YAML, compile, run, output). "
        "Pure results are committed in groups, so `× floor` can fall below 1.",
        "",
    ],
    "Recovery: SIGKILL, then resume": [
        "A chain slightly longer than the kill point is SIGKILLed (`agentctl run` subprocess) "
        "once the database shows the kill point's count of succeeded tasks, then resumed "
        "in-process with `api.resume`. `_to_first_task` is the recovery overhead (WAL recovery, "
        "lease, recompile, rebuilding live state); `_to_completion` adds the remaining tasks.",
        "",
    ],
    "Model calls: concurrent agents against a 1 s provider": [
        "One-call agents (OpenAI Responses wire format, local server answering each call after "
        "the delay) at maxConcurrency = the agent count; in-process, so the clock includes "
        "starting the worker pool and each worker's first import of the provider SDK, which "
        "come before the first request and are not overlapped with it.",
        "",
    ],
}

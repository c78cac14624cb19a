"""The goals of issue 15 as targets: each computed from this run's medians, with its verdict.

Invariants: a target is a ratio or a figure measured in the same run as what it is compared
with (never a number from another day); a figure that did not run says "not measured"; a miss
states by how much and, in the misses section, what this run's figures say holds it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from results_figures import Figures, fmt


@dataclass(frozen=True)
class Target:
    what: str
    value: float | None
    goal: float | None
    cmp: str  # "<=" or ">="
    unit: str
    why_missed: str = ""
    # What this host's floor for the figure measured in the same run — the same work with no
    # agentctl code (the step's own SQL replayed, the bare write or shell chain) — on the
    # goal's scale; None where no such floor is measured.
    floor: float | None = None


def _sum(*parts: float | None) -> float | None:
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _ratio(
    figs: Figures,
    what: str,
    name: str,
    base: str,
    goal: float,
    cmp: str = "<=",
    floor: str | None = None,
) -> Target:
    """A target on the ratio of two medians of this run (``floor``: the figure of the same
    work with no agentctl code, divided by the same ``base``)."""
    bare = None if floor is None else figs.ratio(floor, base)
    return Target(what, figs.ratio(name, base), goal, cmp, "×", floor=bare)


def _at_most(figs: Figures, what: str, name: str, goal: float, unit: str) -> Target:
    """A target that a median of this run stays at or under ``goal``."""
    return Target(what, figs.median(name), goal, "<=", unit)


def _peer_targets(figs: Figures) -> list[Target]:
    """How much slower the peers are than agentctl per durable effect step."""
    return [
        _ratio(
            figs,
            "LangGraph sync ÷ agentctl per durable effect step",
            "durable_step_langgraph_sync",
            "durable_step_agentctl_effect",
            1.5,
            ">=",
        ),
        _ratio(
            figs,
            "DBOS ÷ agentctl per durable effect step",
            "durable_step_dbos",
            "durable_step_agentctl_effect",
            3.0,
            ">=",
        ),
    ]


def effect_targets(figs: Figures) -> list[Target]:
    commit = figs.median("sqlite_commit")
    shell_goal = _sum(_scaled(commit, 2), figs.median("spawn_true"), 0.5)
    return [
        _ratio(
            figs,
            "effect step, memory.write chain ÷ bare WAL+FULL commit",
            "effect_chain_memory_1000_inprocess",
            "sqlite_commit",
            2.5,
            floor="memory_step_sql_replay",
        ),
        *_peer_targets(figs),
        _ratio(
            figs,
            "builtin.write chain ÷ commit",
            "effect_chain_write_1000_inprocess",
            "sqlite_commit",
            4.0,
            floor="write_chain_bare",
        ),
        Target(
            "shell chain (goal: 2 commits + 1 spawn + 0.5 ms)",
            figs.median("effect_chain_shell_1000_inprocess"),
            shell_goal,
            "<=",
            "ms",
            floor=figs.median("shell_chain_bare"),
        ),
        _at_most(figs, "coordinator ↔ worker frame round trip", "frame_round_trip", 0.1, "ms"),
    ]


def _sleep_batch_beyond_one_task(figs: Figures) -> float | None:
    """The 64-sleep CLI batch less a one-task run's cost, measured or derived."""
    beyond = figs.median("sleep_batch_64_cli_beyond_one_task")
    if beyond is None:
        one = _scaled(figs.median("run_one_task_cold"), 1 / 1000)
        beyond = _sum(figs.median("sleep_batch_64_cli"), _scaled(one, -1))
    return beyond


def _cold_start_targets(figs: Figures) -> list[Target]:
    """What a fresh `agentctl` process costs against a bare Python start."""
    return [
        _ratio(
            figs,
            "`agentctl run` of a one-task pure workflow ÷ `python -c pass`",
            "run_one_task_cold",
            "python_pass",
            12.0,
        ),
        _ratio(
            figs, "`agentctl check` cold ÷ `python -c pass`", "check_cold_start", "python_pass", 8.0
        ),
        _at_most(
            figs,
            "1,000-task pure chain through the CLI, per task",
            "pure_chain_1000_cli",
            0.3,
            "ms",
        ),
    ]


def _scale_targets(figs: Figures) -> list[Target]:
    """Wide batches, memory, recovery and concurrent model calls."""
    rss = figs.largest(r"coordinator_peak_rss_(\d+)")
    return [
        Target(
            "64 × `sleep 0.5` at maxConcurrency 64 (CLI), beyond a one-task run",
            _sleep_batch_beyond_one_task(figs),
            0.65,
            "<=",
            "s",
        ),
        Target(
            f"coordinator peak RSS (`{rss['name']}`)" if rss else "coordinator peak RSS",
            rss and float(rss["median"]),
            120.0,
            "<=",
            "MB",
        ),
        _at_most(
            figs,
            "resume of a 10,000-task run to completion",
            "resume_10000_to_completion",
            1.0,
            "s",
        ),
        _at_most(
            figs,
            "8 agents × 1 s model call wall (issue 12)",
            "provider_batch_8_inprocess",
            2.0,
            "s",
        ),
    ]


def start_targets(figs: Figures) -> list[Target]:
    return [*_cold_start_targets(figs), *_scale_targets(figs)]


def targets(figs: Figures) -> list[Target]:
    return [*effect_targets(figs), *start_targets(figs)]


def verdict(t: Target) -> str:
    if t.value is None or t.goal is None:
        return "not measured"
    ok = t.value <= t.goal if t.cmp == "<=" else t.value >= t.goal
    if ok:
        return "meets"
    if t.cmp == "<=":
        missed = (
            f"**misses** by {fmt(t.value - t.goal)} {t.unit} ({fmt(t.value / t.goal, 2)}× the goal)"
        )
        if t.floor is not None and t.floor > t.goal:
            return f"{missed}; **floor-blocked**: the floor is above the goal"
        return missed
    return f"**misses**: {fmt(t.value, 2)}× where {fmt(t.goal, 2)}× is wanted"


def targets_section(figs: Figures) -> list[str]:
    lines = [
        "## Goals of issue 15 (medians of this run; reported, never asserted in tests)",
        "",
        "| figure | measured | goal | floor (no agentctl code) | verdict |",
        "|---|---:|---:|---:|---|",
    ]
    for t in targets(figs):
        floor = "—" if t.floor is None else f"{fmt(t.floor)} {t.unit}"
        lines.append(
            f"| {t.what} | {fmt(t.value)} {t.unit} | {t.cmp} {fmt(t.goal, 2)} {t.unit} | "
            f"{floor} | {verdict(t)} |"
        )
    lines += [
        "",
        "The floor is the same work measured in this run with no agentctl code: for memory.write "
        "the step's own statements replayed by `sqlite3` alone (`memory_step_sql_replay`), for "
        "builtin.write and the shell chain the bare chains of the floors table "
        "(`write_chain_bare`, `shell_chain_bare`). A goal below its floor cannot be met on this "
        "host by any code: the verdict says **floor-blocked**.",
    ]
    return lines


def misses_section(figs: Figures, why: dict[str, str]) -> list[str]:
    """For each missed goal: by how much, and the explanation recorded for it (``why``)."""
    lines = ["## Where a goal is missed, and what holds it back", ""]
    for t in targets(figs):
        v = verdict(t)
        if v.startswith("**misses"):
            reason = next((text for key, text in why.items() if key in t.what), "")
            reason = reason[:1].upper() + reason[1:]
            lines.append(f"- {t.what}: {v.replace('**', '')}. {reason}".rstrip())
    if len(lines) == 2:
        lines.append("Every goal is met in this run.")
    return lines

"""The dependency arrows of DESIGN.md §4, checked on the real source.

Each test fails if a module imports something its layer must not see; the walk is static
(ast), so imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentctl"

# What each layer may import of ours (besides itself). errors.py is the shared leaf.
ALLOWED: dict[str, set[str]] = {
    "core": {"errors"},
    "ledger": {"core", "errors"},
    # envknobs: operators' tuning knobs in the environment, one parser each (a leaf like errors).
    # usercache: the wire models' stored schemas, used by workers and the coordinator's pool
    # (ADR 0013 item 8).
    "mailbox": {"core", "errors", "envknobs", "usercache"},
    "sandbox": {"core", "errors"},
    # dataclass_codes: the worker process starts as the CLI does (ADR 0013 item 6).
    # filemode: the mode a plain write gives a file (a stdlib leaf like errors), shared by the
    # workspace writes and the CLI's --write.
    "workers": {"core", "mailbox", "sandbox", "errors", "dataclass_codes", "filemode"},
    "coordinator": {"core", "ledger", "mailbox", "sandbox", "errors", "sigint", "envknobs"},
    "errors": set(),
    "envknobs": {"errors"},
    "crashpoints": set(),
    "filemode": set(),
    # core: only its pure number spelling (floattext), so output matches the original's.
    "render": {"errors", "core"},
    "cli": {
        "core",
        "ledger",
        "coordinator",
        "render",
        "errors",
        "__init__",
        "clikit",
        "cli_state",
        "cli_recovery",
        "cli_queue",
        "cli_vars",
        "cli_docs",
        "cli_packs",
        "packsource",
        "cli_memory",
        "cli_providers",
        "cli_argv",
        "cli_guard",
        "cli_doctor",
        "cli_explain",
        "cli_housekeeping",
        "cli_completion",
        "cli_encryption",
        "cli_commands",
        "cli_options",
        "cli_interactive",
    },
    # After the SIGINT guard: the global flags, the hand-parsed hot commands, else typer.
    "cli_main": {"cli", "cli_fast", "cli_argv", "clikit", "render", "errors", "coordinator"}
    | {"envknobs"}
    | {"sigint"}
    | {"packsource", "__init__"},
    "cli_fast": {"cli_commands", "clikit", "render", "errors"},
    # The bodies of check and run, shared by typer's commands and cli_fast.
    "cli_commands": {"clikit", "render", "errors", "cli_vars", "coordinator", "core"}
    | {"cli_interactive"},
    # --interactive: a paused run's approvals asked for at the terminal, then recorded.
    "cli_interactive": {"render", "errors", "ledger", "coordinator"},
    "cli_options": {"clikit"},  # typer's option types shared by several commands
    # The global flags, taken out of argv before typer parses the rest.
    "cli_argv": {"render", "errors"},
    # Each typer command's raw option tokens, checked before click parses them.
    "cli_guard": {"cli_argv", "clikit", "errors"},
    # Shell completion: typer's, with the global options cli_argv takes out of argv.
    "cli_completion": {"cli_argv"},
    "clikit": {"render", "errors", "core"},
    "cli_inspect": {"clikit", "render", "errors", "coordinator", "core", "cli_report"}
    | {"cli_options"}
    | {"cli_runview", "cli_effectview"},
    # The human views of effects and reconciliations (JSON data in, text out).
    "cli_effectview": {"render", "core", "cli_runview"},
    # Human and HTML views of a stored run (read models come from ledger.report).
    "cli_runview": {"clikit", "render", "errors", "core", "ledger"},
    "cli_report": {"clikit", "render", "errors", "core", "ledger", "coordinator"}
    | {"__init__", "cli_runview", "cli_report_svg", "cli_docs"},
    "cli_report_svg": {"render", "errors", "core", "ledger", "cli_runview"},
    "cli_recovery": {"clikit", "render", "errors", "coordinator", "core", "cli_vars"}
    | {"cli_options", "cli_commands", "cli_planview"},
    # The human views of recovery plans and outcomes (JSON data in, text out).
    "cli_planview": {"render", "core"},
    "cli_vars": {"clikit", "errors", "core", "packsource", "cli_schemacache"},
    # The workflow models' core schema kept between processes (a private pickle).
    "cli_schemacache": {"core", "errors", "usercache"},
    # The run queue's commands (they share run's options and compiling).
    "cli_queue": {"clikit", "render", "errors", "coordinator", "core", "cli_options"}
    | {"cli_commands"},
    # Packs: reading sources, archives and the lock file (decisions live in core/packs).
    "packsource": {"clikit", "errors", "core"},
    "cli_packs": {"clikit", "render", "errors", "core", "packsource", "cli_docs"},
    "cli_docs": {"clikit", "render", "errors", "core", "coordinator", "cli_vars", "packsource"}
    | {"cli_options", "filemode"},
    "cli_providers": {"clikit", "render", "core", "coordinator", "cli_vars"} | {"cli_options"},
    "cli_state": {"clikit", "render", "errors", "ledger", "coordinator"}
    | {"cli_options", "cli_stateview"},
    "cli_memory": {"clikit", "render", "errors", "ledger", "core", "cli_state"}
    | {"cli_options", "cli_stateview"},
    # The human views of the state commands (JSON data in, text out).
    "cli_stateview": {"render", "core"},
    # doctor (ready to run here?), gc and completion: operator tools over a workflow or a ledger.
    "cli_doctor": {"clikit", "render", "coordinator", "core", "cli_vars"} | {"cli_options"},
    # explain: the variable origins of a compiled workflow (pure core), no state.
    "cli_explain": {"clikit", "render", "core", "cli_vars", "cli_options"},
    "cli_housekeeping": {"clikit", "render", "errors", "ledger", "core", "cli_state", "__init__"}
    | {"cli_options"},
    # db encryption inventory|enable|rotate: the ledger's column encryption (ADR 0010).
    "cli_encryption": {"clikit", "render", "ledger", "cli_state"} | {"cli_options"},
    "__main__": {"entry"},
    # The process entry point: the SIGINT guard around importing the CLI.
    "entry": {"cli_main", "render", "errors", "dataclass_codes", "regex_codes", "sigint"}
    | {"findlib_store"},
    # Whether a SIGINT arrived (standard library only).
    "sigint": set(),
    # Start-up caches in the user's cache directory (private files only).
    "usercache": set(),
    "dataclass_codes": {"usercache"},
    "regex_codes": {"usercache"},
    "findlib_store": {"usercache"},
    "__init__": set(),
}

# Foreign modules the pure core must never touch: no I/O, no clocks, no randomness.
CORE_FORBIDDEN = {
    "trio",
    "sqlite3",
    "sqlite_utils",
    "httpx",
    "psutil",
    "cloudpickle",
    "typer",
    "rich",
    "os",
    "time",
    "random",
    "subprocess",
    "socket",
    "shutil",
    "tempfile",
    "threading",
    "uuid",
    "signal",
    "asyncio",
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append(("." * node.level + (node.module or ""), node.lineno))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_forbidden_arrow(path: Path) -> None:
    layer = _layer(path)
    allowed = ALLOWED.get(layer)
    assert allowed is not None, f"{path}: layer {layer!r} has no entry in the layering table"
    for name, line in _imports(path):
        if name.startswith("."):
            continue  # relative imports stay inside the module's own package
        top, _, rest = name.partition(".")
        if top == "agentctl":
            target = rest.split(".")[0] if rest else "__init__"
            assert target in (layer, "errors", "crashpoints") or target in allowed, (
                f"{path.relative_to(PACKAGE)}:{line}: layer {layer!r} must not import "
                f"agentctl.{target}"
            )
        elif layer == "core":
            assert top not in CORE_FORBIDDEN, (
                f"{path.relative_to(PACKAGE)}:{line}: core must stay pure but imports {top}"
            )


def test_table_covers_every_layer() -> None:
    layers = {_layer(p) for p in SOURCES}
    assert layers <= set(ALLOWED), layers - set(ALLOWED)

"""The process entry point: a guard that exists before anything heavy is imported.

Invariants:
- SIGINT at any moment gives exit 130 and an error (an envelope with ``--output json``),
  never a traceback — including while ``agentctl.cli`` and its dependencies (typer, rich,
  pydantic) are still being imported, which is most of a short command's life;
- this module imports only the standard library at the top, and ``main`` first defers SIGINT
  (a flag, checked once the imports are done), so the guard is in place within the first
  moments of the interpreter running our code; importing this module changes no handler;
- once the outcome is decided, ``ignore_interrupts`` makes it final, and a stdout closed by
  the reader (``agentctl runs list | head -0``) is reported on stderr, not as a crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from agentctl.render import Settings

BROKEN_PIPE_EXIT = 4  # spec/cli.md §2: "other runtime error"


_interrupted = False


def _defer(_signum: int, _frame: object) -> None:
    """SIGINT while importing: remember it; raising mid-import would leave half-built modules."""
    global _interrupted
    _interrupted = True


def main() -> NoReturn:
    """``agentctl`` / ``python -m agentctl``."""
    try:
        signal.signal(signal.SIGINT, _defer)
        from agentctl.cli import main as cli_main

        # From here a SIGINT raises KeyboardInterrupt, which cli.main turns into exit 130.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if _interrupted:
            raise KeyboardInterrupt
        cli_main()
    except KeyboardInterrupt:
        _interrupted_at_startup(sys.argv[1:])


def ignore_interrupts() -> None:
    """From here on SIGINT is ignored: the outcome is decided and is being written."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted_at_startup(args: list[str]) -> NoReturn:
    ignore_interrupts()
    from agentctl.errors import CancelledRunError
    from agentctl.render import Settings, emit_error

    settings = Settings()
    if _wants_json(args):
        settings.output = "json"
    emit_error(CancelledRunError("interrupted (SIGINT) while starting"), settings)
    sys.exit(CancelledRunError.exit_code)


def _wants_json(args: list[str]) -> bool:
    """The ``--output`` sniff of ``cli`` without importing it (it is what was interrupted)."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        value = args[i + 1] if arg == "--output" and i + 1 < len(args) else None
        if arg.startswith("--output="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return value in ("json", "jsonl")
    return False


def report_closed_stdout(settings: Settings) -> int:
    """stdout's reader went away: say so on stderr and exit non-zero, quietly otherwise."""
    from agentctl.errors import AgentctlError
    from agentctl.render import emit_error

    # Point stdout at /dev/null so the interpreter's final flush does not fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    message = "stdout was closed by its reader before the output was written (broken pipe)"
    with contextlib.suppress(OSError):
        emit_error(AgentctlError(message), settings)
    return BROKEN_PIPE_EXIT

"""The process entry point: a guard that exists before anything heavy is imported.

Invariants:
- SIGINT (or SIGTERM, ``sigint.forward_term``) at any moment gives exit 130 and an error
  (an envelope with ``--output json``), never a traceback — including while
  ``agentctl.cli_main`` and its dependencies (typer, pydantic, the workflow models) are still
  being imported, which is most of a short command's life;
- this module imports only the standard library at the top, and ``main`` first defers SIGINT
  (a flag, checked once the imports are done), so the guard is in place within the first
  moments of the interpreter running our code; importing this module changes no handler;
- the methods ``@dataclass`` generates are compiled once per user and interpreter, not in
  every process (``dataclass_codes``, installed before the CLI is imported), and so are the
  regular expressions modules compile when imported (``regex_codes``, installed first);
- the cyclic garbage collector is off while the program starts (``main``): importing the
  CLI creates ~10^5 long-lived objects (modules, classes, validators), and collecting them
  over and over finds nothing to free; ``clikit.collect_from_now`` turns it back on,
  with that heap frozen, before a command does its own work;
- ``cli_main.main`` makes a decided outcome final (``clikit.ignore_interrupts``) and reports a
  stdout closed by its reader (``clikit.report_closed_stdout``); once it has, the process ends
  without finalizing the interpreter (``_exit_now``: atexit handlers and a flush, then
  ``os._exit``), since tearing down every module was a third of a one-task run.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

from agentctl.sigint import (
    defer,
    forward_term,
    install_unraisable_hook,
    raise_interrupt,
    received,
)

# Not ``typing.TYPE_CHECKING``: importing typing here (a few ms) would come before the guard.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> NoReturn:
    """``agentctl`` / ``python -m agentctl``."""
    try:
        signal.signal(signal.SIGINT, defer)
        signal.signal(signal.SIGTERM, forward_term)
        gc.disable()
        from agentctl.regex_codes import install as install_regex_codes

        install_regex_codes()  # before the modules compiling patterns when imported
        from agentctl.dataclass_codes import install as install_dataclass_codes

        install_dataclass_codes()  # before the ~200 dataclasses of the CLI are defined
        from agentctl.findlib_store import install as install_findlib_store

        install_findlib_store()  # before trio, which asks ctypes.util when imported
        from agentctl.cli_main import main as cli_main

        # From here a SIGINT raises KeyboardInterrupt (and is remembered), which
        # cli_main.main turns into exit 130.
        signal.signal(signal.SIGINT, raise_interrupt)
        install_unraisable_hook()  # an interrupt raised in a callback is not lost
        if received():
            raise KeyboardInterrupt
        cli_main()
    except KeyboardInterrupt:
        _interrupted_at_startup(sys.argv[1:])
    except SystemExit as done:  # cli_main's only way out: the outcome is written
        _exit_now(done)


def _exit_now(done: SystemExit) -> NoReturn:
    """End the process without tearing the interpreter down.

    Finalizing the ~600 modules of a run and every object they hold took 50-80 ms of a
    one-task ``run`` (a third of it) and frees nothing the OS does not. What finalization does
    that matters still happens: the ``atexit`` handlers (the start-up caches, telemetry
    exporters, temporary directories' finalizers) run, and stdout and stderr are flushed. Any
    doubt — a non-daemon thread still running, whose end the interpreter would wait for, a
    code that is not an int, a stream that cannot be flushed — exits the ordinary way.
    """
    import atexit
    import threading

    main_thread = threading.main_thread()
    waiting = [t for t in threading.enumerate() if t is not main_thread and not t.daemon]
    if waiting or not isinstance(done.code, int | None):
        raise done
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise done from None
    os._exit(done.code or 0)


def _interrupted_at_startup(args: list[str]) -> NoReturn:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the outcome is decided: keep it
    from agentctl.errors import CancelledRunError
    from agentctl.render import Settings, emit_error

    settings = Settings()
    if _wants_json(args):
        settings.output = "json"
    emit_error(CancelledRunError("interrupted (SIGINT or SIGTERM) while starting"), settings)
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

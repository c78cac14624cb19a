"""The ``agentctl`` process after its SIGINT guard: take the global flags, run one command,
render its one outcome or error.

Invariants:
- no traceback ever reaches a user: every failure becomes an error envelope (JSON mode) or an
  ``error: …`` block (human mode) with the exit code of spec/cli.md §2;
- ``--output``, ``--color`` and ``--verbose`` are accepted before or after the command
  (``cli_argv`` takes them out first); ``--output json`` is sniffed again for an error found
  while parsing, so even a usage error is a JSON envelope;
- the plain ``check``/``run`` command lines are run by ``cli_fast`` without importing typer;
  every other command line, and every help page, goes to typer (``cli``);
- once the outcome is decided SIGINT is ignored: an interrupt can no longer change the result
  or cut its rendering in half (an interrupt before that point is exit 130).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from agentctl.cli_argv import check_text, named_db, normalize_argv, sniff_output, top_level_flag
from agentctl.cli_fast import parse as parse_fast
from agentctl.clikit import ignore_interrupts, name_db_in_error, report_closed_stdout
from agentctl.envknobs import check_all as check_env_knobs
from agentctl.errors import AgentctlError, CancelledRunError, from_os_error, was_interrupted
from agentctl.render import LiveLines, Outcome, Settings, emit_error, emit_outcome
from agentctl.sigint import received as interrupt_received

SETTINGS = Settings()
NAMED_DB: str | None = None  # the --db this command line named (its suggestions name it too)

# SIGTERM reaches the same handlers as SIGINT (``sigint.forward_term``).
INTERRUPTED = "interrupted (SIGINT or SIGTERM) before the command finished"


def _dispatch(args: list[str], settings: Settings) -> Outcome | int:
    """The command's outcome, or the exit code of a help page."""
    fast = parse_fast(args)
    if fast is not None:
        return fast.invoke(settings)
    from agentctl.cli import run_app

    return run_app(args, settings)


def _execute(args: list[str]) -> Outcome | AgentctlError | int:
    """Parse and run the command; every failure becomes the error a user should see."""
    global SETTINGS, NAMED_DB
    try:
        check_text(args)  # before anything is read, created or written
        SETTINGS, normalized = normalize_argv(args)
        NAMED_DB = named_db(normalized)
        check_env_knobs()  # a knob set to what it does not take: exit 2 before anything runs
        # Set on every call once loaded, so an earlier call in this process never leaks in.
        if SETTINGS.offline or SETTINGS.locked or "agentctl.packsource" in sys.modules:
            from agentctl import packsource

            packsource.MODE = packsource.PackMode(SETTINGS.offline, SETTINGS.locked)
        normalized = top_level_flag(normalized)
        if SETTINGS.output != "jsonl":
            return _dispatch(normalized, SETTINGS)
        from agentctl.coordinator.events import open_event_stream

        lines = LiveLines()
        with open_event_stream(lines.write):  # the run commands' live event lines
            result = _dispatch(normalized, SETTINGS)
        return report_closed_stdout(SETTINGS) if lines.closed else result
    except AgentctlError as exc:
        if exc.exit_code == 2 and SETTINGS.output == "human":
            # The sniffed word is only used to pick the error's form; render checks it again.
            SETTINGS.output = sniff_output(args)  # type: ignore[assignment]
        return exc
    except KeyboardInterrupt:
        return CancelledRunError(INTERRUPTED)
    except OSError as exc:  # an OS failure no layer below classified: still a clear message
        return from_os_error(exc, str(exc.filename or "a file agentctl needed"))
    except Exception as exc:  # the last line of defence: report, never show a traceback
        return _unexpected(exc)
    except BaseException as exc:  # e.g. a native library's panic (pyo3's PanicException)
        if isinstance(exc, SystemExit | GeneratorExit):
            raise
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> AgentctlError:
    """An error no layer classified: the user's interrupt if one arrived (a library may have
    caught it and raised something of its own), else an internal error."""
    if was_interrupted(exc) or interrupt_received():
        return CancelledRunError(INTERRUPTED)
    if os.environ.get("AGENTCTL_DEBUG"):
        raise exc
    return AgentctlError(f"internal error: {type(exc).__name__}: {exc}")


def _render(result: Outcome | AgentctlError | int) -> int:
    """Write the one outcome or error; returns the exit code."""
    if isinstance(result, int):
        return result
    if isinstance(result, Outcome):
        emit_outcome(result, SETTINGS)
        return result.exit_code
    if NAMED_DB is not None:
        name_db_in_error(result, NAMED_DB)
    emit_error(result, SETTINGS)
    return result.exit_code


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point; never lets a traceback reach the user."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = _execute(args)
    except KeyboardInterrupt:  # landed between two statements of the handlers above
        result = CancelledRunError(INTERRUPTED)
    ignore_interrupts()
    try:
        code = _render(result)
        sys.stdout.flush()
    except BrokenPipeError:
        code = report_closed_stdout(SETTINGS)
    sys.exit(code)

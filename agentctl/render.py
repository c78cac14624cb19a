"""Rendering of command results: the JSON envelope of spec/cli.md §2 and the human view.

Invariants:
- JSON mode prints exactly one compact ``agentctl.dev/cli/v1`` envelope: a success on stdout,
  an error on stderr. Nothing else is written to stdout in JSON mode. JSONL mode is the same,
  except that commands driving a run first print one ``RunEvent`` or ``StreamEvent`` envelope
  per durable event, live, each on its own line (``write_jsonl_line``, docs/events.md).
- Human mode never writes ANSI escapes unless colour is on (``--color always``, or ``auto``
  with a terminal on stdout), and never writes a control character that came from stored
  text (a process's stderr, an operator's reason, a model's answer): each is shown as its
  escape (``\x1b``), so recorded bytes cannot clear or rewrite the operator's screen. With
  colour on, only our own SGR colour sequences pass.
- ``--verbose`` adds the indented ``data`` after a human view, but never after one that is a
  document for another program (``Outcome.document``: a completion script, a printed schema);
- ``rich`` is imported only when a human table is actually drawn, to keep start-up fast.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TextIO

from agentctl.core.floattext import respell_json_floats
from agentctl.errors import AgentctlError, Diagnostic

API_VERSION = "agentctl.dev/cli/v1"
OutputMode = Literal["human", "json", "jsonl"]
ColorMode = Literal["auto", "always", "never"]


@dataclass
class Settings:
    """The global presentation options, accepted before or after the command."""

    output: OutputMode = "human"
    color: ColorMode = "auto"
    verbose: bool = False
    # Pack resolution modes (global flags; the CLI hands them to ``packsource``).
    offline: bool = False
    locked: bool = False

    def use_color(self, stream: TextIO) -> bool:
        if self.color == "always":
            return True
        if self.color == "never":
            return False
        return bool(getattr(stream, "isatty", lambda: False)())


_STATE_COLORS = {"succeeded": "32", "failed": "31", "cancelled": "35", "paused": "33"}
_WAITING_COLOR = "33"  # waiting_for_*, retry_scheduled, running, uncertain


def paint_state(word: str, on: bool, pad: int = 0) -> str:
    """A run, task or effect state word, ``pad``-ed, coloured when ``on``. The padding goes
    outside the colour codes, so columns of coloured words stay aligned."""
    text = word.ljust(pad)
    code = _STATE_COLORS.get(word)
    if code is None and (word.startswith("waiting") or word in ("running", "uncertain")):
        code = _WAITING_COLOR
    if not on or code is None:
        return text
    return f"\x1b[{code}m{word}\x1b[0m" + text[len(word) :]


def paused_line(run_id: str) -> str:
    """What a human does next with a run paused for approvals, as commands to paste (the CLI
    adds the ``--db`` it was given: ``clikit.name_db_in_text``)."""
    return (
        f"  waiting for approval: see `agentctl approvals list {run_id}`, approve or reject,"
        f" then `agentctl resume {run_id}`"
    )


@dataclass
class Outcome:
    """What a command produced: the envelope ``kind`` and ``data``, and its exit code."""

    kind: str
    data: Any
    exit_code: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    human: Callable[[Settings], str] | None = None
    # The human view is itself a document another program reads (a completion script to
    # ``source``, a schema or migrated workflow to redirect to a file): ``--verbose`` must
    # not append the JSON record to it, or ``source <(agentctl --verbose completion bash)``
    # breaks. JSON mode is unchanged: the envelope carries the document in ``data``.
    document: bool = False


# C0 controls but tab and newline, DEL and the C1 controls (a lone \x9b is a CSI on some
# terminals). ``_WITH_SGR`` also matches a whole colour sequence, to let it pass.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_WITH_SGR = re.compile(r"\x1b\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, *, keep_colour: bool = False) -> str:
    """``text`` safe for a terminal: every control character (but tab and newline) shown as
    its escape; with ``keep_colour``, SGR colour sequences (ours, when colour is on) kept."""
    pattern = _WITH_SGR if keep_colour else _CONTROL
    return pattern.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    seen = match.group()
    return seen if len(seen) > 1 else f"\\x{ord(seen):02x}"


def dump_json(value: Any, indent: int | None = None) -> str:
    """Strict JSON text: a non-finite float (which inputs refuse, but a workflow's own YAML or
    arithmetic could still produce) is written as ``null``, never as a bare ``NaN``; a float
    is spelled as the original prints it (``0.00001``, ``1e16``: ``core.floattext``)."""
    separators = (",", ":") if indent is None else None
    try:
        text = json.dumps(
            value, separators=separators, indent=indent, ensure_ascii=False, allow_nan=False
        )
    except ValueError:  # rare: pay for the walk only when there is something to replace
        text = json.dumps(_finite(value), separators=separators, indent=indent, ensure_ascii=False)
    return respell_json_floats(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def emit_outcome(outcome: Outcome, settings: Settings) -> None:
    if settings.output in ("json", "jsonl"):
        envelope = {
            "apiVersion": API_VERSION,
            "kind": outcome.kind,
            "ok": True,
            "data": outcome.data,
            "diagnostics": [d.to_json() for d in outcome.diagnostics],
        }
        sys.stdout.write(dump_json(envelope) + "\n")
        sys.stdout.flush()
        return
    end_shown_text()
    text = outcome.human(settings) if outcome.human else default_human(outcome)
    if text:
        text = printable(text, keep_colour=settings.use_color(sys.stdout))
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    for diag in outcome.diagnostics:
        sys.stderr.write(printable(format_diagnostic(diag)) + "\n")
    if settings.verbose and outcome.human is not None and not outcome.document:
        sys.stdout.write(dump_json(outcome.data, indent=2) + "\n")
    sys.stdout.flush()


class JsonRecord(Protocol):
    def to_json(self) -> Any: ...


def stream_event_printer(settings: Settings) -> Callable[[JsonRecord], None] | None:
    """In human mode without a terminal on stderr, each fragment's text goes to stderr as it
    arrives (at a terminal the live progress view owns stderr). ``json`` prints none, and
    ``jsonl`` shows fragments through the event stream (``coordinator/events.py``)."""
    if settings.output == "human" and not sys.stderr.isatty():
        return _show_text
    return None


def write_jsonl_line(kind: str, data: Any) -> None:
    """One event line of ``--output jsonl``: a success envelope, written and flushed at once."""
    envelope = {"apiVersion": API_VERSION, "kind": kind, "ok": True, "data": data}
    envelope["diagnostics"] = []
    sys.stdout.write(dump_json(envelope) + "\n")
    sys.stdout.flush()


def silence_stdout() -> None:
    """Point stdout at /dev/null: its reader went away, and what is still written (the rest of
    the lines, the outcome, the interpreter's final flush) must not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class LiveLines:
    """The live event lines of one ``--output jsonl`` command (``write_jsonl_line``).

    A reader that goes away while a run is driven (``… | head -3``) must not stop the drive
    halfway — an effect started and never confirmed would wait for an operator: the lines
    after it go nowhere, the drive carries on to its end, and ``closed`` tells the caller to
    report the broken pipe once the command is over (docs/cli.md: exit 4)."""

    def __init__(self) -> None:
        self.closed = False

    def write(self, kind: str, data: Any) -> None:
        if self.closed:
            return
        try:
            write_jsonl_line(kind, data)
        except BrokenPipeError:
            self.closed = True
            silence_stdout()


@dataclass
class _ShownText:
    """Where the fragments shown on stderr left off: the effect whose answer left its line
    open, if one did. That line is ended before the next answer's text and before anything
    else this command writes to stderr (``end_shown_text``), so ``error:`` starts a line."""

    open_by: object = None  # an effect id; None: the last line shown is ended


_SHOWN = _ShownText()


def _show_text(record: JsonRecord) -> None:
    data = record.to_json()
    payload = data.get("payload")
    text = payload.get("text") if isinstance(payload, dict) else None
    if isinstance(text, str) and text:
        if _SHOWN.open_by not in (None, data.get("effectId")):
            sys.stderr.write("\n")  # another answer starts
        sys.stderr.write(printable(text))
        sys.stderr.flush()
        _SHOWN.open_by = None if text.endswith("\n") else data.get("effectId")


def end_shown_text() -> None:
    """End the line the fragments shown last left open (if any)."""
    if _SHOWN.open_by is not None:
        sys.stderr.write("\n")
        sys.stderr.flush()
        _SHOWN.open_by = None


def default_human(outcome: Outcome) -> str:
    return dump_json(outcome.data, indent=2)


def emit_error(error: AgentctlError, settings: Settings) -> None:
    if settings.output in ("json", "jsonl"):
        envelope = {
            "apiVersion": API_VERSION,
            "kind": "Error",
            "ok": False,
            "error": {
                "message": error.message,
                "exitCode": error.exit_code,
                "runId": error.run_id,
                "traceId": error.trace_id,
                **({"details": error.data} if error.data else {}),
            },
            "diagnostics": [d.to_json() for d in error.diagnostics],
        }
        sys.stderr.write(dump_json(envelope) + "\n")
        sys.stderr.flush()
        return
    end_shown_text()
    # A validation error's message repeats its first diagnostic's, which may quote a key.
    summary = one_line(error.message) if error.diagnostics else error.message
    lines = [f"error: {summary}"]
    lines.extend(format_diagnostic(d) for d in error.diagnostics)
    if error.run_id:
        lines.append(f"  run: {error.run_id}")
    if error.trace_id:
        lines.append(f"  trace: {error.trace_id}")
    hint = error.data.get("hint") if error.data else None
    if isinstance(hint, str):
        lines.append(f"  hint: {hint}")
    sys.stderr.write(printable("\n".join(lines)) + "\n")
    sys.stderr.flush()


def one_line(text: str) -> str:
    """``text`` with its line breaks shown as escapes: a key or value quoted from a document
    (``"x\\ny": 1``) must not break a diagnostic's layout or fake a line of its own."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def format_diagnostic(diag: Diagnostic) -> str:
    """The human form of ``diag``: a header line, then its place and help, one line each."""
    diag = replace(
        diag,
        message=one_line(diag.message),
        file=None if diag.file is None else one_line(diag.file),
        path=None if diag.path is None else one_line(diag.path),
        help=None if diag.help is None else one_line(diag.help),
    )
    text = f"{diag.severity}[{diag.code}]: {diag.message}"
    if diag.file is not None or diag.line is not None or diag.path:
        # One with no place at all (about the command line, e.g. a `--var`) has no `-->` line.
        where = diag.file or "<input>"
        if diag.line is not None:
            where += f":{diag.line}"
            if diag.column is not None:
                where += f":{diag.column}"
        text += f"\n  --> {where}"
        if diag.path:
            text += f" ({diag.path})"
    if diag.help:
        text += f"\n  help: {diag.help}"
    return text


def table(
    title: str, columns: list[str], rows: list[list[str]], settings: Settings, empty: str = ""
) -> str:
    """A rich table rendered to text; plain (no ANSI) unless colour is on. No rows is one line
    saying so (``empty``, by default ``no TITLE``), not a frame of headers around nothing."""
    if not rows:
        return (empty or f"no {title}") + "\n"
    from rich.console import Console
    from rich.table import Table

    tbl = Table(title=title, show_lines=False)
    for i, col in enumerate(columns):
        # Identifiers must stay on one line so they can be copied; prose may wrap.
        ident = i == 0 or col in ("run", "task", "effect", "approval", "digest", "endpoint")
        tbl.add_column(col, overflow="fold", no_wrap=ident)
    for row in rows:
        tbl.add_row(*row)
    color = settings.use_color(sys.stdout)
    console = Console(
        file=None,
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        width=max(160, Console().width if color else 160),
        record=True,
    )
    with console.capture() as capture:
        console.print(tbl)
    return capture.get()


class LiveProgress:
    """A live view of task progress on stderr, for a human at a terminal only.

    Shows the run id as soon as the run exists, counts per task state and the most recent
    task changes; refreshes at most ten times a second so 10,000-task runs stay cheap.
    """

    RECENT = 8

    def __init__(self, color: bool = True) -> None:
        self._color = color
        self._states: dict[str, str] = {}
        self._recent: list[tuple[str, str]] = []
        self._live: Any = None
        self._title = ""
        self._last = 0.0

    def start(self, run_id: str, trace_id: str) -> None:
        self._title = f"run {run_id}  (trace {trace_id})"
        if not self._color:
            # ``--color never`` promises no ANSI bytes at all (spec/cli.md §2): a live view
            # redraws with cursor movement and styles, so only the plain title is written —
            # and rich is not even imported.
            sys.stderr.write(self._title + "\n")
            sys.stderr.flush()
            return
        from rich.console import Console
        from rich.live import Live

        console = Console(stderr=True)
        console.print(self._title)
        self._live = Live(self._view(), console=console, auto_refresh=False, transient=True)
        self._live.start()

    def update(self, task_id: str, state: str) -> None:
        import time

        if self._live is None:  # not started, or ``--color never``: nothing is drawn
            return
        self._states[task_id] = state
        self._recent = [*self._recent[-(self.RECENT - 1) :], (task_id, state)]
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self._live.update(self._view(), refresh=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _view(self) -> Any:
        from rich.table import Table

        counts: dict[str, int] = {}
        for state in self._states.values():
            counts[state] = counts.get(state, 0) + 1
        tbl = Table(title=", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "starting")
        tbl.add_column("task")
        tbl.add_column("state")
        for task_id, state in self._recent:
            tbl.add_row(task_id, state)
        return tbl

"""The plain forms of the hot commands, ``check FILE`` and ``run FILE``, parsed without typer.

Importing typer and building its command group is about a quarter of ``agentctl check``'s
start-up, for a command line that is almost always ``check FILE`` or ``run FILE [--input …]``.

Invariants:
- ``parse`` accepts only command lines whose meaning under typer is certain: one positional
  FILE, and options of the command given each at most once (those that may repeat, any number
  of times) with a value that does not look like an option; anything else (``--help``, ``--``,
  an unknown or misspelt option, a missing value, a second FILE, a ``--timeout-seconds`` that
  is not plain decimal digits of at least 0.001 (typer's ``min``), shell completion, ``run``
  with ``$AGENTCTL_DB`` set) returns None and typer (``cli``) parses it, so every help page,
  usage error and rarely used option stays exactly typer's; a plain ``--timeout-seconds``
  gives the ``float`` click would (benchmarks and scripts pass one on every run);
- an accepted command runs the same body as its typer command (``cli_commands``), after the
  same path checks in the same order, as click runs them: the options in the order given
  (``--db`` last since ``cli_argv`` moves it to the end), then FILE, then a default ``--db``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentctl.cli_commands import RunRequest, check_outcome, run_outcome
from agentctl.clikit import (
    DEFAULT_DB,
    check_db_path,
    check_timeout,
    check_workspace,
    checked_path,
)
from agentctl.render import Outcome, Settings


@dataclass(frozen=True)
class _Grammar:
    """A command's options: those taking one value, those repeatable, the bare flags."""

    single: frozenset[str]
    repeated: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()


_VARS = frozenset({"--var", "--vars-file"})
_PLAIN_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")  # what float() reads exactly as click does
_MIN_TIMEOUT_S = 0.001  # ``cli_options.TimeoutOpt``'s min: below it typer's usage error
_GRAMMARS = {
    "check": _Grammar(single=frozenset({"--workspace"}), repeated=_VARS),
    "run": _Grammar(
        single=frozenset({"--db", "--inputs", "--inputs-file", "--timeout-seconds", "--workspace"}),
        repeated=_VARS | {"--input"},
        flags=frozenset({"--check", "--diff"}),
    ),
}


@dataclass
class FastCommand:
    """A parsed ``check`` or ``run`` command line."""

    command: str
    file: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)  # each option's name, as first given

    def invoke(self, settings: Settings) -> Outcome:
        """Run the command (its path checks first, as typer's callbacks would)."""
        paths = self._checked_paths()
        var_pairs = self.lists.get("--var")
        if self.command == "check":
            return check_outcome(paths.file, paths.vars_files, var_pairs, paths.workspace)
        assert paths.db is not None  # ``run`` always has one: given, or the default
        request = RunRequest(
            file=paths.file,
            db=paths.db,
            inputs=self.values.get("--inputs"),
            inputs_file=paths.inputs_file,
            input_pairs=self.lists.get("--input"),
            workspace=paths.workspace,
            timeout_seconds=_seconds(self.values.get("--timeout-seconds")),
            check="--check" in self.flags,
            diff="--diff" in self.flags,
            var_pairs=var_pairs,
            vars_files=paths.vars_files,
        )
        return run_outcome(request, settings)

    def _checked_paths(self) -> CheckedPaths:
        """The path options and FILE, checked in click's order: the options in the order given
        (``--db`` last, moved there by ``cli_argv``), then FILE, then ``run``'s default
        ``--db``. So a bad ``--workspace`` beside a bad FILE is reported as typer reports it."""
        found = CheckedPaths(Path())
        for name in self.order:
            found = self._checked(name, found)
        assert self.file is not None
        found = dataclasses.replace(found, file=checked_path(self.file, "workflow file"))
        if self.command == "run" and found.db is None:
            found = dataclasses.replace(found, db=check_db_path(DEFAULT_DB))
        return found

    def _checked(self, name: str, found: CheckedPaths) -> CheckedPaths:
        """``found`` with option ``name``'s value as its typer parser and callback give it."""
        if name == "--vars-file":
            files = [checked_path(p, name) for p in self.lists[name]]
            return dataclasses.replace(found, vars_files=files)
        if name == "--workspace":
            where = check_workspace(checked_path(self.values[name], name, file=False))
            return dataclasses.replace(found, workspace=where)
        if name == "--inputs-file":
            return dataclasses.replace(found, inputs_file=checked_path(self.values[name], name))
        if name == "--db":
            return dataclasses.replace(found, db=check_db_path(self.values[name]))
        return found  # not a path: nothing to check


@dataclass(frozen=True)
class CheckedPaths:
    """What a fast command's path options and FILE name, once checked as typer would."""

    file: Path
    workspace: Path | None = None
    vars_files: list[Path] | None = None
    inputs_file: Path | None = None
    db: str | None = None


def _seconds(value: str | None) -> float | None:
    return check_timeout(None if value is None else float(value))


def _plain_timeout(value: str) -> bool:
    """A ``--timeout-seconds`` value typer would take as it is: digits, at least the min."""
    return _PLAIN_SECONDS.fullmatch(value) is not None and float(value) >= _MIN_TIMEOUT_S


def parse(args: list[str]) -> FastCommand | None:
    """``args`` (global flags already taken out) as a plain ``check``/``run``, else None."""
    if not args or args[0] not in _GRAMMARS or "_AGENTCTL_COMPLETE" in os.environ:
        return None  # shell completion is typer's
    if args[0] == "run" and "AGENTCTL_DB" in os.environ:
        return None  # click reads --db from there when it is absent, by rules of its own
    grammar, parsed = _GRAMMARS[args[0]], FastCommand(args[0])
    rest = iter(args[1:])
    for arg in rest:
        if not arg.startswith("-"):
            if parsed.file is not None or not arg:
                return None  # a second positional: typer's "unexpected extra argument"
            parsed.file = arg
            continue
        name, eq, value = arg.partition("=")
        if name in grammar.flags and not eq:
            parsed.flags.add(name)
            continue
        if name not in grammar.single and name not in grammar.repeated:
            return None
        value = value if eq else next(rest, "-")
        if value.startswith("-") or (name in grammar.single and name in parsed.values):
            return None
        if name == "--timeout-seconds" and not _plain_timeout(value):
            return None  # typer's range check and float syntax, with its own messages
        if name not in parsed.order:
            parsed.order.append(name)
        if name in grammar.single:
            parsed.values[name] = value
        else:
            parsed.lists.setdefault(name, []).append(value)
    return parsed if parsed.file is not None else None

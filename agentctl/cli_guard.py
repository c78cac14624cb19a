"""What every typer command checks of its own raw option tokens before click parses them.

click reads a command line loosely where a script's mistake should be an error; ``guard``
wraps each command's ``parse_args`` so these hold for every command line (each refusal is a
``ValidationError``, exit 2, before any command body runs):

- an option that takes a value is never given one of the command's own option names as it
  (``--reason --actor alice``); ``--reason=--actor`` still means that text;
- a one-value option given twice (or by its other name, ``--status``/``--outcome``) takes the
  same value each time; a path option compares the path it names;
- a number option's value is written plainly: an integer ``[+-]?[0-9]+``, a float a decimal
  with an optional fraction and exponent. click's (pydantic's) conversion also reads
  ``1_0`` as 10 and ``' 2 '`` as 2, a value that looks like one thing silently taken as
  another. ``inf``/``nan`` spelled out pass on to the option's own finiteness check, which
  refuses them in its own words (``clikit.check_timeout``, ``serve``'s);
- ``-h``/``--help`` on a group wins over the ``--db`` ``cli_argv`` moved to the group's end:
  help is printed (exit 0) and the ``--db`` never read, so no database is opened or created.
"""

from __future__ import annotations

import os
import re
import typing
from dataclasses import dataclass
from typing import Any

from agentctl.cli_argv import twice_error
from agentctl.clikit import PATH_OPTIONS
from agentctl.errors import ValidationError

_HELP = frozenset({"-h", "--help"})
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
# Spelled-out non-finite floats: each option that takes a float refuses them itself.
_NON_FINITE = re.compile(r"[+-]?(inf|infinity|nan)", re.IGNORECASE)


def guard(command: Any) -> None:
    """Make ``command`` and its subcommands check their own options before click parses them."""
    for sub in getattr(command, "commands", {}).values():
        guard(sub)
    spec = _OptionSpec.of(command.params)
    parse, group = command.parse_args, hasattr(command, "commands")

    def parse_args(ctx: Any, args: list[str]) -> Any:
        if group:
            args = _help_over_db(args)
        if not ctx.resilient_parsing:  # shell completion parses half-typed lines
            _check_options(args, spec, group)
        return parse(ctx, args)

    command.parse_args = parse_args


@dataclass(frozen=True)
class _OptionSpec:
    """A command's option names: those taking a value, all, the one-value ones (each spelling
    → the parameter's first name, so an alias such as ``--outcome`` is ``--status``), and the
    number ones (each spelling → ``int`` or ``float``)."""

    needs_value: frozenset[str]
    names: frozenset[str]
    single: dict[str, str]
    paths: frozenset[str]  # the one-value parameters naming a file or directory
    numbers: dict[str, type]

    @classmethod
    def of(cls, params: list[Any]) -> _OptionSpec:
        takes = [p for p in params if p.param_type_name == "option" and _takes_value(p)]
        return cls(
            needs_value=frozenset(o for p in takes for o in p.opts),
            names=frozenset(o for p in params for o in (*p.opts, *p.secondary_opts)) | _HELP,
            single={o: p.opts[0] for p in takes if not p.multiple for o in p.opts},
            paths=frozenset(p.opts[0] for p in takes if p.opts[0] in PATH_OPTIONS),
            numbers={o: kind for p in takes if (kind := _number_kind(p)) for o in p.opts},
        )


def _takes_value(param: Any) -> bool:
    return param.param_type_name == "option" and not param.is_flag and not param.count


def _number_kind(param: Any) -> type | None:
    """``int`` or ``float`` if typer converts the parameter's text to one (``float | None``
    and ``list[int]`` too); ``bool``, a flag, is not a number here."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    for kind in (annotation, *typing.get_args(annotation)):
        if kind is int or kind is float:
            return kind
    return None


def _check_options(args: list[str], spec: _OptionSpec, group: bool) -> None:
    """Scan ``args`` as click will (up to ``--``; a group's, up to its subcommand's name): a
    value-taking option followed by an option name of the same command is refused, so is a
    number not written plainly, and so is a one-value option given two different values (the
    same value twice is harmless)."""
    seen: dict[str, tuple[str, str]] = {}  # parameter → (spelling, value) first given
    i = 0
    while i < len(args) and args[i] != "--":
        if group and not args[i].startswith("-"):
            return  # the subcommand: what follows is its own to check
        name, eq, inline = args[i].partition("=")
        if eq and name in spec.needs_value:
            _check_value(seen, spec, name, inline)
        elif args[i] in spec.needs_value and i + 1 < len(args):
            _refuse_option_as_value(args[i], args[i + 1], spec.names)
            _check_value(seen, spec, args[i], args[i + 1])
            i += 1  # the value: whatever it is, click takes it as the option's
        i += 1


def _check_value(
    seen: dict[str, tuple[str, str]], spec: _OptionSpec, name: str, value: str
) -> None:
    if name in spec.numbers:
        _check_number(name, value, spec.numbers[name])
    if name in spec.single:
        _once(seen, spec, spec.single[name], name, value)


def _check_number(name: str, value: str, kind: type) -> None:
    if kind is int and not _INTEGER.fullmatch(value):
        raise ValidationError(
            f"invalid value {value!r} for {name}: expected a whole number written in plain "
            "digits (such as 30), with no spaces, underscores or decimal point"
        )
    if kind is float and not (_DECIMAL.fullmatch(value) or _NON_FINITE.fullmatch(value)):
        raise ValidationError(
            f"invalid value {value!r} for {name}: expected a number written plainly (such as "
            "30, 2.5 or 1e3), with no spaces or underscores"
        )


def _refuse_option_as_value(option: str, value: str, names: frozenset[str]) -> None:
    if value in names:
        raise ValidationError(
            f"option {option} requires a value, but is followed by the option "
            f"{value} (write {option}={value} to mean that text)"
        )


def _once(
    seen: dict[str, tuple[str, str]], spec: _OptionSpec, param: str, spelled: str, value: str
) -> None:
    earlier, first = seen.setdefault(param, (spelled, value))
    same = os.path.abspath if param in spec.paths else str  # `.` and `./`: one directory
    if same(first) != same(value):
        alias = spelled if spelled != earlier else None
        raise twice_error(earlier, first, value, alias)


def _help_over_db(args: list[str]) -> list[str]:
    """A group's ``args`` without the ``--db`` ``cli_argv`` moved among its own options, when
    they ask for help (``agentctl effects --db X -h``). A group takes no ``--db`` itself: left
    in, click refuses it before its eager ``--help`` acts, and the group without a subcommand
    was reported as a missing command (exit 2) where ``-h`` is help (exit 0)."""
    asked, dropped, i = False, set(), 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if arg == "--db":
            dropped |= {i, i + 1}
            i += 1
        elif arg.startswith("--db="):
            dropped.add(i)
        elif arg in _HELP:
            asked = True
        elif not arg.startswith("-"):
            break  # the subcommand: the --db after it is its own
        i += 1
    return [arg for j, arg in enumerate(args) if j not in dropped] if asked else args

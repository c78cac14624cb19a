"""The global flags, taken out of ``argv`` wherever they stand, before typer parses the rest.

Invariants: ``--output``, ``--color``, ``--verbose``, ``--offline``, ``--locked`` and
``--artifacts DIR`` may appear anywhere before ``--``; a value outside its choices is a
``ValidationError`` (exit 2), never silently taken; ``--db`` moves to the end so each
subcommand reads it as its own option, and given twice it must name one database (the same
value, or the same file spelled twice), else exit 2 naming both (a URL by its scheme only);
``--output``, ``--color`` and ``--artifacts`` likewise take one value, so two different ones
are exit 2 naming both (``twice_error``, the message ``cli`` gives every one-value option);
an error found here is printed in the machine format if any ``--output`` asked for one.
``--artifacts`` (the artifact directory of a PostgreSQL ledger, shared by every host) is
handed to the ledger opener as ``$AGENTCTL_ARTIFACTS`` of this process, so it wins over the
inherited variable.
"""

from __future__ import annotations

import os
import re

from agentctl.errors import ValidationError
from agentctl.render import Settings

VALUE_CHOICES = {"--output": ("human", "json", "jsonl"), "--color": ("auto", "always", "never")}
_PACK_FLAGS = ("--offline", "--locked")  # pack resolution modes, global like --verbose
FLAG_OPTIONS = ("--verbose", *_PACK_FLAGS)  # the global options that take no value
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")  # as clikit and core.dburl tell a URL
_SHOWN_CHARS = 60  # of a value echoed in an error (an --inputs JSON may be long)


def sniff_output(argv: list[str]) -> str:
    """The format to print a usage error in: the first ``--output`` value, but a machine
    format (``json``, ``jsonl``) if any ``--output`` asks for one. ``--output json --output
    human`` is itself an error; a script that asked for JSON anywhere must be able to parse
    it, while a person can still read a JSON envelope."""
    given: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--output" and i + 1 < len(argv):
            given.append(argv[i + 1])
        elif arg.startswith("--output="):
            given.append(arg.split("=", 1)[1])
    machine = [value for value in given if value in ("json", "jsonl")]
    return (machine or given or ["human"])[0]


def check_text(argv: list[str]) -> None:
    """Every argument is valid UTF-8 text. Python hands bytes that are not as lone surrogates
    (``\\udcff``), which no database, JSON text or file name we write can hold: refused here
    (exit 2) rather than failing half-way as an internal error."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = _as_bytes_written(arg)
            raise ValidationError(
                f"argument {position} ({shown}) is not valid UTF-8 text; agentctl takes "
                "arguments, names and paths as UTF-8"
            ) from None


def _as_bytes_written(arg: str) -> str:
    """``arg`` with each byte that is not UTF-8 shown as the user wrote it (``caf\\xe9``),
    not as the surrogate Python holds it in (``caf\\udce9``)."""
    try:
        return arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte decodes to: only escaping shows it
        return arg.encode("utf-8", "backslashreplace").decode("utf-8")


def normalize_argv(argv: list[str]) -> tuple[Settings, list[str]]:
    """Pull the global flags out of ``argv`` wherever they stand; move ``--db`` to the end."""
    settings = Settings()
    rest: list[str] = []
    db: list[str] = []
    seen: dict[str, str] = {}  # --output/--color/--artifacts as first given
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name, eq, inline = arg.partition("=")
        if name in VALUE_CHOICES or name in ("--db", "--artifacts"):
            if eq:
                value = inline
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 1
            else:
                raise ValidationError(f"option {name} requires a value")
            if name == "--db":
                db = ["--db", _one_db(db[1] if db else None, value)]
            else:
                _global_value(settings, seen, name, value)
        elif arg == "--verbose":
            settings.verbose = True
        elif arg in _PACK_FLAGS:
            setattr(settings, arg[2:], True)
        else:
            rest.append(arg)
        i += 1
    if "--" in rest:
        cut = rest.index("--")
        return settings, rest[:cut] + db + rest[cut:]
    return settings, rest + db


def named_db(normalized: list[str]) -> str | None:
    """The ``--db`` a command line named, from ``normalize_argv``'s result (which moved it
    last, before any ``--``), or None."""
    cut = normalized.index("--") if "--" in normalized else len(normalized)
    if cut >= 2 and normalized[cut - 2] == "--db":
        return normalized[cut - 1]
    return None


def top_level_flag(args: list[str]) -> list[str]:
    """``args`` (global flags taken out) as typer should parse them when they start with a
    top-level ``-h``/``--help`` (the top-level help) or ``-V``/``--version`` (the ``version``
    command). The original's (clap's) flags act when met: the first one wins and the rest of
    the line is ignored, so ``-h -V`` is help and ``-V runs list`` the version. Handed to
    typer as they stand, ``-V`` was a version only as the first word with nothing after it
    (``-V runs list`` named ``agentctl version`` in its error), and ``-h -V`` an unknown
    option. A top-level ``--db`` never stands before them: ``normalize_argv`` moved it last."""
    if args[:1] in (["-h"], ["--help"]):
        return ["--help"]
    if args[:1] in (["-V"], ["--version"]):
        return ["version"]
    return args


def _one_db(earlier: str | None, value: str) -> str:
    """``--db`` may stand on the group and after the subcommand (spec/cli.md §1), so a script
    may give it twice; two different databases are a mistake (the later one used to win
    silently, creating a mistyped file), refused before anything is opened. The same file
    spelled twice (``st/r.db``, ``./st/r.db``) is one database."""
    if earlier is None or _db_key(earlier) == _db_key(value):
        return value
    raise twice_error("--db", earlier, value)


def _global_value(settings: Settings, seen: dict[str, str], name: str, value: str) -> None:
    """Take ``--output``, ``--color`` or ``--artifacts``; ``seen`` holds the first values."""
    _once(name, seen.setdefault(name, value), value)
    if name == "--artifacts":
        _set_artifacts(value)
    else:
        _apply_flag(settings, name, value)


def _once(name: str, earlier: str, value: str) -> None:
    """A global one-value flag given again: the same value is harmless, another one is a
    mistake (the later one used to win silently: ``--output json … --output human`` printed
    human text to a script), refused before anything runs. ``--artifacts`` compares the
    directory it names, as ``--db`` its file."""
    same = _db_key(earlier) == _db_key(value) if name == "--artifacts" else earlier == value
    if not same:
        raise twice_error(name, earlier, value)


def twice_error(name: str, earlier: str, value: str, alias: str | None = None) -> ValidationError:
    """The usage error (exit 2) for an option that takes one value given two different ones,
    naming the option and both values; ``alias`` is the other spelling used, if one was."""
    also = f" ({alias} is another name for {name})" if alias else ""
    return ValidationError(
        f"option {name} is given twice with different values ({_shown(earlier)} and "
        f"{_shown(value)}){also}; give it once, or the same value each time"
    )


def _shown(value: str) -> str:
    """An option's value to echo: a URL only up to its ``://`` (the rest may hold a
    password), as ``clikit`` echoes a ``--db`` URL; a long text cut, the message stays a line."""
    scheme, sep, _ = value.partition("://")
    if sep and "/" not in scheme:
        return f"{scheme}://…"
    return repr(value) if len(value) <= _SHOWN_CHARS else repr(value[:_SHOWN_CHARS]) + "…"


def _db_key(value: str) -> str:
    """What ``--db`` names: a file's absolute path; a URL (any ``scheme:``) as written."""
    if ":" in value.split("/", 1)[0] or not value.strip():
        return value
    return os.path.abspath(value)


def _set_artifacts(value: str) -> None:
    """``--artifacts DIR``: a local (shared) directory. A URL is refused, as for ``--db`` and
    every path argument: ``abspath`` would make ``https://h/a`` the directory ``./https:/h/a``."""
    if not value.strip():
        raise ValidationError("--artifacts is empty; give the shared artifact directory")
    url = _URL.match(value)
    if url:
        scheme = url.group(1)
        raise ValidationError(
            f"--artifacts {scheme}://… is a URL ({scheme} is a URL scheme); give a local "
            "directory (URLs are not fetched; write ./NAME for a local directory of that name)"
        )
    os.environ["AGENTCTL_ARTIFACTS"] = os.path.abspath(value)


def _apply_flag(settings: Settings, name: str, value: str) -> None:
    allowed = VALUE_CHOICES[name]
    if value not in allowed:
        raise ValidationError(
            f"invalid value {value!r} for {name}; expected one of: {', '.join(allowed)}"
        )
    if name == "--output":
        settings.output = value  # type: ignore[assignment]
    else:
        settings.color = value  # type: ignore[assignment]

"""Foreign failures (an SDK's, pydantic's, httpx's) said in one line, in our words.

What a user reads of a failed or uncertain effect comes from here when a library raised it:
the protocol clients (MCP, A2A) and the provider adapters translate at their one boundary,
and describe what went wrong with ``foreign_text``.

Invariants:
- one line: no newline survives, whatever the library or the remote server wrote;
- no library internals: no exception class name, no pydantic error layout (``[type=…,
  input_value=…]``, "For further information visit …"), no URL to a library's docs, no repr;
- the useful specifics stay: which field of an answer was wrong and what was expected, the
  byte counts of a cut answer, the remote's own error text;
- nothing here decides whether a failure is definitive or uncertain: callers keep that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic_core import ValidationError

MAX_PROBLEMS = 3  # problems named in one message; the rest are counted
_SPACES = re.compile(r"\s+")
_CUT = re.compile(
    r"peer closed connection without sending complete message body "
    r"\(received (\d+) bytes, expected (\d+)\)"
)
# pydantic's text layout: "<loc>\n  <msg> [type=<type>, input_value=…]" per problem.
_TEXT_PROBLEM = re.compile(r"^(\S[^\n]*)\n {2}(.*?) \[type=(\w+)", re.MULTILINE)
_KINDS = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
}
# httpx / httpx2 / httpcore transport failures, by class name (no import: the provider path
# loads only the HTTP stack it uses).
_TRANSPORT = {
    "ConnectTimeout": "connecting timed out",
    "ReadTimeout": "no answer came within the timeout",
    "WriteTimeout": "sending timed out",
    "PoolTimeout": "no connection was free within the timeout",
    "ConnectError": "cannot connect",
    "ReadError": "reading the answer failed",
    "WriteError": "sending failed",
    "RemoteProtocolError": "the connection broke",
    "LocalProtocolError": "the request could not be sent",
    "ProxyError": "the proxy failed",
    "UnsupportedProtocol": "the URL's scheme is not supported",
    "DecodingError": "the answer could not be decoded",
    "TooManyRedirects": "too many redirects",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a validated value: where (``loc``), what kind, the library's words."""

    loc: tuple[str | int, ...]
    kind: str
    said: str


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return _SPACES.sub(" ", text).strip()


def foreign_text(exc: BaseException) -> str:
    """What went wrong, one line, without the library's class names or layout."""
    if isinstance(exc, ValidationError):
        return f"the answer is malformed: {problems_text(problems_of(exc))}"
    cause = exc.__cause__
    if cause is not None and _transport_phrase(cause) is not None:
        exc = cause  # an SDK's connection error wrapping the transport's: say the transport's
    text = one_line(str(exc))
    cut = _CUT.search(text)
    if cut is not None:
        got, expected = cut.groups()
        return f"the connection closed mid-answer ({got} of {expected} bytes received)"
    said = _transport_phrase(exc)
    if said is not None:
        return f"{said}: {text}" if text else said
    return text or "an unexpected failure without a message"


def _transport_phrase(exc: BaseException) -> str | None:
    for cls in type(exc).__mro__:
        library = cls.__module__.split(".")[0]
        if library.startswith(("httpx", "httpcore")) and cls.__name__ in _TRANSPORT:
            return _TRANSPORT[cls.__name__]
    return None


def problems_of(exc: ValidationError) -> list[Problem]:
    return [
        Problem(tuple(e["loc"]), e["type"], str(e["msg"]))
        for e in exc.errors(include_url=False, include_input=False)
    ]


def problems_in_text(text: str) -> list[Problem]:
    """The problems of a pydantic error an SDK kept only as text (``str(ValidationError)``)."""
    found = []
    for loc, said, kind in _TEXT_PROBLEM.findall(text):
        parts = tuple(int(p) if p.isdigit() else p for p in loc.split("."))
        found.append(Problem(parts, kind, said))
    return found


def problems_text(problems: Sequence[Problem]) -> str:
    """``path: what is wrong`` for the first few problems, the rest counted. A value that
    matches none of a union's shapes is one problem (not one per shape tried)."""
    lines: list[str] = []
    for problem in _merged(problems):
        if problem not in lines:
            lines.append(problem)
    if not lines:
        return "it does not have the expected shape"
    shown = "; ".join(lines[:MAX_PROBLEMS])
    more = len(lines) - MAX_PROBLEMS
    return f"{shown} (and {more} more)" if more > 0 else shown


def _merged(problems: Iterable[Problem]) -> Iterable[str]:
    tried: dict[tuple[str | int, ...], set[str]] = {}
    for problem in problems:
        prefix, tag = _split_tag(problem.loc)
        if tag is not None:
            tried.setdefault(prefix, set()).add(tag)
    for problem in problems:
        prefix, tag = _split_tag(problem.loc)
        if tag is not None and len(tried[prefix]) > 1:
            yield f"{_path(prefix)}: matches none of the accepted shapes"
            continue
        loc = tuple(p for p in problem.loc if not _is_tag(p))
        yield f"{_path(loc)}: {_phrase(problem)}"


def _split_tag(loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str | None]:
    for at, part in enumerate(loc):
        if isinstance(part, str) and _is_tag(part):
            return loc[:at], part
    return loc, None


def _is_tag(part: str | int) -> bool:
    """A union member's name in a location (``TextContent``, ``function-after[…]``), which
    is pydantic's, not a field of the answer (answer fields start lower case)."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part)


def _path(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in loc) or "the whole answer"


def _phrase(problem: Problem) -> str:
    if problem.kind == "missing":
        return "missing"
    if problem.kind == "extra_forbidden":
        return "not allowed"
    if problem.kind == "json_invalid":
        return "not valid JSON"
    if problem.kind in _KINDS:
        return f"should be {_KINDS[problem.kind]}"
    said = re.sub(r" or instance of \w+", "", problem.said)
    return one_line(said.replace("Input should", "should"))

"""Shared building blocks of the workflow models: the strict base class and rule failures.

Invariants:
- Every model is strict (no coercion: ``"3"`` is not ``3``, ``1`` is not ``true``), forbids
  unknown keys and uses camelCase aliases equal to the YAML keys of spec/dsl.md.
- A rule that fails inside a validator raises ``rule_error``: a ``PydanticCustomError`` whose
  ``type`` is the diagnostic code and whose context carries the sub-path (``at``) relative to the
  model being validated, whether to point at the key or the value, and an optional ``help``.
  ``diagnostics.py`` turns these into ``Diagnostic`` objects; nothing else is needed to add a
  new rule.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from agentctl.core import jsonschema
from agentctl.core.dburl import url_scheme

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
MIB = 1024 * 1024
# The widest integers the original takes (Rust u64 / u32 fields): a larger limit is refused
# rather than stored as a number no other implementation of the format could read.
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1


class StrictModel(BaseModel):
    """Base of every workflow model."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        populate_by_name=True,
        # Defaults are built from literal values; validating them again would only cost time.
        validate_default=False,
        # Built on first use, once, as part of ``Workflow`` (or from a stored core schema:
        # ``prebuilt.py``) instead of one validator per class while importing. For the same
        # reason a default block is made with ``model_construct`` (``Field(default_factory=
        # Policy.model_construct)``): its defaults are valid by construction, and calling the
        # class would build that model's own validator (~1-3 ms each) just to check them.
        defer_build=True,
    )


def empty_list() -> list[Any]:
    """``default_factory`` of the list fields of a default block (one made with
    ``model_construct``, above). ``model_construct`` asks pydantic each time whether a field's
    factory takes the validated data, which reads the factory's signature: for the builtin
    ``list`` or ``dict`` that parses their text signature with ``tokenize``, whose first use
    compiles one large regular expression (~2-3 ms of every run, for ~11 such fields); a
    Python function's signature is read directly."""
    return []


def empty_dict() -> dict[str, Any]:
    """``default_factory`` of the dict fields of a default block (``empty_list``)."""
    return {}


def rule_error(
    code: str,
    message: str,
    *,
    at: str | None = None,
    help: str | None = None,
    key: bool = False,
) -> PydanticCustomError:
    """A failed schema rule; ``at`` is the dotted sub-path of the offending key.

    ``key=True`` points the diagnostic at the key itself (the key should not be there) rather
    than at its value (the value is wrong).
    """
    # The message travels through the context so braces in user data are never formatted.
    context: dict[str, Any] = {"msg": message, "point": "key" if key else "value"}
    if at is not None:
        context["at"] = at
    if help is not None:
        context["help"] = help
    return PydanticCustomError(code, "{msg}", context)


def check_http_url(value: str, what: str, example: str, *, at: str | None = None) -> None:
    """``value`` is an absolute http(s) URL with a host (``allowedSchemes`` allows no other),
    else the rule fails naming ``what`` — so a path where a URL belongs is caught by ``check``,
    not refused by the egress policy when a run starts."""
    spaced = any(c.isspace() for c in value)
    if url_scheme(value) in ("https", "http") and urlsplit(value).hostname and not spaced:
        return
    raise rule_error(
        "schema_violation",
        f"{what} {value!r} is not an absolute http(s) URL",
        at=at,
        help=f"write the full URL, e.g. {example}",
    )


def check_json_schema(schema: Any, key: str, what: str = "") -> None:
    """The JSON Schema written at ``key`` is usable, else its first problem fails the model,
    located at the offending keyword (``structuredOutput.properties.a.$ref``)."""
    if schema is None:
        return
    problems = jsonschema.schema_problems(schema)
    if problems:
        first = problems[0]
        raise rule_error(
            "schema_violation",
            f"{what or f'`{key}`'} is not a usable JSON Schema: {first.message()}",
            at=".".join((key, first.dotted)) if first.path else key,
            key=first.about_key,
        )


def unsupported(key: str, what: str) -> PydanticCustomError:
    """The spec names ``key`` but this version does not implement it."""
    return rule_error(
        "unsupported_capability",
        f"`{key}` ({what}) is not supported by this version of agentctl",
        at=key,
        help=f"remove `{key}`",
        key=True,
    )


def registered_kind(value: object, allowed: tuple[str, ...]) -> str:
    """``value`` when it names a registered kind; else the error a ``Literal`` would raise.

    Kinds come from ``agentctl.core.registry`` at validation time (so a kind registered at
    run time is accepted), while the diagnostic stays word for word the one a ``Literal``
    field gives: ``Input should be 'a', 'b' or 'c'``.
    """
    if isinstance(value, str) and value in allowed:
        return value
    quoted = [repr(kind) for kind in allowed]
    expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


def given_keys(model: BaseModel) -> set[str]:
    """The YAML keys written on ``model`` with a value other than the key's default.

    Comparing with the default (rather than asking only whether the key was written) keeps the
    normalized document loadable again: it spells out ``null`` and every default explicitly.
    """
    cls = type(model)
    fields = cls.model_fields
    given: set[str] = set()
    for name in model.model_fields_set:
        if getattr(model, name) != _default_of(cls, name):
            info = fields[name]
            given.add(info.alias or name)
    return given


@functools.cache
def _default_of(cls: type[BaseModel], name: str) -> Any:
    """A field's default, computed once per model class: pydantic inspects a default factory's
    signature on every ``get_default`` call, which cost most of validating a large document.
    Only compared, never handed out, so sharing one value is safe."""
    return cls.model_fields[name].get_default(call_default_factory=True)


def _source_path_problem(value: str) -> str | None:
    """Why ``value`` is not a literal local file path, or None (templates and URLs are not)."""
    if not value or "\0" in value or "${{" in value:
        return "is not a literal file path"
    if url_scheme(value) is not None:  # a source-file field never fetches
        return "is a URL; only local files are read"
    return None


def _source_file(value: str, field: str, help: str) -> str:
    """``value`` when it names a local source file; else a ``schema_violation`` naming
    ``field`` (the validators below are module functions: the stored schema pickles them by
    name, ``cli_schemacache``)."""
    problem = _source_path_problem(value)
    if problem is None:
        return value
    raise rule_error("schema_violation", f"{field} {value!r} {problem}", help=help)


def _literal_path(value: str) -> str:
    return _source_file(
        value,
        "varsFiles entry",
        "write the path of a YAML or JSON file, relative to this workflow file",
    )


def _instructions_path(value: str) -> str:
    return _source_file(
        value,
        "instructionsFile",
        "write the path of a UTF-8 text file, relative to this workflow file",
    )


def _not_a_url(value: str, why: str, help: str) -> str:
    """``value`` unless it is a URL, which a local path field refuses (nothing is fetched)."""
    if url_scheme(value) is not None:
        raise rule_error("schema_violation", f"{value!r} is a URL; {why}", help=help)
    return value


def _local_directory(value: str) -> str:
    return _not_a_url(
        value,
        "policy roots are local directories",
        "write a directory path, relative to the workspace or absolute",
    )


def _program(value: str) -> str:
    """A program to run: a name looked up on PATH or a local path — never empty or a URL."""
    if not value:
        raise rule_error("schema_violation", "command is empty", help=_PROGRAM_HELP)
    return _not_a_url(value, "a command is a local program", _PROGRAM_HELP)


_PROGRAM_HELP = "write the program's name (found on PATH) or its path; nothing is downloaded"


def _working_directory(value: str) -> str:
    """A process's directory: a literal one must be one a run can start in — relative to the
    workspace, non-empty and without ``..`` (``sandbox.program.process_cwd`` denies anything
    else, so it would fail every run); ``.``, ``./`` and any other spelling made of ``.`` and
    ``/`` only is the workspace itself. A templated one is judged when the run renders it."""
    _not_a_url(value, "a process runs in a local directory", _CWD_HELP)
    if "${{" in value:
        return value
    problem = _cwd_problem(value)
    if problem is not None:
        raise rule_error("schema_violation", f"cwd {value!r} {problem}", help=_CWD_HELP)
    return value


def _cwd_problem(value: str) -> str | None:
    if not value.strip():
        return 'is empty; write "." for the workspace itself'
    if "\0" in value:
        return "contains a NUL byte"
    if value.startswith("/"):
        return "is absolute; a process runs inside the workspace, named relative to it"
    segments = value.split("/")
    if ".." in segments:
        return "contains `..`, which a run refuses in a process directory"
    return None


_CWD_HELP = 'write a directory inside the workspace, relative to it ("." for the workspace)'


# A policy root (workspaceRoot, writableRoots, secretFileRoots): a local directory path.
LocalDirectory = Annotated[str, AfterValidator(_local_directory)]
# A process action's ``command`` and ``cwd``: a local program and directory, never a URL.
Program = Annotated[str, AfterValidator(_program)]
WorkingDirectory = Annotated[str, AfterValidator(_working_directory)]
# ``varsFiles``: literal paths (never templates or URLs), at most 256 per list (spec/dsl.md §6.4).
VarsFiles = Annotated[list[Annotated[str, AfterValidator(_literal_path)]], Field(max_length=256)]
# An agent's ``instructionsFile``: one literal local path, read before compiling.
InstructionsFile = Annotated[str, Field(min_length=1), AfterValidator(_instructions_path)]

# Common constrained scalars.
NonEmptyStr = Annotated[str, Field(min_length=1)]
Seconds = Annotated[int, Field(ge=1, le=86_400)]
OutputLimit = Annotated[int, Field(ge=1, le=16 * MIB)]
# Counts and rates the original reads as u64 (budgets, usage limits, prices), the spec giving
# them no upper bound: positive, or (a price that may be 0) non-negative.
PositiveU64 = Annotated[int, Field(ge=1, le=U64_MAX)]
U64 = Annotated[int, Field(ge=0, le=U64_MAX)]
JsonObject = dict[str, Any]

"""Resolving secret references (``{env}``, ``{file}``, ``{process}``) at dispatch time.

Invariants (spec/cli.md §12):
- a resolved value is never stored: the ledger gets only its source description and SHA-256;
- every anomaly fails closed with a message that names the reference, never the value;
- ``{env}`` names must be in ``policy.environmentAllowlist``; ``{file}`` paths must lie under a
  ``policy.secretFileRoots`` entry (a regular file, opened without blocking; UTF-8, ≤ 64 KiB,
  one trailing newline stripped);
  ``{process}`` commands run argv-only with a cleared environment, their basename in
  ``policy.secretProcessAllowlist``, under a timeout and an output limit that bound what is
  read (``sandbox.helper``: the helper's process group is killed when it ends);
- a credential or header value (``/credential``, ``/headers/…``) must be one an HTTP header
  carries — ASCII, not empty, no control character, no leading or trailing whitespace — or
  it is refused where it is resolved (``RunFailedError``), before anything is sent.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from agentctl.core.canonical import sha256_hex
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list
from agentctl.core.operations import has_pointer, replace_at
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.sandbox.helper import run_helper
from agentctl.sandbox.paths import open_regular

MAX_FILE_SECRET_BYTES = 64 * 1024


@dataclass(frozen=True)
class Resolved:
    """A secret's value and where it came from; only ``recorded`` may reach the ledger."""

    value: str
    source: str

    def recorded(self) -> JsonObject:
        """What the ledger may keep of a secret."""
        return {"source": self.source, "sha256": sha256_hex(self.value)}


def resolve(
    ref: JsonValue,
    policy: Mapping[str, JsonValue],
    workspace: str,
    what: str,
    *,
    default_envs: Collection[str] = (),
) -> Resolved:
    """Resolve one secret reference; ``what`` names its place for error messages.

    ``default_envs`` are variables readable without ``policy.environmentAllowlist`` (a
    provider's conventional credential variable, spec/cli.md §12).
    """
    if isinstance(ref, Mapping):
        env, file, process = ref.get("env"), ref.get("file"), ref.get("process")
        if isinstance(env, str):
            return _from_env(env, policy, what, default_envs)
        if isinstance(file, str):
            return _from_file(file, policy, workspace, what)
        if isinstance(process, Mapping):
            return _from_process(process, policy, what)
    raise RunFailedError(f"{what}: not a secret reference")


def _from_env(
    name: str, policy: Mapping[str, JsonValue], what: str, default_envs: Collection[str]
) -> Resolved:
    if not _env_allowed(name, policy, default_envs):
        raise PolicyDeniedError(
            f"{what} reads environment variable {name}, which is not in policy.environmentAllowlist"
        )
    value = os.environ.get(name)
    if value is None:
        raise RunFailedError(f"{what}: environment variable {name} is not set")
    return Resolved(value, f"env:{name}")


def _env_allowed(name: str, policy: Mapping[str, JsonValue], default_envs: Collection[str]) -> bool:
    # The policy lists are arrays of names (the workflow's schema): anything else allows none.
    return name in default_envs or name in as_list(policy.get("environmentAllowlist"))


def _under_roots(path: str, policy: Mapping[str, JsonValue], workspace: str) -> str | None:
    """The real path of a ``{file}`` secret, or None when it is not under a secret root."""
    full = os.path.realpath(os.path.join(workspace, path))
    given = as_list(policy.get("secretFileRoots"))  # paths (the schema): others root nothing
    # A blank entry names no directory (``check`` refuses it; a run stored before that rule
    # still holds it): joined to the workspace it would make the whole workspace a root.
    named = [r for r in given if isinstance(r, str) and r.strip()]
    roots = [os.path.realpath(os.path.join(workspace, r)) for r in named]
    if not any(full == r or full.startswith(r.rstrip("/") + "/") for r in roots):
        return None
    return full


def _from_file(path: str, policy: Mapping[str, JsonValue], workspace: str, what: str) -> Resolved:
    full = _under_roots(path, policy, workspace)
    if full is None:
        raise PolicyDeniedError(f"{what}: secret file {path} is not under policy.secretFileRoots")
    try:
        with open_regular(full, path, "read") as handle:
            raw = handle.read(MAX_FILE_SECRET_BYTES + 1)
    except RunFailedError as exc:  # a FIFO, device or socket: never waited on
        raise RunFailedError(f"{what}: secret file {path} is not a regular file") from exc
    except OSError as exc:
        raise RunFailedError(f"{what}: cannot read secret file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_FILE_SECRET_BYTES:
        raise RunFailedError(f"{what}: secret file {path} is larger than 64 KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunFailedError(f"{what}: secret file {path} is not UTF-8") from exc
    return Resolved(text[:-1] if text.endswith("\n") else text, f"file:{path}")


def _from_process(
    spec: Mapping[str, JsonValue], policy: Mapping[str, JsonValue], what: str
) -> Resolved:
    command = str(spec.get("command") or "")
    if os.path.basename(command) not in as_list(policy.get("secretProcessAllowlist")):
        raise PolicyDeniedError(
            f"{what}: secret helper {os.path.basename(command)!r} is not in "
            "policy.secretProcessAllowlist"
        )
    limit = int(_setting(spec, "outputLimitBytes", what) or 16384)
    timeout = float(_setting(spec, "timeoutSeconds", what) or 5)
    argv = [command, *[str(a) for a in as_list(spec.get("args"))]]
    try:
        done = run_helper(argv, timeout=timeout, limit=limit)
    except OSError as exc:  # said as the OS says it, as a process that cannot start is
        reason = exc.strerror or exc
        raise RunFailedError(f"{what}: cannot start secret helper {command!r}: {reason}") from exc
    if done.ended == "timeout":
        raise RunFailedError(f"{what}: secret helper {command} timed out after {timeout:g} s")
    if done.ended == "overflow":
        raise RunFailedError(f"{what}: secret helper {command} printed more than {limit} bytes")
    if done.returncode != 0:
        raise RunFailedError(f"{what}: secret helper {command} exited {done.returncode}")
    try:
        text = done.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:  # never a silently altered value: as a file's is
        raise RunFailedError(f"{what}: secret helper {command} did not print UTF-8") from exc
    return Resolved(text[:-1] if text.endswith("\n") else text, f"process:{command}")


def _setting(spec: Mapping[str, JsonValue], key: str, what: str) -> int | float | str | None:
    """A ``{process}`` number as given (the workflow's schema checked it): ``int``/``float``
    convert it as ever; an array or object is refused instead of failing the conversion."""
    value = spec.get(key)
    if not isinstance(value, list | dict):
        return value
    if value:
        raise RunFailedError(f"{what}: secret helper setting {key} is not a number")
    return None  # empty: the default, as ``or`` gave it


def resolve_named(
    refs: Mapping[str, JsonValue], policy: Mapping[str, JsonValue], workspace: str, what: str
) -> tuple[dict[str, str], JsonObject]:
    """Resolve name → reference maps (an action's ``env``): (values, what the ledger keeps).

    Names resolve in sorted order, so the first failure reported is always the same one.
    """
    values: dict[str, str] = {}
    recorded: JsonObject = {}
    for name, ref in sorted(refs.items()):
        got = resolve(ref, policy, workspace, f"{what}: env {name}")
        values[name] = got.value
        recorded[name] = got.recorded()
    return values, recorded


@dataclass(frozen=True)
class ResolvedRefs:
    """A built request with its pointer-named secret references resolved."""

    recorded: JsonObject  # each reference replaced by its source + SHA-256
    request: JsonObject  # each reference replaced by its value
    values: tuple[str, ...]  # the values, to redact from whatever is recorded


def resolve_pointers(
    recorded: JsonObject,
    request: JsonObject,
    refs: Mapping[str, JsonValue],
    context: tuple[Mapping[str, JsonValue], str, str],
    *,
    credential_envs: Collection[str] = (),
) -> ResolvedRefs:
    """Resolve ``Built.secret_refs`` (JSON Pointer → reference), in sorted pointer order.

    ``context`` is (policy, workspace, what): the policy the references must pass, the
    workspace file references are relative to, and the place named in errors.
    ``credential_envs`` are readable without the allowlist, at ``/credential`` only.
    """
    policy, workspace, what = context
    values: list[str] = []
    for where, ref in sorted(refs.items()):
        defaults = credential_envs if where == "/credential" else ()
        place = f"{what}: {where.lstrip('/')}"
        got = resolve(ref, policy, workspace, place, default_envs=defaults)
        if where == "/credential" or where.startswith("/headers/"):
            _require_header_value(got, place)
        request = replace_at(request, where, got.value)
        if has_pointer(recorded, where):
            recorded = replace_at(recorded, where, got.recorded())
        values.append(got.value)
    return ResolvedRefs(recorded, request, tuple(values))


def _require_header_value(got: Resolved, place: str) -> None:
    """Refuse a credential or header value an HTTP header cannot carry, naming its source and
    never the value: the HTTP stack would refuse it only at dispatch (``LocalProtocolError``,
    ``UnicodeEncodeError``), quoting the header (escaped, so redaction would miss it), and the
    refusal would be taken for a transport failure and retried. A header value (h11, as httpx
    sends it) is ASCII text (httpx encodes it so), with no control character and no leading or
    trailing space or tab; it cannot be empty either, as no credential or header is."""
    why = _header_defect(got.value)
    if why:
        raise RunFailedError(
            f"{place}: the value from {got.source} {why}, which an HTTP header cannot carry; "
            "correct it at its source"
        )


def _header_defect(value: str) -> str | None:
    """What keeps ``value`` out of an HTTP header, said without quoting it; None: nothing."""
    if any((c < " " and c != "\t") or c == "\x7f" for c in value):
        return (
            "holds a control character (a line break, or a carriage return as in a file "
            "saved with CRLF line endings)"
        )
    if not value.strip(" \t"):
        return "is empty or only whitespace"
    if value != value.strip(" \t"):
        return "begins or ends with whitespace (a space or a tab)"
    if not value.isascii():
        return "holds a character outside ASCII"
    return None


Availability = Literal["present", "missing", "missing_or_denied", "unchecked"]


def availability(
    ref: JsonValue,
    policy: Mapping[str, JsonValue],
    workspace: str,
    *,
    default_envs: Collection[str] = (),
    empty_ok: bool = False,
) -> Availability:
    """Whether a reference could resolve, judged by presence only.

    Never reads a value and never runs a helper: an ``{env}`` variable is set and not empty
    (and readable under policy), a ``{file}`` exists under a secret root, is readable and is
    not empty (its size, from ``stat``); a ``{process}`` helper is ``unchecked``. A reference
    policy refuses is ``missing_or_denied``. ``empty_ok``: an empty value is present (an
    action's ``env`` passes it on as it is; a credential or header refuses it).
    """
    if not isinstance(ref, Mapping):
        return "unchecked"
    name, file = ref.get("env"), ref.get("file")
    if isinstance(name, str):
        if not _env_allowed(name, policy, default_envs):
            return "missing_or_denied"
        # Empty is missing: no credential or header is the empty text, and an empty one
        # would fail only once a run and its effects exist (only the length is looked at).
        value = os.environ.get(name)
        return "present" if value or (empty_ok and value is not None) else "missing"
    if isinstance(file, str):
        full = _under_roots(file, policy, workspace)
        if full is None:
            return "missing_or_denied"
        return "present" if _readable_file(full, empty_ok) else "missing"
    return "unchecked"


def _readable_file(path: str, empty_ok: bool) -> bool:
    """Whether ``path`` is a readable file of at least one byte (any size with ``empty_ok``):
    an empty file is missing, as an empty variable is (only its size is looked at, never its
    content)."""
    try:
        info = os.stat(path)
    except OSError:  # gone, or a path that cannot be looked at: not available either way
        return False
    sized = empty_ok or info.st_size > 0
    return stat.S_ISREG(info.st_mode) and sized and os.access(path, os.R_OK)

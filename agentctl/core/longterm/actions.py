"""Request builders of the long-term memory actions (read, write, search).

Invariants:
- the recorded input (the effect's identity) of a read or a plain ``key``/``value`` write is
  exactly what it was before search existed — ``{namespace, key[, value]}`` — so runs recorded
  earlier resume with the same effect ids; optional parts (text, metadata, content,
  retentionDays) are recorded only when written;
- the request adds what executing needs but the identity must not cover: the normalised
  entry, the embedding identity and the effective retention (the task's ``retentionDays``,
  else ``spec.memory.longTerm.retentionDays``);
- a task's ``with.namespace`` (a literal, or a rendered template) replaces the run's namespace;
- every invalid argument fails the task (``RunFailedError``) naming the task.
"""

from __future__ import annotations

import dataclasses

from agentctl.core.builders import build_memory_write
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.longterm.embedding import EmbeddingIdentity
from agentctl.core.longterm.entries import entry_from_args, retention_days_of
from agentctl.core.longterm.search import search_query_of
from agentctl.core.operations import BuildInput, Built
from agentctl.errors import RunFailedError, ValidationError

_WRITE_EXTRAS = ("text", "metadata", "content", "retentionDays")


def _args(b: BuildInput) -> JsonObject:
    return b.args if isinstance(b.args, dict) else {}


def _key(b: BuildInput) -> str:
    key = _args(b).get("key")
    if not isinstance(key, str) or not key:
        raise RunFailedError(
            f"task {b.task_id}: `with.key` must be a non-empty string, got {key!r}"
        )
    return key


def namespace_of(b: BuildInput) -> str:
    """The task's ``with.namespace`` when it gives one, else the run's namespace."""
    given = _args(b).get("namespace")
    if given is None:
        return b.run.long_term_namespace
    if not isinstance(given, str) or not given:
        raise RunFailedError(f"task {b.task_id}: `with.namespace` must be a non-empty string")
    return given


def identity_of(b: BuildInput) -> EmbeddingIdentity:
    embedding = b.run.long_term.get("embedding")
    return EmbeddingIdentity.from_settings(embedding if isinstance(embedding, dict) else None)


def build_long_term_read(b: BuildInput) -> Built:
    recorded: JsonObject = {"namespace": namespace_of(b), "key": _key(b)}
    return Built(recorded, dict(recorded))


def entry_as_value(b: BuildInput) -> BuildInput:
    """``with.entry`` — the later spelling of a long-term write's or a promotion's payload
    (spec/dsl.md §3) — taken as ``with.value``: one identity whichever was written."""
    args = _args(b)
    if "entry" not in args:
        return b
    if args.get("value") is not None or args.get("content") is not None:
        raise RunFailedError(f"task {b.task_id}: give one of `value`, `entry` or `content`")
    given = {k: v for k, v in args.items() if k != "entry"}
    given["value"] = args["entry"]
    return dataclasses.replace(b, args=given)


def build_long_term_promote(b: BuildInput) -> Built:
    """A promotion (``entry``/``value`` → a working-memory ``key``) is a working-memory write."""
    return build_memory_write(entry_as_value(b))


def build_long_term_write(b: BuildInput) -> Built:
    b = entry_as_value(b)
    args = _args(b)
    try:
        entry = entry_from_args(args)
        days = retention_days_of(args.get("retentionDays"))
        if days is None:
            days = retention_days_of(b.run.long_term.get("retentionDays"))
    except ValidationError as exc:
        raise RunFailedError(f"task {b.task_id}: {exc.message}") from exc
    recorded: JsonObject = {"namespace": namespace_of(b), "key": _key(b)}
    recorded["value"] = args.get("value")
    recorded.update({k: args[k] for k in _WRITE_EXTRAS if args.get(k) is not None})
    request: JsonObject = {
        **recorded,
        "entry": entry.to_json(),
        "embedding": identity_of(b).to_json(),
        "retentionDays": days,
    }
    return Built(recorded, request)


def build_long_term_search(b: BuildInput) -> Built:
    try:
        query = search_query_of(_args(b), namespace_of(b))
    except ValidationError as exc:
        raise RunFailedError(f"task {b.task_id}: {exc.message}") from exc
    recorded = query.to_json()
    return Built(recorded, {**recorded, "embedding": identity_of(b).to_json()})


def entry_json(request: JsonObject) -> tuple[JsonValue, str, JsonObject]:
    """The (value, text, metadata) a write request carries."""
    entry = as_object(request.get("entry"))
    return entry.get("value"), str(entry.get("text") or ""), as_object(entry.get("metadata"))

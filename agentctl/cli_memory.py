"""``agentctl memory get|put|search|reindex``: long-term memory administration outside runs.

The CLI path stores and searches with the ``local_hash`` embedding, 64 dimensions and model
``local-hash-v1`` unless ``--dimensions`` / ``--model`` say otherwise (our extension: they let
an operator index a namespace for a workflow that configures another size). Searches rank
exactly as the workflow action does (``core.longterm.rank``).

Invariants: every subcommand opens the database as other state commands do, creating it (and
its parent directories) when it does not exist yet; ``get`` of an absent or
expired key is a ``MemoryValue`` with ``value: null`` and ``createdAt: null``, exit 0 (as the
original's: spec/cli.md §2 keeps exit 5 for a missing run, effect or approval, not a key);
bad arguments — an empty NS or KEY among them — are exit 2 before the database is opened.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli_options import DbOpt, completes_to
from agentctl.cli_state import _ledger, _now
from agentctl.cli_stateview import (
    memory_value_view,
    memory_write_view,
)
from agentctl.clikit import DEFAULT_DB, deliver
from agentctl.core.conditions import json_identical
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import (
    DEFAULT_DIMENSIONS,
    DEFAULT_MODEL,
    EmbeddingIdentity,
    entry_from_args,
    local_hash,
    rank,
    retention_days_of,
    search_query_of,
)
from agentctl.core.strictjson import parse_strict
from agentctl.errors import ValidationError
from agentctl.ledger.model import MemoryEntry
from agentctl.render import Outcome, Settings

memory_app = typer.Typer(
    help="Read, write, search and reindex namespaced long-term memory.", no_args_is_help=True
)

DimensionsOpt = Annotated[
    int,
    typer.Option("--dimensions", min=8, max=4096, help="local_hash vector size (default 64)."),
]
ModelOpt = Annotated[str, typer.Option("--model", help="local_hash model name (salts the hashes).")]


def _named(param: typer.CallbackParam, value: str) -> str:
    """NS and KEY name an entry: an empty one (an unset shell variable) names none, so it is
    bad input — refused before the database is opened, as a workflow's memory actions
    refuse it — never a namespace of its own that reads back empty."""
    if not value:
        what = (param.name or "argument").upper()
        raise ValidationError(f"{what} must not be empty: an empty string names no memory entry")
    return value


NamespaceArg = Annotated[str, typer.Argument(help="Namespace (not empty).", callback=_named)]
KeyArg = Annotated[str, typer.Argument(help="Key (not empty).", callback=_named)]


def _identity(dimensions: int, model: str) -> EmbeddingIdentity:
    return EmbeddingIdentity(dimensions=dimensions, model=model)


def _json(text: str, what: str) -> JsonValue:
    return parse_strict(text, what)


@memory_app.command("get")
def memory_get_cmd(
    namespace: NamespaceArg,
    key: KeyArg,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """One entry: value, searchable text, metadata, expiry and how it is indexed (an absent
    or expired key: value null, createdAt null)."""
    with _ledger(db, verify=False) as ledger:
        entry = ledger.long_term_get(namespace, key, _now())
    if not entry.found:
        data = MemoryEntry(found=False, namespace=namespace, key=key).to_json()
        absent = f"no entry {namespace}/{key} (absent or expired)"
        deliver(Outcome("MemoryValue", data, human=lambda _s: absent))
        return
    data = entry.to_json()
    deliver(Outcome("MemoryValue", data, human=memory_value_view(data)))


@memory_app.command("put")
def memory_put_cmd(
    namespace: NamespaceArg,
    key: KeyArg,
    value: Annotated[str, typer.Argument(help="The value, as JSON ('\"text\"' for a string).")],
    text: Annotated[str | None, typer.Option("--text", help="Searchable text.")] = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="Exact-match metadata, a JSON object.")
    ] = None,
    retention_days: Annotated[
        int | None, typer.Option("--retention-days", help="Expire after N days (1..36500).")
    ] = None,
    dimensions: DimensionsOpt = DEFAULT_DIMENSIONS,
    model: ModelOpt = DEFAULT_MODEL,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Write (or replace) one entry and index it for vector search."""
    from agentctl.ledger import MemoryPut

    args: JsonObject = {"value": _json(value, "VALUE"), "text": text}
    if metadata is not None:
        args["metadata"] = _json(metadata, "--metadata")
    entry = entry_from_args(args)
    days = retention_days_of(retention_days, "--retention-days")
    identity = _identity(dimensions, model)
    put = MemoryPut(namespace, key, entry, identity, local_hash(entry.text, identity), days)
    with _ledger(db) as ledger:
        ledger.long_term_put(put, _now())
        written = ledger.long_term_get(namespace, key, _now())
    # ``written`` is the original's acknowledgement key; scripts written for it test it.
    data = {**written.to_json(), "written": True}
    deliver(Outcome("MemoryWrite", data, human=memory_write_view(data)))


def _filter_pair(text: str) -> tuple[str, JsonValue]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise ValidationError(f"--filter {text!r}: expected KEY=JSON")
    return name, _json(raw, f"--filter {name}")


def _filters(given: list[str]) -> JsonObject:
    """``--filter KEY=JSON`` flags as one object; a key given twice must mean one value (two
    would be a contradiction the later one silently settled)."""
    wanted: JsonObject = {}
    for text in given:
        name, value = _filter_pair(text)
        if name in wanted and not json_identical(wanted[name], value):
            raise ValidationError(
                f"--filter {name} is given twice with different values; an entry matches "
                "one value of a key, so give it once"
            )
        wanted[name] = value
    return wanted


@memory_app.command("search")
def memory_search_cmd(
    namespace: NamespaceArg,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="text, vector or hybrid.",
            autocompletion=completes_to("text", "vector", "hybrid"),
        ),
    ] = "text",
    limit: Annotated[int, typer.Option("--limit", help="At most this many results.")] = 10,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", help="KEY=JSON: metadata KEY must equal the value (repeat)."),
    ] = None,
    dimensions: DimensionsOpt = DEFAULT_DIMENSIONS,
    model: ModelOpt = DEFAULT_MODEL,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Ranked entries of a namespace, as the search action ranks them."""
    wanted = _filters(filters or [])
    args: JsonObject = {"query": query, "mode": mode, "limit": limit, "filters": wanted}
    search = search_query_of(args, namespace)
    with _ledger(db, verify=False) as ledger:
        candidates = ledger.long_term_candidates(namespace, _now())
    results = rank(search, candidates, _identity(dimensions, model))
    data: JsonObject = {**search.to_json(), "results": list[JsonValue](results)}
    deliver(Outcome("MemorySearch", data, human=_search_human(data)))


def _search_human(data: JsonObject) -> Any:
    from agentctl.render import table

    def human(settings: Settings) -> str:
        found = data["results"] if isinstance(data["results"], list) else []
        rows = [
            [str(r.get("key")), f"{int(str(r.get('score'))) / 1_000_000:.3f}", str(r.get("text"))]
            for r in found
            if isinstance(r, dict)
        ]
        nothing = f"no entry of {data['namespace']} matches"
        return table("results", ["key", "score", "text"], rows, settings, nothing)

    return human


@memory_app.command("reindex")
def memory_reindex_cmd(
    namespace: NamespaceArg,
    dimensions: DimensionsOpt = DEFAULT_DIMENSIONS,
    model: ModelOpt = DEFAULT_MODEL,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Rebuild the vectors of every active entry of a namespace."""
    identity = _identity(dimensions, model)
    with _ledger(db) as ledger:
        count = ledger.long_term_reindex(namespace, identity, _now())
    data: JsonObject = {"namespace": namespace, "reindexed": count, "embedding": identity.to_json()}
    entries = "1 entry" if count == 1 else f"{count} entries"
    said = f"reindexed {entries} of {namespace} ({identity.model}, {identity.dimensions} dims)"
    deliver(Outcome("MemoryReindex", data, human=lambda _s: said))

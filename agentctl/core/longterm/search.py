"""Search over long-term memory: the query, the candidates and one deterministic ranking.

Modes (each score is a number in 0..1, reported as an integer in millionths):
- ``text``: token overlap — the share of the query's distinct tokens (``embedding.tokens``)
  that occur in the entry's text;
- ``vector``: cosine similarity of the ``local_hash`` vectors of the query and of the entry
  (negative similarities count as 0);
- ``hybrid``: the mean of the two.

An entry whose score is 0 is not a result. Results are ordered by score, highest first, then
by key, and cut at ``limit`` (1..100). ``filters`` keep only entries whose metadata holds every
filter key with an equal JSON value (``1`` ≠ ``true`` ≠ ``"1"``).

Invariants:
- pure and deterministic: the same candidates and query give the same results, in the same
  order, in every process;
- fail closed: in ``vector`` and ``hybrid`` mode every candidate must carry a vector of the
  search's embedding identity; one that does not (indexed with another identity, never
  indexed, or of the wrong length) refuses the whole search with a ``PersistenceError`` that
  names ``agentctl memory reindex`` — a search never silently skips entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm.embedding import (
    DEFAULT_MODEL,
    EmbeddingIdentity,
    cosine,
    local_hash,
    tokens,
)
from agentctl.errors import PersistenceError, ValidationError

MODES = ("text", "vector", "hybrid")
DEFAULT_LIMIT, MAX_RESULTS = 10, 100
MAX_QUERY_BYTES = 65_536
MAX_CANDIDATES = 10_000  # active entries one search may scan
_MILLION = 1_000_000


@dataclass(frozen=True)
class SearchQuery:
    """One validated search."""

    namespace: str
    query: str
    mode: str = "text"
    limit: int = DEFAULT_LIMIT
    filters: JsonObject = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {
            "namespace": self.namespace,
            "query": self.query,
            "mode": self.mode,
            "limit": self.limit,
            "filters": dict(self.filters),
        }


@dataclass(frozen=True)
class Candidate:
    """One stored, unexpired entry as a search sees it."""

    key: str
    value: JsonValue
    text: str
    metadata: JsonObject
    embedding: EmbeddingIdentity | None = None  # None: never indexed
    vector: tuple[float, ...] | None = None


def search_query_of(args: Mapping[str, JsonValue], namespace: str) -> SearchQuery:
    """The search ``args`` (a task's ``with`` or the CLI's options) ask for."""
    query = args.get("query", args.get("text"))
    if "query" in args and "text" in args:
        raise ValidationError("give the search text as `query` or `text`, not both")
    if not isinstance(query, str):
        raise ValidationError(f"`query` must be a string, got {query!r}")
    if len(query.encode("utf-8")) > MAX_QUERY_BYTES:
        raise ValidationError(f"`query` is longer than {MAX_QUERY_BYTES} bytes")
    mode = args.get("mode", "text")
    if mode not in MODES:
        raise ValidationError(f"`mode` must be one of {', '.join(MODES)}, got {mode!r}")
    limit = args.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
        raise ValidationError(f"`limit` must be an integer 1..{MAX_RESULTS}, got {limit!r}")
    filters = args.get("filters") or {}
    if not isinstance(filters, dict):
        raise ValidationError(f"`filters` must be an object, got {filters!r}")
    return SearchQuery(namespace, query, str(mode), limit, filters)


def literal_search_problems(given: Mapping[str, JsonValue]) -> list[tuple[str, str]]:
    """What ``check`` can tell about a search's literal ``with`` values (templates render later)."""
    literal = {k: v for k, v in given.items() if not (isinstance(v, str) and "${{" in v)}
    probe: JsonObject = {"query": "", **literal}
    probe.pop("text", None)
    found: list[tuple[str, str]] = []
    for key in ("mode", "limit", "filters", "query"):
        if key not in literal:
            continue
        try:
            search_query_of({k: probe[k] for k in ("query", key) if k in probe}, "default")
        except ValidationError as exc:
            found.append((key, f"is invalid: {exc.message}"))
    return found


def rank(
    search: SearchQuery, candidates: Iterable[Candidate], identity: EmbeddingIdentity
) -> list[JsonObject]:
    """The ordered results of ``search`` over ``candidates``."""
    kept = [c for c in candidates if _matches(c.metadata, search.filters)]
    wanted = set(tokens(search.query))
    probe = local_hash(search.query, identity) if search.mode != "text" else ()
    scored: list[tuple[int, str, Candidate]] = []
    for candidate in kept:
        score = _score(search, wanted, probe, candidate, identity)
        if score > 0:
            scored.append((score, candidate.key, candidate))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [_result(score, c) for score, _, c in scored[: search.limit]]


def _matches(metadata: Mapping[str, JsonValue], filters: Mapping[str, JsonValue]) -> bool:
    return all(
        name in metadata and canonical_json(metadata[name]) == canonical_json(wanted)
        for name, wanted in filters.items()
    )


def _score(
    search: SearchQuery,
    wanted: set[str],
    probe: Sequence[float],
    candidate: Candidate,
    identity: EmbeddingIdentity,
) -> int:
    text = _overlap(wanted, candidate.text) if search.mode != "vector" else 0.0
    if search.mode == "text":
        return round(text * _MILLION)
    vector = max(0.0, cosine(probe, _vector_of(candidate, identity, search.namespace)))
    both = vector if search.mode == "vector" else (text + vector) / 2
    return round(both * _MILLION)


def _overlap(wanted: set[str], text: str) -> float:
    if not wanted:
        return 0.0
    return len(wanted & set(tokens(text))) / len(wanted)


def _vector_of(
    candidate: Candidate, identity: EmbeddingIdentity, namespace: str
) -> tuple[float, ...]:
    vector = candidate.vector
    if candidate.embedding != identity or vector is None or len(vector) != identity.dimensions:
        found = candidate.embedding.label() if candidate.embedding else "no embedding"
        model = f" --model {identity.model}" if identity.model != DEFAULT_MODEL else ""
        raise PersistenceError(
            f"long-term entry {namespace}/{candidate.key} is indexed with {found}, not "
            f"{identity.label()}; rebuild the namespace's vectors with `agentctl memory "
            f"reindex {namespace} --dimensions {identity.dimensions}{model}`"
        )
    return vector


def _result(score: int, candidate: Candidate) -> JsonObject:
    return {
        "key": candidate.key,
        "score": score,
        "value": candidate.value,
        "text": candidate.text,
        "metadata": dict(candidate.metadata),
    }

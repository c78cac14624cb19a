"""Long-term memory, the pure part: entries, the ``local_hash`` embedding and search ranking.

The ledger stores entries (``agentctl.ledger.longterm``), the coordinator runs the workflow
actions (``coordinator/local.py``) and the CLI administers them (``agentctl memory``); all three
use these functions, so a search ranks the same whichever path asks.
"""

from agentctl.core.longterm.embedding import (
    DEFAULT_DIMENSIONS,
    DEFAULT_MODEL,
    LOCAL_HASH,
    EmbeddingIdentity,
    local_hash,
    tokens,
)
from agentctl.core.longterm.entries import (
    MAX_ENTRY_BYTES,
    Entry,
    entry_from_args,
    retention_days_of,
)
from agentctl.core.longterm.search import (
    MAX_CANDIDATES,
    MAX_RESULTS,
    Candidate,
    SearchQuery,
    rank,
    search_query_of,
)

__all__ = [
    "DEFAULT_DIMENSIONS",
    "DEFAULT_MODEL",
    "LOCAL_HASH",
    "MAX_CANDIDATES",
    "MAX_ENTRY_BYTES",
    "MAX_RESULTS",
    "Candidate",
    "EmbeddingIdentity",
    "Entry",
    "SearchQuery",
    "entry_from_args",
    "local_hash",
    "rank",
    "retention_days_of",
    "search_query_of",
    "tokens",
]

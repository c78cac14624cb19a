"""The default timeouts of spec/dsl.md, in seconds: one name for each setting a workflow may
leave unset, read by the schema that fills it in and by everything that must assume it when a
document, a plan or a wire request does not carry it; and how an error message says a
number of seconds (``seconds_text``).

Invariant: each setting's default is written here only. The four happen to be equal today;
they are separate names because they are separate settings, each free to change alone.
"""

from __future__ import annotations

# ``spec.runtime.defaultTimeoutSeconds``: a task's timeout when neither the task nor its
# action sets one (not applied to agent tasks, whose calls have their own below).
TASK_TIMEOUT_SECONDS = 120

# An agent's ``timeoutSeconds``: each provider (model) call of its loop.
AGENT_CALL_TIMEOUT_SECONDS = 120

# ``spec.mcpServers.*.timeoutSeconds``: each request to an MCP server.
MCP_TIMEOUT_SECONDS = 120

# ``spec.a2aPeers.*.timeoutSeconds``: each HTTP call to an A2A peer.
A2A_TIMEOUT_SECONDS = 120


def seconds_text(seconds: float) -> str:
    """``seconds`` as an error message says it: to a tenth of a second, without float noise
    or a trailing ``.0`` (``2``, ``2.5``; what is left of a deadline, 1.99998…, is ``2``); a
    bound under a tenth keeps two significant digits rather than reading as ``0``."""
    if seconds < 0.1:
        return f"{seconds:.2g}"
    return f"{seconds:.1f}".removesuffix(".0")

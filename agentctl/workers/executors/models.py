"""Model calls: the credential-free ``fake`` provider (spec/dsl.md §5 "Fake provider").

One call is one effect. The request carries everything the answer depends on — the call
number within the run (the provider instance's counter, kept by the coordinator so it is
shared by every task using the provider), the scripted options and the conversation — so the
answer is a pure function of the recorded request.

Invariants: a scripted transient failure is a retryable provider error (HTTP 503); usage is
always one input and one output token; a tool call names the agent's first tool, id
``fake-call-1``, only while no tool result exists yet. With ``stream`` the answer is also sent
as fragments through the effect's awaited sink, deterministically: one ``text`` fragment per
word of the final text (each word with the blanks after it), or one ``tool_arguments``
fragment with the tool call's JSON arguments; the answer then carries them as ``fragments``
(with ``droppedFragments``), as every adapter's streamed answer does.
"""

from __future__ import annotations

import json
import re
from typing import Any

import trio

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import ProviderError
from agentctl.mailbox.messages import Execute, FragmentKind
from agentctl.workers.executors import ExecOutcome
from agentctl.workers.stream import Fragments

USAGE: JsonObject = {
    "inputTokens": 1,
    "outputTokens": 1,
    "reasoningTokens": 0,
    "cacheReadTokens": 0,
    "cacheWriteTokens": 0,
}


async def execute_fake(msg: Execute) -> ExecOutcome:
    req = msg.request
    options: dict[str, Any] = dict(req.get("options") or {})
    delay_ms = int(options.get("delayMs") or 0)
    if delay_ms:
        await trio.sleep(delay_ms / 1000)
    if int(req.get("callNumber") or 0) <= int(options.get("failFirst") or 0):
        raise ProviderError("HTTP 503: scripted transient failure", retryable=True)
    messages: list[dict[str, Any]] = list(req.get("messages") or [])
    tools: list[str] = list(req.get("tools") or [])
    has_result = any(m.get("role") == "tool" for m in messages)
    if options.get("toolInput") is not None and tools and not has_result:
        call = {"id": "fake-call-1", "name": tools[0], "arguments": options["toolInput"]}
        response: JsonObject = {
            "finish": "tool_calls",
            "toolCalls": [call],
            "text": "",
            "usage": USAGE,
        }
        if req.get("stream"):
            pieces = [json.dumps(options["toolInput"], sort_keys=True)]
            response.update(await _stream("tool_arguments", pieces))
        return ExecOutcome(response, usage=_usage())
    latest = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    text = options.get("finalText")
    if not isinstance(text, str):
        text = f"fake: {latest}"
    response = {"finish": "complete", "toolCalls": [], "text": text, "usage": USAGE}
    if req.get("stream"):
        response.update(await _stream("text", re.findall(r"\S+\s*", text)))
    return ExecOutcome(response, usage=_usage())


async def _stream(kind: FragmentKind, pieces: list[str]) -> JsonObject:
    """Send ``pieces`` as the answer's fragments, each persisted before the next; the
    ``fragments`` and ``droppedFragments`` a streamed answer carries, as every adapter's."""
    fragments = Fragments()
    for number, piece in enumerate(pieces):
        await fragments.add(kind, piece, number)
    return {"fragments": list(fragments.items), "droppedFragments": fragments.dropped}


def _usage() -> dict[str, int]:
    return {"providerRequests": 1, "inputTokens": 1, "outputTokens": 1}

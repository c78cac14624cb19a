"""``anthropic`` (model call): the Anthropic Messages API (``POST {endpoint}``, default
``https://api.anthropic.com/v1/messages``) through the official ``anthropic`` SDK.

Invariants: the SDK gets our egress-bound ``httpx2`` client and ``max_retries=0`` and is
imported with this module, in the worker only (``common.import_sdk``: never inside a call's
timeout); the endpoint is the full ``…/v1/messages`` URL; consecutive
messages of one role are merged (the API wants user and assistant turns to alternate, and
several tool results answer one assistant turn); streaming is refused, as the capability
table of spec/dsl.md §5 says (``check`` refuses it first).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.providerdefaults import ENDPOINT_SUFFIXES, endpoint_problem
from agentctl.errors import ProviderError, ValidationError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome, UncertainEffect
from agentctl.workers.executors.providers.common import (
    BilledFailure,
    Reply,
    import_sdk,
    not_json,
    run_model_call,
    system_text,
    tool_output_text,
)

import_sdk("anthropic")
SUFFIX = ENDPOINT_SUFFIXES["anthropic"]
FINISH = {
    None: "complete",
    "end_turn": "complete",
    "stop_sequence": "complete",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",  # cut at the context limit
    "refusal": "refusal",
}
# The API's effort levels start at low: "none" sends no effort (the model's default).
NO_EFFORT = "none"


async def execute_anthropic(msg: Execute) -> ExecOutcome:
    return await run_model_call(msg, _call, status_of)


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    from anthropic import AsyncAnthropic, Omit

    if req.stream:
        raise ValidationError("anthropic providers do not stream (spec/dsl.md §5)")
    problem = endpoint_problem("anthropic", req.endpoint)
    if problem is not None:
        raise ValidationError(problem)
    # The Messages API's documented key header is x-api-key; this SDK would send the key as
    # a bearer token instead, so the header is set here and Authorization left out per call.
    client: Any = AsyncAnthropic(
        api_key=req.credential,
        base_url=req.endpoint.rstrip("/").removesuffix(SUFFIX),
        http_client=http,
        max_retries=0,
        default_headers={**req.headers, "x-api-key": req.credential},
        timeout=req.timeout_seconds,
    )
    no_bearer = {"Authorization": Omit()}
    try:
        message = await client.messages.create(**request_params(req), extra_headers=no_bearer)
    except json.JSONDecodeError:  # a JSON content type, a body that is not JSON
        raise not_json(req.provider) from None
    if isinstance(message, str):  # another content type: the SDK hands back the text
        raise not_json(req.provider)
    try:
        return normalize(message)
    except (TypeError, AttributeError, ValueError):
        # A block or a usage count of the wrong type (the SDK does not validate them): said in
        # our words, and still uncertain, as any failure after the request left.
        text = (
            "the request was sent, then its answer could not be read: a content block or a "
            "usage count has the wrong type; it may have run"
        )
        raise UncertainEffect(ProviderError(text)) from None


def status_of(exc: BaseException) -> tuple[int, str] | None:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        # The API's own words, as for the other providers: the SDK's message repeats the
        # status and appends the request path. Cut only after redaction (``translate``).
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        return exc.status_code, said if isinstance(said, str) else exc.response.text
    return None


def request_params(req: ModelRequest) -> JsonObject:
    """The ``messages.create`` parameters of one call."""
    turns: list[JsonValue] = [*messages(req.messages)]
    params: JsonObject = {"model": req.model, "max_tokens": req.max_output_tokens}
    params["messages"] = turns
    system = system_text(req.messages)
    if system:
        params["system"] = system
    if req.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in req.tools
        ]
    output: JsonObject = {}
    if req.structured_output is not None:
        output["format"] = {"type": "json_schema", "schema": req.structured_output}
    if req.reasoning is not None and req.reasoning.effort != NO_EFFORT:
        output["effort"] = req.reasoning.effort
    if output:
        params["output_config"] = output
    return params


def messages(conversation: list[JsonObject]) -> list[JsonObject]:
    """The conversation as alternating Messages turns of content blocks."""
    turns: list[JsonObject] = []
    for message in conversation:
        role, blocks = _blocks(message)
        if not blocks:
            continue
        last = turns[-1] if turns else None
        if last is not None and last["role"] == role and isinstance(last["content"], list):
            last["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(message: JsonObject) -> tuple[str, list[JsonValue]]:
    role = message.get("role")
    if role == "user":
        return "user", [{"type": "text", "text": str(message.get("content") or "")}]
    if role == "assistant":
        blocks: list[JsonValue] = []
        if message.get("content"):
            blocks.append({"type": "text", "text": str(message["content"])})
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": call.get("name"),
                        "input": call.get("arguments"),
                    }
                )
        return "assistant", blocks
    if role == "tool":
        result: JsonObject = {
            "type": "tool_result",
            "tool_use_id": message.get("toolCallId"),
            "content": tool_output_text(message.get("content")),
        }
        return "user", [result]
    return "system", []  # system text goes to the `system` parameter


def normalize(message: Any) -> Reply:
    """A Messages ``Message`` object as our reply. The SDK builds its models without
    validating them, so an answer without a ``content`` list is refused here: a definitive
    failure, not a crash of this function (which would leave the call uncertain)."""
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise ProviderError("the answer is not a Messages object: it has no content list")
    stop = getattr(message, "stop_reason", None)
    usage = _usage(getattr(message, "usage", None))
    if stop not in FINISH:  # pause_turn, or a reason this version does not know: billed
        text = f"the model stopped without an answer (stop_reason {stop})"
        raise BilledFailure(ProviderError(text), usage)
    reply = Reply(finish=FINISH[stop], usage=usage)
    texts: list[str] = []
    for block in content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            reply.tool_calls.append({"id": block.id, "name": block.name, "arguments": block.input})
    reply.text = "".join(texts)
    return reply


def _usage(usage: Any) -> dict[str, int]:
    """The normalized usage (``common.USAGE_KEYS``). The API's ``input_tokens`` counts only
    the input after the last cache breakpoint: the cache reads and writes are added to make
    it all the input. ``output_tokens`` already includes the thinking."""
    details = getattr(usage, "output_tokens_details", None)
    cache_read = getattr(usage, "cache_read_input_tokens", 0) or 0
    cache_write = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return {
        "inputTokens": (getattr(usage, "input_tokens", 0) or 0) + cache_read + cache_write,
        "outputTokens": getattr(usage, "output_tokens", 0) or 0,
        "reasoningTokens": getattr(details, "thinking_tokens", 0) or 0,
        "cacheReadTokens": cache_read,
        "cacheWriteTokens": cache_write,
    }

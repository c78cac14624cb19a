"""``model.openai``: the OpenAI Responses API (``POST {endpoint}``, default
``https://api.openai.com/v1/responses``) through the official ``openai`` SDK.

The Azure adapter reuses ``respond`` (same API, another client). The SDK is imported when a
call runs, never at module import.

Invariants: the SDK gets our egress-bound ``httpx2`` client and ``max_retries=0``; the
endpoint is the full ``…/responses`` URL, the SDK's base URL is what precedes it; tool calls
come back with the API's ``call_id`` as their id, so the tool result of the next turn
answers the same id; each streamed delta goes through the effect's awaited stream sink
(persisted by the coordinator before the next event is read) and into the bounded
``fragments`` beside the final reply.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import ProviderError, ValidationError
from agentctl.mailbox.messages import Execute, FragmentKind
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome, UncertainEffect
from agentctl.workers.executors.providers.common import (
    Fragments,
    Reply,
    parse_arguments,
    run_model_call,
    system_text,
    tool_output_text,
)

SUFFIX = "/responses"
# Stream event type → fragment kind.
DELTA_KINDS: dict[str, FragmentKind] = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "refusal",
    "response.function_call_arguments.delta": "tool_arguments",
    "response.reasoning_summary_text.delta": "reasoning",
}
# The API's effort levels stop at xhigh; "max" asks for the most it offers.
EFFORTS = {"max": "xhigh"}
# providerOptions (spec/dsl.md §5) → Responses parameters. promptCacheMode / promptCacheTtl are
# accepted by the compiler but have no Responses parameter: OpenAI caches prompts implicitly.
OPTION_PARAMS = {
    "store": "store",
    "parallelToolCalls": "parallel_tool_calls",
    "safetyIdentifier": "safety_identifier",
}


async def execute_openai(msg: Execute) -> ExecOutcome:
    return await run_model_call(msg, _call, status_of)


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    from openai import AsyncOpenAI

    if not req.endpoint.rstrip("/").endswith(SUFFIX):
        raise ValidationError(f"an openai endpoint ends with {SUFFIX}: {req.endpoint}")
    client = AsyncOpenAI(
        api_key=req.credential,
        base_url=req.endpoint.rstrip("/").removesuffix(SUFFIX),
        http_client=http,
        max_retries=0,
        default_headers=req.headers,
        timeout=req.timeout_seconds,
    )
    return await respond(client, req)


def status_of(exc: BaseException) -> tuple[int, str] | None:
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code, exc.message
    return None


async def respond(client: Any, req: ModelRequest) -> Reply:
    """One Responses call on ``client`` (``AsyncOpenAI`` or ``AsyncAzureOpenAI``)."""
    params = request_params(req)
    if req.stream:
        return await _streamed(client, params)
    return normalize(await client.responses.create(**params))


def request_params(req: ModelRequest) -> JsonObject:
    """The ``responses.create`` parameters of one call."""
    items: list[JsonValue] = [*input_items(req.messages)]
    params: JsonObject = {"model": req.model, "input": items}
    params["max_output_tokens"] = req.max_output_tokens
    instructions = system_text(req.messages)
    if instructions:
        params["instructions"] = instructions
    if req.tools:
        params["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
                "strict": False,
            }
            for tool in req.tools
        ]
    if req.structured_output is not None:
        schema: JsonObject = {"type": "json_schema", "name": "output", "strict": False}
        params["text"] = {"format": {**schema, "schema": req.structured_output}}
    if req.reasoning is not None:
        reasoning: JsonObject = {"effort": EFFORTS.get(req.reasoning.effort, req.reasoning.effort)}
        if req.reasoning.mode:
            reasoning["summary"] = req.reasoning.mode
        params["reasoning"] = reasoning
    for option, param in OPTION_PARAMS.items():
        if option in req.options:
            params[param] = req.options[option]
    if req.options.get("reasoningContext") in ("auto", "all_turns"):
        params["include"] = ["reasoning.encrypted_content"]
    return params


def input_items(messages: list[JsonObject]) -> list[JsonObject]:
    """The conversation as Responses input items (system text goes to ``instructions``)."""
    items: list[JsonObject] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            items.append({"role": "user", "content": str(message.get("content") or "")})
        elif role == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": str(message["content"])})
            for call in _calls(message):
                arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": call.get("name"),
                        "arguments": arguments,
                    }
                )
        elif role == "tool":
            output = tool_output_text(message.get("content"))
            call_id = message.get("toolCallId")
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return items


def _calls(message: JsonObject) -> list[JsonObject]:
    calls = message.get("toolCalls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def normalize(response: Any) -> Reply:
    """A Responses ``Response`` object as our reply."""
    reply = Reply(usage=_usage(response.usage))
    texts: list[str] = []
    for item in response.output or []:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    texts.append(part.text)
                elif part.type == "refusal":
                    texts.append(part.refusal)
                    reply.finish = "refusal"
        elif item.type == "function_call":
            arguments = parse_arguments(item.arguments)
            reply.tool_calls.append({"id": item.call_id, "name": item.name, "arguments": arguments})
    reply.text = "".join(texts)
    if response.status == "incomplete" and reply.finish == "complete":
        reason = getattr(response.incomplete_details, "reason", None)
        reply.finish = "max_tokens" if reason == "max_output_tokens" else "refusal"
    return reply


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    output_details = getattr(usage, "output_tokens_details", None)
    input_details = getattr(usage, "input_tokens_details", None)
    return {
        "inputTokens": usage.input_tokens or 0,
        "outputTokens": usage.output_tokens or 0,
        "reasoningTokens": getattr(output_details, "reasoning_tokens", 0) or 0,
        "cacheReadTokens": getattr(input_details, "cached_tokens", 0) or 0,
        "cacheWriteTokens": getattr(input_details, "cache_write_tokens", 0) or 0,
    }


async def _streamed(client: Any, params: JsonObject) -> Reply:
    fragments = Fragments()
    final: Any = None
    stream = await client.responses.create(**params, stream=True)
    async with stream:
        async for event in stream:
            kind = DELTA_KINDS.get(event.type)
            if kind is not None:
                # Awaited: the fragment is durable before the next event is read.
                await fragments.add(kind, event.delta, getattr(event, "sequence_number", None))
            elif event.type in ("response.completed", "response.incomplete"):
                final = event.response
            elif event.type in ("response.failed", "error"):
                raise _stream_error(event)
    if final is None:
        raise UncertainEffect(ProviderError("the answer stream ended before its final event"))
    reply = normalize(final)
    reply.fragments = fragments
    return reply


def _stream_error(event: Any) -> ProviderError:
    error = event.response.error if event.type == "response.failed" else event
    code = str(getattr(error, "code", "") or "")
    message = str(getattr(error, "message", "") or "the model failed")
    retryable = code in ("server_error", "rate_limit_exceeded")
    return ProviderError(
        f"the answer stream failed ({code or 'no code'}): {message}", retryable=retryable
    )

"""``openai`` (model call): the OpenAI Responses API (``POST {endpoint}``, default
``https://api.openai.com/v1/responses``), spoken over our egress-bound ``httpx2`` client.

The wire format is the published one — request parameters, the ``Response`` object, the
streamed events (server-sent events whose data is the event object) — and the test fixtures
prove their replies parse with the official ``openai`` SDK. The SDK itself is not used here:
importing it costs about half a second of CPU in each worker, before the first request of a
run could leave. The Azure adapter reuses ``respond`` (same API, another URL and key header).

Invariants: one call is one HTTP request (nothing retries); the endpoint is the full
``…/responses`` URL and the key travels as ``Authorization: Bearer``, the provider's
``headers`` after it (they may override it, as with the SDK's default headers); tool calls
come back with the API's ``call_id`` as their id, so the tool result of the next turn answers
the same id; each streamed delta goes through the effect's awaited stream sink (persisted by
the coordinator before the next event is read) and into the bounded ``fragments`` beside the
final reply; an HTTP error answer is a ``ProviderError`` (429 / 5xx retryable); a streamed
event that is not a JSON object is a definitive ``ProviderError`` (the server answered), a
stream that ends before its final event an uncertain one, and nothing after the final event
(``response.completed`` / ``response.incomplete``, which holds the whole Response) is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx2

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.core.providerdefaults import endpoint_problem
from agentctl.errors import ProviderError, ValidationError
from agentctl.mailbox.messages import Execute, FragmentKind
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome, UncertainEffect
from agentctl.workers.executors.providers.common import (
    BilledFailure,
    Reply,
    answer_json,
    check_status,
    parse_arguments,
    redactor_of,
    run_model_call,
    system_text,
    tool_output_text,
)
from agentctl.workers.executors.providers.sse import read_events
from agentctl.workers.stream import Fragments

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
    return await run_model_call(msg, _call)


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    problem = endpoint_problem("openai", req.endpoint)
    if problem is not None:
        raise ValidationError(problem)
    headers = {"Authorization": f"Bearer {req.credential}", **req.headers}
    return await respond(http, Endpoint(req.endpoint.rstrip("/"), headers), req)


@dataclass(frozen=True)
class Endpoint:
    """Where one Responses call goes: URL, query and headers (the key's included)."""

    url: str
    headers: Mapping[str, str]
    query: Mapping[str, str] = field(default_factory=dict)


async def respond(http: httpx2.AsyncClient, endpoint: Endpoint, req: ModelRequest) -> Reply:
    """One Responses call of ``req`` to ``endpoint`` on the egress-bound ``http``."""
    params = request_params(req)
    if req.stream:
        return await _streamed(http, endpoint, {**params, "stream": True}, req)
    headers = {"Accept": "application/json", **endpoint.headers}
    answer = await http.post(endpoint.url, json=params, headers=headers, params=endpoint.query)
    await check_status(answer, req.provider, redactor_of(req))
    return normalize(answer_json(answer, req.provider))


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


def normalize(response: JsonObject) -> Reply:
    """A Responses ``Response`` object as our reply; a JSON answer without its ``output``
    list is no Response at all — a definitive failure, never an empty success."""
    if not isinstance(response.get("output"), list):
        raise ProviderError("the answer is not a Responses object: it has no output list")
    reply = Reply(usage=_usage(as_object(response.get("usage"))))
    try:
        _check_finished(response)
    except ProviderError as exc:  # a failed Response may still report what it used: billed
        raise BilledFailure(exc, reply.usage) from None
    texts: list[str] = []
    for item in _objects(response.get("output")):
        if item.get("type") == "message":
            for part in _objects(item.get("content")):
                if part.get("type") == "output_text":
                    texts.append(_text(part.get("text")))
                elif part.get("type") == "refusal":
                    texts.append(_text(part.get("refusal")))
                    reply.finish = "refusal"
        elif item.get("type") == "function_call":
            arguments = parse_arguments(_text(item.get("arguments")))
            call_id, name = item.get("call_id"), item.get("name")
            reply.tool_calls.append({"id": call_id, "name": name, "arguments": arguments})
    reply.text = "".join(texts)
    if response.get("status") == "incomplete" and reply.finish == "complete":
        reason = as_object(response.get("incomplete_details")).get("reason")
        reply.finish = "max_tokens" if reason == "max_output_tokens" else "refusal"
    return reply


def _check_finished(response: JsonObject) -> None:
    """Only a ``completed`` or ``incomplete`` Response is an answer: a ``failed`` one is the
    model's failure (retryable as its error code says, like ``response.failed`` in a stream),
    and a ``queued``, ``in_progress`` or ``cancelled`` one holds no answer at all."""
    status = response.get("status")
    if status is None or status in ("completed", "incomplete"):
        return
    if status == "failed":
        raise _stream_error({"type": "response.failed", "response": response}, streamed=False)
    raise ProviderError(f"the Response is {status}, not a finished answer")


def _objects(value: JsonValue) -> list[JsonObject]:
    return [v for v in as_list(value) if isinstance(v, dict)]


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


def _count(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(usage: JsonObject) -> dict[str, int]:
    """The normalized usage (``common.USAGE_KEYS``), as the API counts it: ``input_tokens``
    includes the cached and cache-written tokens, ``output_tokens`` the reasoning."""
    if not usage:
        return {}
    output_details = as_object(usage.get("output_tokens_details"))
    input_details = as_object(usage.get("input_tokens_details"))
    return {
        "inputTokens": _count(usage.get("input_tokens")),
        "outputTokens": _count(usage.get("output_tokens")),
        "reasoningTokens": _count(output_details.get("reasoning_tokens")),
        "cacheReadTokens": _count(input_details.get("cached_tokens")),
        "cacheWriteTokens": _count(input_details.get("cache_write_tokens")),
    }


async def _streamed(
    http: httpx2.AsyncClient, endpoint: Endpoint, params: JsonObject, req: ModelRequest
) -> Reply:
    provider = req.provider
    fragments = Fragments()
    final: JsonObject | None = None
    headers = {**endpoint.headers, "Accept": "text/event-stream"}
    request = http.stream("POST", endpoint.url, json=params, headers=headers, params=endpoint.query)
    async with request as answer:
        await check_status(answer, provider, redactor_of(req))
        if not _is_event_stream(answer):
            # A server that does not stream answered whole: that answer is definitive (nothing
            # was cut off), taken as the non-streamed call's would be, or failed as one.
            await answer.aread()
            return normalize(answer_json(answer, provider))
        async for sse in read_events(answer.aiter_lines()):
            event = _event(sse.data, provider)
            kind = DELTA_KINDS.get(_text(event.get("type")))
            if kind is not None:
                # Awaited: the fragment is durable before the next event is read.
                sequence = event.get("sequence_number")
                number = sequence if isinstance(sequence, int) else None
                await fragments.add(kind, _text(event.get("delta")), number)
            elif event.get("type") in ("response.completed", "response.incomplete"):
                # The final event carries the whole Response: the answer is known, so nothing
                # after it is read — a trailing line ("[DONE]", garbage) cannot unsettle it.
                final = as_object(event.get("response"))
                break
            elif event.get("type") in ("response.failed", "error") or sse.event == "error":
                raise _stream_error(event)
    if final is None:
        raise UncertainEffect(ProviderError("the answer stream ended before its final event"))
    reply = normalize(final)
    reply.fragments = fragments
    return reply


def _is_event_stream(answer: httpx2.Response) -> bool:
    """Whether the answer says it is ``text/event-stream``; one with no content type is read
    as a stream (the default of a server asked for one)."""
    media = answer.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media in ("", "text/event-stream")


def _event(data: str, provider: str) -> JsonObject:
    """One streamed event's object. Anything else fails the call definitively, as a 200 body
    that is not JSON does: the server received the request and answered — with garbage — so
    nothing is unknown (a lost connection is what makes a call uncertain), and resending would
    run the model again. Deltas already persisted stay as progress records: they were never
    the answer, which only the final event holds (and nothing after that one is read)."""
    try:
        event: JsonValue = json.loads(data)
    except json.JSONDecodeError:
        event = None
        what = "not JSON"
    else:
        what = "not a JSON object"
    if not isinstance(event, dict):
        raise ProviderError(f"provider {provider}: the answer stream sent an event that is {what}")
    return event


def _stream_error(event: JsonObject, streamed: bool = True) -> ProviderError:
    failed = event.get("type") == "response.failed"
    error = as_object(as_object(event.get("response")).get("error")) if failed else event
    code = str(error.get("code") or "")
    message = str(error.get("message") or "the model failed")
    retryable = code in ("server_error", "rate_limit_exceeded")
    what = "the answer stream failed" if streamed else "the Response failed"
    return ProviderError(f"{what} ({code or 'no code'}): {message}", retryable=retryable)

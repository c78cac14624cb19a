"""``google`` (model call): Gemini ``generateContent``
(``POST {endpoint}/{model}:generateContent``, default endpoint
``https://generativelanguage.googleapis.com/v1beta/models``) through the official
``google-genai`` SDK.

Invariants: the SDK gets our egress-bound ``httpx2`` client, one attempt
(``HttpRetryOptions(attempts=1)``, which also turns its implicit retries off), no automatic
function calling, and is imported with this module, in the worker only
(``common.import_sdk``: never inside a call's timeout); the endpoint ends with
``/{apiVersion}/models``, from which the SDK's base URL and API version are taken; a function
call without an id gets ``call-N`` (its position), echoed back with its result; streaming is
refused, as the capability table of spec/dsl.md §5 says.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.providerdefaults import ENDPOINT_SUFFIXES, endpoint_problem
from agentctl.errors import ProviderError, ValidationError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ModelRequest
from agentctl.workers.executors import ExecOutcome
from agentctl.workers.executors.providers.common import (
    BilledFailure,
    Reply,
    import_sdk,
    not_json,
    run_model_call,
    system_text,
)

import_sdk("google.genai", "google.genai.errors", "google.genai.types")
SUFFIX = ENDPOINT_SUFFIXES["google"]
LEVELS = {"low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH", "max": "HIGH"}
FINISHED = frozenset({None, "STOP", "FINISH_REASON_UNSPECIFIED"})  # a complete answer
REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE"}
)


async def execute_google(msg: Execute) -> ExecOutcome:
    return await run_model_call(msg, _call, status_of)


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """(SDK base URL, API version) of ``https://host/…/v1beta/models``."""
    problem = endpoint_problem("google", endpoint)
    if problem is not None:
        raise ValidationError(problem)
    base, _, version = endpoint.rstrip("/").removesuffix(SUFFIX).rpartition("/")
    return base, version


async def _call(req: ModelRequest, http: httpx2.AsyncClient) -> Reply:
    from google import genai
    from google.genai import errors, types

    # The SDK logs a warning on stderr (the user's terminal: workers share it) whenever an
    # answer holds a function call; our reply carries the calls, so the warning is noise.
    logging.getLogger("google_genai").setLevel(logging.ERROR)
    if req.stream:
        raise ValidationError("google providers do not stream (spec/dsl.md §5)")
    base, version = split_endpoint(req.endpoint)
    options = types.HttpOptions(
        base_url=base,
        api_version=version,
        headers=dict(req.headers),
        timeout=int(req.timeout_seconds * 1000),
        httpx_async_client=http,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    # vertexai=False: the Gemini API, whatever GOOGLE_GENAI_USE_VERTEXAI says.
    client: Any = genai.Client(api_key=req.credential, vertexai=False, http_options=options)
    try:
        response = await client.aio.models.generate_content(
            model=req.model, contents=contents(req.messages), config=config(req)
        )
    except (json.JSONDecodeError, errors.UnknownApiResponseError):  # a body that is not JSON
        raise not_json(req.provider) from None
    return normalize(response)


def status_of(exc: BaseException) -> tuple[int, str] | None:
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        return int(exc.code), str(exc.message or exc.status or "")
    return None


def config(req: ModelRequest) -> JsonObject:
    """The ``GenerateContentConfig`` of one call."""
    result: JsonObject = {
        "max_output_tokens": req.max_output_tokens,
        "automatic_function_calling": {"disable": True},
    }
    system = system_text(req.messages)
    if system:
        result["system_instruction"] = system
    if req.tools:
        declarations: list[JsonValue] = [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.input_schema}
            for t in req.tools
        ]
        result["tools"] = [{"function_declarations": declarations}]
    if req.structured_output is not None:
        result["response_mime_type"] = "application/json"
        result["response_json_schema"] = req.structured_output
    if req.reasoning is not None:
        effort = req.reasoning.effort
        thinking: JsonObject = (
            {"thinking_budget": 0} if effort == "none" else {"thinking_level": LEVELS[effort]}
        )
        result["thinking_config"] = thinking
    return result


def contents(conversation: list[JsonObject]) -> list[JsonObject]:
    """The conversation as ``Content`` turns (system text goes to ``system_instruction``)."""
    turns: list[JsonObject] = []
    for message in conversation:
        role, parts = _parts(message)
        if not parts:
            continue
        last = turns[-1] if turns else None
        if last is not None and last["role"] == role and isinstance(last["parts"], list):
            last["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    return turns


def _parts(message: JsonObject) -> tuple[str, list[JsonValue]]:
    role = message.get("role")
    if role == "user":
        return "user", [{"text": str(message.get("content") or "")}]
    if role == "assistant":
        parts: list[JsonValue] = []
        if message.get("content"):
            parts.append({"text": str(message["content"])})
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                args = call.get("arguments")
                function: JsonObject = {"id": call.get("id"), "name": call.get("name")}
                parts.append({"function_call": {**function, "args": args}})
        return "model", parts
    if role == "tool":
        answer: JsonObject = {"id": message.get("toolCallId"), "name": message.get("name")}
        answer["response"] = {"output": message.get("content")}
        return "user", [{"function_response": answer}]
    return "system", []


def normalize(response: Any) -> Reply:
    """A ``GenerateContentResponse`` as our reply."""
    reply = Reply(usage=_usage(response.usage_metadata))
    candidates = response.candidates or []
    if not candidates:
        if getattr(response.prompt_feedback, "block_reason", None) is None:
            # Neither an answer nor a blocked prompt: not a GenerateContentResponse at all.
            raise ProviderError("the answer is not a GenerateContentResponse: no candidates")
        reply.finish = "refusal"  # the prompt itself was blocked (promptFeedback)
        return reply
    candidate = candidates[0]
    texts: list[str] = []
    parts = candidate.content.parts if candidate.content is not None else None
    for part in parts or []:
        if part.function_call is not None:
            call = part.function_call
            call_id = call.id or f"call-{len(reply.tool_calls) + 1}"
            reply.tool_calls.append({"id": call_id, "name": call.name, "arguments": call.args})
        elif part.text and not part.thought:
            texts.append(part.text)
    reply.text = "".join(texts)
    reason = getattr(candidate.finish_reason, "value", candidate.finish_reason)
    if reason == "MAX_TOKENS":
        reply.finish = "max_tokens"
    elif reason in REFUSALS:
        reply.finish = "refusal"
    elif reason not in FINISHED:
        # MALFORMED_FUNCTION_CALL, OTHER, …: the model stopped without an answer to take, and
        # the tokens it used are billed.
        text = f"the model stopped without an answer (finishReason {reason})"
        raise BilledFailure(ProviderError(text), reply.usage)
    return reply


def _usage(usage: Any) -> dict[str, int]:
    """The normalized usage (``common.USAGE_KEYS``). ``promptTokenCount`` already includes the
    cached content; the input of server-side tools (``toolUsePromptTokenCount``) and the
    thoughts are counted beside the prompt and the candidates (``totalTokenCount`` sums all
    four), so they are added to the input and the output."""
    if usage is None:
        return {}
    thoughts = usage.thoughts_token_count or 0
    return {
        "inputTokens": (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0),
        "outputTokens": (usage.candidates_token_count or 0) + thoughts,
        "reasoningTokens": thoughts,
        "cacheReadTokens": usage.cached_content_token_count or 0,
    }

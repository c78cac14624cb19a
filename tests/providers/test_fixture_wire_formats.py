"""The fixture servers' answers parse with the official SDKs, so the fixtures cannot drift.

Each builder's output is validated strictly by the SDK's own pydantic model, and each kind of
answer is fetched over HTTP by the SDK's real client (its defaults, not our egress client)
and read back through the parsed objects.
"""

from __future__ import annotations

import json

import httpx2
import pytest
from anthropic import AsyncAnthropic
from anthropic.types import Message
from google import genai
from google.genai import types as gtypes
from openai import AsyncOpenAI, RateLimitError
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply


def _http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(trust_env=False)


def test_builders_validate_strictly_against_the_sdk_models() -> None:
    for body in (
        fx.openai_text("hi"),
        fx.openai_tool_call("read_file", {"path": "a.txt"}),
        fx.openai_max_tokens("cut"),
    ):
        Response.model_validate(body)
    events = TypeAdapter(ResponseStreamEvent)
    for event in fx.openai_stream(["a", "b"]):
        events.validate_python(event)
    for body in (fx.anthropic_text("hi"), fx.anthropic_tool_use("read_file", {"path": "a"})):
        Message.model_validate(body)
    for body in (fx.gemini_text("hi"), fx.gemini_function_call("read_file", {"path": "a"})):
        gtypes.GenerateContentResponse.model_validate(body)


async def test_openai_sdk_reads_the_fixture(server: FixtureServer) -> None:
    server.script(
        Reply(body=fx.openai_tool_call("read_file", {"path": "a.txt"})),
        Reply(events=fx.openai_stream(["Hel", "lo"])),
        fx.openai_error(429, "slow down"),
    )
    client = AsyncOpenAI(
        api_key="k", base_url=server.url("/v1"), http_client=_http(), max_retries=0
    )
    called = await client.responses.create(model="m", input="hi")
    call = called.output[0]
    assert call.type == "function_call" and call.name == "read_file"
    assert json.loads(call.arguments) == {"path": "a.txt"}
    assert called.usage is not None and called.usage.output_tokens_details.reasoning_tokens == 3
    stream = await client.responses.create(model="m", input="hi", stream=True)
    kinds = [event.type async for event in stream]
    assert kinds.count("response.output_text.delta") == 2 and kinds[-1] == "response.completed"
    with pytest.raises(RateLimitError):
        await client.responses.create(model="m", input="hi")
    assert [s.path for s in server.seen] == ["/v1/responses"] * 3


async def test_anthropic_sdk_reads_the_fixture(server: FixtureServer) -> None:
    server.script(Reply(body=fx.anthropic_tool_use("read_file", {"path": "a.txt"})))
    client = AsyncAnthropic(
        api_key="k", base_url=server.url(""), http_client=_http(), max_retries=0
    )
    message = await client.messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    )
    block = message.content[0]
    assert block.type == "tool_use" and block.input == {"path": "a.txt"}
    assert message.stop_reason == "tool_use" and message.usage.cache_read_input_tokens == 4
    details = message.usage.output_tokens_details
    assert details is not None and details.thinking_tokens == 3
    assert server.seen[0].path == "/v1/messages"


async def test_gemini_sdk_reads_the_fixture(server: FixtureServer) -> None:
    server.script(Reply(body=fx.gemini_function_call("read_file", {"path": "a.txt"})))
    options = gtypes.HttpOptions(
        base_url=server.url(""), api_version="v1beta", httpx_async_client=_http()
    )
    client = genai.Client(api_key="k", http_options=options)
    response = await client.aio.models.generate_content(model="gem", contents="hi")
    calls = response.function_calls or []
    assert calls[0].name == "read_file" and calls[0].args == {"path": "a.txt"}
    assert response.usage_metadata is not None
    assert response.usage_metadata.thoughts_token_count == 2
    assert response.usage_metadata.tool_use_prompt_token_count == 3
    assert server.seen[0].path == "/v1beta/models/gem:generateContent"

"""Each real-provider adapter in a real worker process, against its fixture server over HTTP.

Requests are made by the real builder (``build_model_call``) and have their secret
references filled the way the coordinator will (``replace_at``), so the builder→worker
contract is tested too. The fixture runs on 127.0.0.1, so tests that must reach it set
``allowPrivate``; the refusal test proves that without it nothing reaches the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentctl.core.builders import build_model_call
from agentctl.core.operations import BuildInput, RunContext, replace_at
from agentctl.mailbox import Execute, Failure, Result
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply
from tests.worker_process import open_worker

KEY = "sk-fixture-SECRET-0042"
HEADER_VALUE = "hdr-SECRET-7"
SECRETS = {"PROVIDER_KEY": KEY, "FIXTURE_HEADER": HEADER_VALUE}
READ_TOOL = {
    "kind": "builtin.workspace.read",
    "description": "Read a workspace file",
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {"path": {"type": "string"}},
    },
}
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Read a.txt"}]
Json = dict[str, Any]


@dataclass(frozen=True)
class Dialect:
    kind: str
    path: str  # the endpoint's path on the fixture
    key_header: tuple[str, str]
    tool_call: Callable[[str, Json], Json]
    text: Callable[[str], Json]
    error: Callable[[int, str], Reply]
    usage: Json
    answered_id: Callable[[Json], str]  # the tool-call id the next request answers
    schema_of: Callable[[Json], Any]  # where the structured-output schema travels
    api_version: str | None = None


OPENAI_USAGE = {"inputTokens": 11, "outputTokens": 7, "reasoningTokens": 3}
OPENAI_USAGE |= {"cacheReadTokens": 5, "cacheWriteTokens": 1}


def _openai_answered(body: Json) -> str:
    return next(i["call_id"] for i in body["input"] if i.get("type") == "function_call_output")


def _openai(kind: str, path: str, header: tuple[str, str], version: str | None) -> Dialect:
    return Dialect(
        kind,
        path,
        header,
        fx.openai_tool_call,
        fx.openai_text,
        fx.openai_error,
        OPENAI_USAGE,
        _openai_answered,
        lambda body: body["text"]["format"]["schema"],
        version,
    )


DIALECTS = [
    _openai("openai", "/v1/responses", ("authorization", f"Bearer {KEY}"), None),
    _openai("azure_openai", "", ("api-key", KEY), "2025-04-01-preview"),
    Dialect(
        "anthropic",
        "/v1/messages",
        ("x-api-key", KEY),
        fx.anthropic_tool_use,
        fx.anthropic_text,
        fx.anthropic_error,
        # input_tokens 13 + the cache's 4 read and 2 written; thinking is part of the output
        {"inputTokens": 19, "outputTokens": 8, "reasoningTokens": 3}
        | {"cacheReadTokens": 4, "cacheWriteTokens": 2},
        lambda body: body["messages"][-1]["content"][0]["tool_use_id"],
        lambda body: body["output_config"]["format"]["schema"],
    ),
    Dialect(
        "google",
        "/v1beta/models",
        ("x-goog-api-key", KEY),
        fx.gemini_function_call,
        fx.gemini_text,
        fx.gemini_error,
        # prompt 17 (the 6 cached among them) + 3 of tool use; candidates 9 + 2 thoughts
        {"inputTokens": 20, "outputTokens": 11, "reasoningTokens": 2}
        | {"cacheReadTokens": 6, "cacheWriteTokens": 0},
        lambda body: body["contents"][-1]["parts"][0]["functionResponse"]["id"],
        lambda body: body["generationConfig"]["responseJsonSchema"],
    ),
]
BY_KIND = {d.kind: d for d in DIALECTS}
each_provider = pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.kind)


def request_for(
    d: Dialect,
    server: FixtureServer,
    messages: list[Json],
    *,
    network: Json | None = None,
    endpoint: str | None = None,
    **agent: Any,
) -> Json:
    """The worker request, built by the real builder, secrets filled as the coordinator will."""
    provider = {
        "kind": d.kind,
        "endpoint": endpoint or server.url(d.path),
        "credential": {"env": "PROVIDER_KEY"},
        "apiVersion": d.api_version,
        "headers": {"X-Fixture": {"env": "FIXTURE_HEADER"}},
    }
    spec = {"provider": "p", "model": "m-1", "tools": ["read_file"], "maxOutputTokens": 256}
    spec |= {"timeoutSeconds": 30, "providerOptions": {}, **agent}
    policy = {
        "networkAllowlist": ["127.0.0.1"],
        "network": {"allowedPorts": [server.port], "allowPrivate": True, **(network or {})},
    }
    config = {"agent": spec, "provider": provider, "tools": {"read_file": READ_TOOL}}
    built = build_model_call(BuildInput("t", "p", config, messages, RunContext("/ws", policy)))
    assert KEY not in json.dumps(built.recorded) and HEADER_VALUE not in json.dumps(built.recorded)
    request = built.request
    for where, ref in built.secret_refs.items():
        request = replace_at(request, where, SECRETS[ref["env"]])
    return request


_ids = iter(range(1_000_000))


def execute(d: Dialect, request: Json, timeout: float = 60) -> Execute:
    return Execute(
        effect_id=f"effect-{next(_ids)}",
        run_id="run-1",
        task_id="t",
        attempt=1,
        operation=d.kind,
        request=request,
        timeout_seconds=timeout,
        executor=f"agentctl.workers.executors.providers.{_MODULES[d.kind]}",
    )


_MODULES = {
    "openai": "openai_responses:execute_openai",
    "azure_openai": "azure_openai:execute_azure_openai",
    "anthropic": "anthropic_messages:execute_anthropic",
    "google": "google_gemini:execute_google",
}


def assert_secret_free(reply: Result | Failure) -> None:
    text = reply.model_dump_json()
    assert KEY not in text and HEADER_VALUE not in text


@each_provider
async def test_tool_call_then_final_answer(d: Dialect, server: FixtureServer) -> None:
    server.script(
        Reply(body=d.tool_call("read_file", {"path": "a.txt"})), Reply(body=d.text("done"))
    )
    async with open_worker() as worker:
        first = await worker.call(execute(d, request_for(d, server, ASK)))
        assert isinstance(first, Result), first
        assert first.output["finish"] == "tool_calls" and first.output["text"] == ""
        (call,) = first.output["toolCalls"]
        assert call["name"] == "read_file" and call["arguments"] == {"path": "a.txt"}
        assert first.output["usage"] == d.usage
        assert first.usage["providerRequests"] == 1
        assert first.usage["inputTokens"] == d.usage["inputTokens"]
        result = {"role": "tool", "toolCallId": call["id"], "name": "read_file"}
        turn = [*ASK, {"role": "assistant", "toolCalls": [call]}, {**result, "content": "hi"}]
        final = await worker.call(execute(d, request_for(d, server, turn)))
    assert isinstance(final, Result), final
    assert final.output == {"finish": "complete", "text": "done", "toolCalls": [], "usage": d.usage}
    assert len(server.seen) == 2
    assert d.answered_id(server.seen[1].body) == call["id"]
    for seen in server.seen:
        name, value = d.key_header
        assert seen.headers[name] == value and seen.headers["x-fixture"] == HEADER_VALUE
        assert name == "authorization" or "authorization" not in seen.headers  # one key header
    for reply in (first, final):
        assert_secret_free(reply)


async def test_the_requests_go_where_each_api_says(server: FixtureServer) -> None:
    """Paths and bodies the fixture saw, per provider (the wire contract, spelled out)."""
    async with open_worker() as worker:
        for d in DIALECTS:
            server.script(Reply(body=d.text("ok")))
            assert isinstance(await worker.call(execute(d, request_for(d, server, ASK))), Result)
    (openai, azure, anthropic, google) = [(s.path, s.query, s.body) for s in server.seen]
    assert openai[0] == "/v1/responses" and openai[2]["instructions"] == "Be brief."
    assert openai[2]["tools"][0]["parameters"] == READ_TOOL["inputSchema"]
    assert azure[0].endswith("/responses") and "api-version=2025-04-01-preview" in azure[1]
    assert anthropic[0] == "/v1/messages" and anthropic[2]["system"] == "Be brief."
    assert anthropic[2]["max_tokens"] == 256
    assert anthropic[2]["tools"][0]["input_schema"] == READ_TOOL["inputSchema"]
    assert google[0] == "/v1beta/models/m-1:generateContent"
    assert google[2]["generationConfig"]["maxOutputTokens"] == 256
    declaration = google[2]["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "read_file"


@each_provider
async def test_structured_output_schema_reaches_the_api(d: Dialect, server: FixtureServer) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    server.script(Reply(body=d.text('{"answer": "42"}')))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, structuredOutput=schema)))
    assert isinstance(reply, Result) and json.loads(reply.output["text"]) == {"answer": "42"}
    assert d.schema_of(server.seen[0].body) == schema


@each_provider
async def test_429_and_503_are_retryable_4xx_is_not(d: Dialect, server: FixtureServer) -> None:
    server.script(
        d.error(429, f"slow down, {KEY}"),
        d.error(503, "overloaded"),
        d.error(400, f"bad request from key {KEY}"),
    )
    async with open_worker() as worker:
        replies = [await worker.call(execute(d, request_for(d, server, ASK))) for _ in range(3)]
    assert [r.error.retryable for r in replies if isinstance(r, Failure)] == [True, True, False]
    for reply in replies:
        assert isinstance(reply, Failure) and not reply.uncertain
        assert reply.error.type == "ProviderError"
        assert_secret_free(reply)
    assert "429" in replies[0].error.message and "[REDACTED]" in replies[2].error.message
    assert len(server.seen) == 3  # one request per call: the SDK retries are off


@each_provider
async def test_slow_answer_times_out_uncertain(d: Dialect, server: FixtureServer) -> None:
    server.script(Reply(body=d.text("late"), delay=60))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, timeoutSeconds=1)))
    assert isinstance(reply, Failure) and reply.uncertain, reply
    assert len(server.seen) == 1  # sent once, never resent
    assert_secret_free(reply)


@each_provider
async def test_redirect_is_not_followed(d: Dialect, server: FixtureServer) -> None:
    target = server.url("/elsewhere")
    server.script(Reply(status=307, headers={"Location": target}), Reply(body=d.text("no")))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure) and reply.error.type == "NetworkPolicyError"
    assert target in reply.error.message and not reply.uncertain
    assert len(server.seen) == 1


@each_provider
async def test_private_endpoint_refused_before_any_request(
    d: Dialect, server: FixtureServer
) -> None:
    server.script(Reply(body=d.text("never")))
    request = request_for(d, server, ASK, network={"allowPrivate": False})
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request))
    assert isinstance(reply, Failure) and reply.error.type == "NetworkPolicyError"
    assert "loopback" in reply.error.message and not reply.uncertain
    assert server.seen == []


@each_provider
async def test_environment_proxies_change_nothing(d: Dialect, server: FixtureServer) -> None:
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens there
    proxies = {"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead, "http_proxy": dead}
    server.script(Reply(body=d.text("direct")))
    async with open_worker(env={**proxies, "NO_PROXY": "", "no_proxy": ""}) as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Result) and reply.output["text"] == "direct"
    assert len(server.seen) == 1


@each_provider
async def test_oversized_answer_is_refused(d: Dialect, server: FixtureServer) -> None:
    server.script(Reply(body=d.text("x" * 50_000)))
    request = request_for(d, server, ASK, network={"maxResponseBytes": 10_000})
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request))
    assert isinstance(reply, Failure) and reply.error.type == "ResponseTooLargeError"
    assert "10000 bytes" in reply.error.message and not reply.uncertain


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
async def test_streamed_answer_returns_its_fragments(kind: str, server: FixtureServer) -> None:
    d = BY_KIND[kind]
    server.script(Reply(events=fx.openai_stream(["Hel", "lo, ", "world"])))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
    assert isinstance(reply, Result), reply
    assert reply.output["text"] == "Hello, world" and reply.output["finish"] == "complete"
    assert reply.output["fragments"] == [
        {"index": 0, "kind": "text", "text": "Hel"},
        {"index": 1, "kind": "text", "text": "lo, "},
        {"index": 2, "kind": "text", "text": "world"},
    ]
    assert server.seen[0].body["stream"] is True
    # Each delta went through the awaited sink, with the provider's event number.
    sent = [(f.index, f.kind, f.text, f.provider_sequence) for f in worker.fragments]
    assert sent == [(0, "text", "Hel", 1), (1, "text", "lo, ", 2), (2, "text", "world", 3)]


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
@pytest.mark.parametrize(
    ("garbage", "what"),
    [("<html>gateway says hi</html>", "not JSON"), ("[1, 2]", "not a JSON object")],
)
async def test_a_streamed_event_that_is_not_an_event_fails_definitively(
    kind: str, garbage: str, what: str, server: FixtureServer
) -> None:
    # The server answered, mid-stream, with something that is no event: like a 200 body that
    # is not JSON, the call failed (not retried: that would run the model again). It used to
    # be left uncertain, which stops resume until an operator reconciles it.
    d = BY_KIND[kind]
    head, tail = fx.openai_stream(["Hel", "lo"])[:2], fx.openai_stream(["Hel", "lo"])[2:]
    server.script(Reply(events=[*head, garbage, *tail]))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
        assert isinstance(reply, Failure), reply
        assert reply.error.type == "ProviderError" and not reply.uncertain
        expected = f"provider p: the answer stream sent an event that is {what}"
        assert reply.error.message == expected and not reply.error.retryable
        assert [f.text for f in worker.fragments] == ["Hel"]  # what came before stays
    assert len(server.seen) == 1


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
async def test_whatever_follows_the_final_event_is_not_read(
    kind: str, server: FixtureServer
) -> None:
    # response.completed carries the whole Response: the answer is known and complete, so a
    # trailing line (a proxy's "[DONE]", garbage) cannot make it failed or uncertain.
    d = BY_KIND[kind]
    server.script(Reply(events=[*fx.openai_stream(["Hel", "lo"]), "[DONE]", "<html>"]))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
    assert isinstance(reply, Result), reply
    assert reply.output["text"] == "Hello" and reply.output["finish"] == "complete"


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
async def test_a_whole_answer_to_a_streamed_call_is_taken_as_it_is(
    kind: str, server: FixtureServer
) -> None:
    # A server that does not stream answers `stream: true` with the whole Response as JSON:
    # nothing was cut off, so the call is not uncertain — it is that answer.
    d = BY_KIND[kind]
    server.script(Reply(body=d.text("whole")))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
    assert isinstance(reply, Result), reply
    assert reply.output["text"] == "whole" and reply.output["finish"] == "complete"
    assert server.seen[0].body["stream"] is True and worker.fragments == []


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
async def test_a_streamed_call_answered_with_a_page_fails_definitively(
    kind: str, server: FixtureServer
) -> None:
    d = BY_KIND[kind]
    server.script(Reply(raw=b"<html>gateway says hi</html>", content_type="text/html"))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
    assert isinstance(reply, Failure), reply
    assert reply.error.type == "ProviderError" and not reply.uncertain
    assert reply.error.message == "provider p: the answer is not JSON"
    assert len(server.seen) == 1


async def test_connection_refused_is_retryable_nothing_was_sent(server: FixtureServer) -> None:
    d = BY_KIND["openai"]
    request = request_for(d, server, ASK)
    server.close()  # the port no longer listens: nothing can be sent
    # Not uncertain, and retryable (docs/providers.md's table): no byte left, so a new
    # attempt cannot repeat anything the first one did.
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request))
    assert isinstance(reply, Failure) and not reply.uncertain and reply.error.retryable
    assert "nothing was sent" in reply.error.message


async def test_max_tokens_finish(server: FixtureServer) -> None:
    server.script(
        Reply(body=fx.openai_max_tokens("cut")),
        Reply(body=fx.anthropic_message([{"type": "text", "text": "cut"}], "max_tokens")),
        Reply(body=fx.gemini_response([{"text": "cut"}], "MAX_TOKENS")),
    )
    async with open_worker() as worker:
        for kind in ("openai", "anthropic", "google"):
            reply = await worker.call(
                execute(BY_KIND[kind], request_for(BY_KIND[kind], server, ASK))
            )
            assert isinstance(reply, Result) and reply.output["finish"] == "max_tokens", kind


@each_provider
async def test_an_answer_that_is_not_the_apis_object_fails_definitively(
    d: Dialect, server: FixtureServer
) -> None:
    # JSON, status 200, but not a Response / Message / GenerateContentResponse: before, OpenAI
    # made it an empty successful answer, Gemini a refusal and Anthropic an uncertain effect.
    server.script(Reply(body={"hello": 1}))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure), reply
    assert reply.error.type == "ProviderError" and "is not a" in reply.error.message
    assert not reply.uncertain and not reply.error.retryable
    assert len(server.seen) == 1


@each_provider
@pytest.mark.parametrize("content_type", ["application/json", "text/html"])
async def test_an_answer_that_is_not_json_fails_definitively(
    d: Dialect, content_type: str, server: FixtureServer
) -> None:
    # Status 200 and a body that is not JSON: the model answered and nothing was lost in
    # transport, so there is nothing uncertain about it. Before, OpenAI failed the call but
    # the SDK adapters (Anthropic, Gemini) let the SDK's decode error escape after the send,
    # which left the effect uncertain.
    server.script(Reply(raw=b"<html>gateway says hi</html>", content_type=content_type))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure), reply
    assert reply.error.type == "ProviderError", reply.error
    assert reply.error.message == "provider p: the answer is not JSON", reply.error.message
    assert not reply.uncertain and not reply.error.retryable
    assert len(server.seen) == 1


async def test_a_blocked_gemini_prompt_is_still_a_refusal(server: FixtureServer) -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {}}
    server.script(Reply(body=blocked))
    async with open_worker() as worker:
        reply = await worker.call(
            execute(BY_KIND["google"], request_for(BY_KIND["google"], server, ASK))
        )
    assert isinstance(reply, Result) and reply.output["finish"] == "refusal", reply


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
async def test_a_response_that_did_not_finish_is_no_answer(
    kind: str, server: FixtureServer
) -> None:
    # A 200 Response whose status is failed (or not finished) used to become an empty
    # successful answer: the agent task succeeded with text "".
    d = BY_KIND[kind]
    failed = {"code": "server_error", "message": "The model failed"}
    server.script(
        Reply(body=fx.openai_response([], status="failed", error=failed)),
        Reply(body=fx.openai_response([], status="in_progress", usage=None)),
    )
    async with open_worker() as worker:
        replies = [await worker.call(execute(d, request_for(d, server, ASK))) for _ in range(2)]
    assert all(isinstance(r, Failure) and not r.uncertain for r in replies), replies
    first, second = (r.error for r in replies if isinstance(r, Failure))
    assert "The model failed" in first.message and first.retryable
    assert "in_progress" in second.message and not second.retryable


async def test_a_model_that_stopped_without_an_answer_fails_the_call(server: FixtureServer) -> None:
    # These answers used to be taken as complete: a Gemini agent whose function call came back
    # MALFORMED_FUNCTION_CALL "succeeded" with an empty text.
    server.script(
        Reply(body=fx.gemini_response([], "MALFORMED_FUNCTION_CALL")),
        Reply(body=fx.gemini_response([{"text": "half"}], "OTHER")),
        Reply(body=fx.anthropic_message([], "pause_turn")),
        Reply(
            body=fx.anthropic_message(
                [{"type": "text", "text": "cut"}], "model_context_window_exceeded"
            )
        ),
    )
    kinds = ("google", "google", "anthropic", "anthropic")
    async with open_worker() as worker:
        replies = [
            await worker.call(execute(BY_KIND[k], request_for(BY_KIND[k], server, ASK)))
            for k in kinds
        ]
    for reply, reason in zip(
        replies[:3], ("MALFORMED_FUNCTION_CALL", "OTHER", "pause_turn"), strict=True
    ):
        assert isinstance(reply, Failure) and not reply.uncertain, reply
        assert reason in reply.error.message and not reply.error.retryable
        assert reply.usage["providerRequests"] == 1 and reply.usage["inputTokens"] > 0  # billed
    assert isinstance(replies[3], Result) and replies[3].output["finish"] == "max_tokens"

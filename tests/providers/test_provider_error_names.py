"""Every error of a model call names its provider (``provider NAME: …``), whoever raised it:
the adapter, the egress transport (a redirect, an oversized answer) or the worker's timeout,
which says its seconds as a person would (``1.5 s``, not ``1.4999859…``)."""

from __future__ import annotations

from agentctl.mailbox import Failure
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply
from tests.providers.test_provider_adapters import (
    ASK,
    BY_KIND,
    Dialect,
    each_provider,
    execute,
    request_for,
)
from tests.worker_process import open_worker

PREFIX = "provider p: "


@each_provider
async def test_transport_and_shape_errors_name_the_provider(
    d: Dialect, server: FixtureServer
) -> None:
    server.script(
        Reply(status=307, headers={"Location": server.url("/elsewhere")}),
        Reply(body=d.text("x" * 50_000)),
        Reply(body={"hello": 1}),  # JSON, but not the API's answer object
    )
    small = request_for(d, server, ASK, network={"maxResponseBytes": 10_000})
    async with open_worker() as worker:
        replies = [await worker.call(execute(d, small)) for _ in range(3)]
    for reply in replies:
        assert isinstance(reply, Failure), reply
        assert reply.error.message.startswith(PREFIX), reply.error.message
    assert "answered HTTP 307" in replies[0].error.message
    assert "maxResponseBytes" in replies[1].error.message
    assert "is not a" in replies[2].error.message


async def test_a_stream_cut_before_its_final_event_names_the_provider(
    server: FixtureServer,
) -> None:
    d = BY_KIND["openai"]
    server.script(Reply(events=fx.openai_stream(["Hel", "lo"])[:2]))  # no completed event
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK, stream=True)))
    assert isinstance(reply, Failure) and reply.uncertain, reply
    assert reply.error.message == f"{PREFIX}the answer stream ended before its final event"


async def test_the_workers_timeout_names_the_provider_and_its_seconds(
    server: FixtureServer,
) -> None:
    # The call's own read timeout (30 s) is longer than the effect's: the worker's fires.
    d = BY_KIND["openai"]
    server.script(Reply(body=d.text("late"), delay=60))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK), timeout=1.5))
    assert isinstance(reply, Failure) and reply.uncertain, reply
    assert reply.error.message == f"{PREFIX}effect timed out after 1.5 s"


@each_provider
async def test_an_api_error_over_several_lines_is_one_line_in_the_api_s_words(
    d: Dialect, server: FixtureServer
) -> None:
    """The API's own message, whatever lines it runs over, and nothing the SDK adds (the
    anthropic SDK repeats the status and appends the request path and error type)."""
    server.script(d.error(400, "bad model\n  try another"))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure) and not reply.uncertain, reply
    assert reply.error.message == f"{PREFIX}HTTP 400: bad model try another"


async def test_an_answer_the_google_sdk_refuses_names_the_field(server: FixtureServer) -> None:
    """The SDK validates the answer with pydantic: the error says which field and what it
    should be, not pydantic's layout, its error count or its documentation link."""
    d = BY_KIND["google"]
    part = {"functionCall": {"name": "read_file", "args": "not an object"}}
    server.script(Reply(body={"candidates": [{"content": {"parts": [part]}}]}))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure) and reply.uncertain, reply  # as before: after the send
    assert reply.error.message == (
        f"{PREFIX}the request was sent, then the answer is malformed: "
        "candidates.0.content.parts.0.functionCall.args: should be an object; it may have run"
    )


async def test_an_anthropic_block_of_the_wrong_type_is_said_in_our_words(
    server: FixtureServer,
) -> None:
    """The SDK builds its models unvalidated: a text block without text used to reach the
    user as Python's own TypeError text."""
    d = BY_KIND["anthropic"]
    server.script(Reply(body=fx.anthropic_message([{"type": "text"}])))
    async with open_worker() as worker:
        reply = await worker.call(execute(d, request_for(d, server, ASK)))
    assert isinstance(reply, Failure) and reply.uncertain, reply  # as before: after the send
    assert reply.error.message == (
        f"{PREFIX}the request was sent, then its answer could not be read: a content block "
        "or a usage count has the wrong type; it may have run"
    )

"""Local HTTP servers that speak the providers' wire formats (tests only).

One ``FixtureServer`` listens on 127.0.0.1 (a threaded ``http.server``) and answers every
request with the next scripted ``Reply`` — a JSON body, an SSE stream, an error status, a
redirect, a slow, a held (until the test releases it) or a huge answer — recording what it
received (method, path, query, headers, JSON body). The builders below produce each API's
documented shapes: OpenAI Responses (also Azure OpenAI), Anthropic Messages and Gemini
``generateContent``. ``test_fixture_wire_formats.py`` parses every builder's output with the
official SDK models, so these shapes cannot drift from the real APIs unnoticed.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

Json = dict[str, Any]


@dataclass
class Reply:
    """One scripted answer. ``events`` makes it an SSE stream (a ``str`` event is sent as its
    ``data`` line as is: an event that is not JSON); ``delay`` a slow answer; ``release`` one
    held until the test sets it (what the test did meanwhile happened before the answer)."""

    status: int = 200
    body: Json | None = None
    events: list[Json | str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # sent as is (the huge answer, a body that is not JSON)
    content_type: str = "application/json"
    release: threading.Event | None = None


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    body: Any


class _Server(ThreadingHTTPServer):
    # The default backlog (5) drops connections when several calls arrive at once: the
    # client's TCP stack then retries after a second, which a test would see as slowness.
    request_queue_size = 128


class FixtureServer:
    """A scripted provider on 127.0.0.1; ``close()`` also releases slow answers."""

    def __init__(self, port: int = 0) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = _Server(("127.0.0.1", port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self, seen: Seen) -> Reply:
        with self.lock:
            self.seen.append(seen)
            if self.replies:
                return self.replies.popleft()
        return Reply(status=500, body={"error": {"message": "unscripted request"}})

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler_for(server: FixtureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output readable

        def do_POST(self) -> None:
            self._answer()

        def do_GET(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = json.loads(raw) if raw else None
            reply = server.next_reply(Seen(self.command, parts.path, parts.query, headers, body))
            if reply.delay and server.stopping.wait(reply.delay):
                return  # the server is closing: the client gave up long ago
            if reply.release is not None and not _released(server, reply.release):
                return
            # The client may have gone away (a timeout or a refused answer).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                _send(self, reply)

    return Handler


def _released(server: FixtureServer, release: threading.Event) -> bool:
    """Wait for ``release``; False when the server closes first (the test is over)."""
    while not release.wait(0.05):
        if server.stopping.is_set():
            return False
    return True


def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    if reply.events:
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        for event in reply.events:
            if isinstance(event, str):
                handler.wfile.write(f"data: {event}\n\n".encode())
            else:
                data = json.dumps(event)
                handler.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
            handler.wfile.flush()
        handler.close_connection = True
        return
    payload = reply.raw if reply.raw is not None else json.dumps(reply.body or {}).encode()
    handler.send_response(reply.status)
    handler.send_header("Content-Type", reply.content_type)
    handler.send_header("Content-Length", str(len(payload)))
    for name, value in reply.headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(payload)


# ----------------------------------------------------------------------------- OpenAI Responses


def openai_usage(inp: int = 11, out: int = 7, reasoning: int = 3, cached: int = 5) -> Json:
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 1},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": inp + out,
    }


def openai_response(output: list[Json], status: str = "completed", **extra: Any) -> Json:
    return {
        "id": "resp_fixture",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": "gpt-fixture",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": openai_usage(),
        "error": None,
        "incomplete_details": None,
        **extra,
    }


def openai_message(text: str) -> Json:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "type": "message",
        "id": "msg_fixture",
        "role": "assistant",
        "status": "completed",
        "content": content,
    }


def openai_text(text: str) -> Json:
    return openai_response([openai_message(text)])


def openai_tool_call(name: str, arguments: Json, call_id: str = "call_fixture_1") -> Json:
    call = {
        "type": "function_call",
        "id": "fc_fixture_1",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }
    return openai_response([call])


def openai_max_tokens(text: str) -> Json:
    details = {"reason": "max_output_tokens"}
    return openai_response([openai_message(text)], status="incomplete", incomplete_details=details)


def openai_stream(chunks: list[str]) -> list[Json]:
    """The SSE events of a streamed text answer: created, deltas, done, completed."""
    text = "".join(chunks)
    item = {"item_id": "msg_fixture", "output_index": 0, "content_index": 0}
    created = openai_response([], status="in_progress", usage=None)
    events: list[Json] = [{"type": "response.created", "response": created}]
    for chunk in chunks:
        events.append(
            {"type": "response.output_text.delta", "delta": chunk, "logprobs": [], **item}
        )
    events.append({"type": "response.output_text.done", "text": text, "logprobs": [], **item})
    events.append({"type": "response.completed", "response": openai_text(text)})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def openai_error(status: int, message: str) -> Reply:
    return Reply(
        status=status, body={"error": {"message": message, "type": "fixture", "code": None}}
    )


# ----------------------------------------------------------------------------- Anthropic Messages


def anthropic_message(content: list[Json], stop_reason: str = "end_turn") -> Json:
    return {
        "id": "msg_fixture",
        "type": "message",
        "role": "assistant",
        "model": "claude-fixture",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 13,
            "output_tokens": 8,
            "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 2,
            "output_tokens_details": {"thinking_tokens": 3},
        },
    }


def anthropic_text(text: str) -> Json:
    return anthropic_message([{"type": "text", "text": text}])


def anthropic_tool_use(name: str, arguments: Json, call_id: str = "toolu_fixture_1") -> Json:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    return anthropic_message([block], stop_reason="tool_use")


def anthropic_error(status: int, message: str) -> Reply:
    kind = "rate_limit_error" if status == 429 else "api_error"
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status=status, body=body)


# ----------------------------------------------------------------------------- Gemini


def gemini_response(parts: list[Json], finish: str = "STOP") -> Json:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 17,
            "candidatesTokenCount": 9,
            "thoughtsTokenCount": 2,
            "cachedContentTokenCount": 6,
            "toolUsePromptTokenCount": 3,
            "totalTokenCount": 31,
        },
        "modelVersion": "gemini-fixture",
        "responseId": "resp-fixture",
    }


def gemini_text(text: str) -> Json:
    return gemini_response([{"text": text}])


def gemini_function_call(name: str, arguments: Json, call_id: str = "fc-fixture-1") -> Json:
    return gemini_response([{"functionCall": {"id": call_id, "name": name, "args": arguments}}])


def gemini_error(status: int, message: str) -> Reply:
    names = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT"}
    error = {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}
    return Reply(status=status, body={"error": error})


# A workspace-writing agent tool (policy ``approval: mutations`` holds its calls), as the
# YAML under ``spec.tools`` (indented 4).
SAVE_TOOL = """    save:
      kind: builtin.workspace.write
      description: write a file
      capability: filesystem.write
      risk: medium
      effectClass: workspace_mutate
      idempotency: idempotent
      outputSchema: { type: object }
      inputSchema:
        type: object
        properties: { path: { type: string }, content: { type: string } }
        required: [path, content]
        additionalProperties: false
"""


def local_openai_spec(port: int, name: str, policy: str = "") -> str:
    """The head of a workflow whose provider ``main`` is an OpenAI fixture on 127.0.0.1:
    ``policy`` adds policy lines (indented 4); the key comes from ``FIXTURE_KEY``."""
    return f"""apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: {name} }}
spec:
  policy:
{policy}    environmentAllowlist: [FIXTURE_KEY]
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  providers:
    main:
      kind: openai
      endpoint: http://127.0.0.1:{port}/v1/responses
      credential: {{ env: FIXTURE_KEY }}
"""


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    """A fresh scripted server per test (conftest modules re-export this fixture)."""
    srv = FixtureServer()
    yield srv
    srv.close()

"""A small A2A 1.0 peer built from the official a2a-sdk server parts, for examples and tests.

It serves its Agent Card at /.well-known/agent-card.json and JSON-RPC at /a2a on 127.0.0.1.
Each message starts a task that works for --delay seconds, then completes with one text
artifact: "reviewed: <the message text>".

    python examples/peers/a2a_peer.py --port 8765 [--delay 1] [--release FILE]
                                      [--received FILE] [--requests FILE]

--port 0 picks a free port; the port is printed on stdout (first line) once it listens.
--received appends one JSON line per message received (its messageId), --requests one line
per HTTP request (method, path, A2A-Version header): tests count them to prove what was sent.
--release FILE holds every task open (after --delay) until FILE exists, so a task can be
caught while it still runs (interrupt the run, then create FILE and resume).
Needs agentctl's `protocols` extra (a2a-sdk[http-server], uvicorn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette


def _append(path: str | None, entry: dict[str, str]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


class Reviewer(AgentExecutor):
    """Works on each message for a while, then answers with one text artifact."""

    def __init__(self, delay: float, received: str | None, release: str | None) -> None:
        self.delay = delay
        self.received = received
        self.release = release

    async def _work(self) -> None:
        await asyncio.sleep(self.delay)
        while self.release and not os.path.exists(self.release):
            await asyncio.sleep(0.05)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        _append(self.received, {"messageId": message.message_id})
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await self._work()
        text = " ".join(p.text for p in message.parts if p.HasField("text"))
        await updater.add_artifact([pb.Part(text=f"reviewed: {text}")], name="review")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _card(port: int) -> pb.AgentCard:
    return pb.AgentCard(
        name="reviewer",
        description="Reviews a text after a short delay",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(
                url=f"http://127.0.0.1:{port}/a2a",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=pb.AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            pb.AgentSkill(id="review", name="review", description="review a text", tags=["review"])
        ],
    )


def _app(port: int, args: argparse.Namespace) -> Any:
    card = _card(port)
    handler = DefaultRequestHandler(
        agent_executor=Reviewer(args.delay, args.received, args.release),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")]
    app = Starlette(routes=routes)

    async def logged(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            version = headers.get(b"a2a-version", b"").decode("latin-1") or None
            line = {"method": scope["method"], "path": scope["path"], "version": version}
            _append(args.requests, line)
        await app(scope, receive, send)

    return logged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--received")
    parser.add_argument("--requests")
    parser.add_argument("--release")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_app(port, args), log_level="warning")
    print(port, flush=True)
    sys.stdout.flush()
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()

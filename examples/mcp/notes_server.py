#!/usr/bin/env python3
"""A small MCP server (Streamable HTTP) built with the official ``mcp`` package.

    python3 examples/mcp/notes_server.py [--port N] [--port-file FILE] [--calls FILE]
                                         [--meta FILE] [--token-env NAME]

Tools:
  word_count(text)  → {"words": N}           (structured content, read-only)
  append_note(text) → {"notes": N}           (keeps notes in memory: a mutation)
  slow(seconds)     → {"slept": seconds}     (for timeouts and kills mid-call)
  repeat(text, times) → {"text": text × times} (a large answer from a small call, read-only)

It listens on 127.0.0.1 (``--port 0``, the default, picks a free port) and writes the port it
got to ``--port-file`` once it accepts connections. Every ``tools/call`` it receives appends
one line (the tool's name) to ``--calls``, so a test can count what reached the server;
``--meta`` appends one JSON line per ``word_count``/``append_note`` call, ``{"tool", "meta"}``,
the request's ``params._meta`` as the server received it (``{}`` without one): where a keyed
call's idempotency key shows (``agentctl.dev/idempotency-key``).
With ``--token-env NAME`` it answers 401 to any request whose ``X-Notes-Token`` header is not
the value of the environment variable NAME.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from starlette.responses import PlainTextResponse

NOTES: list[str] = []


def build(calls: Path | None, metas: Path | None = None) -> MCPServer:
    server = MCPServer("notes")

    def count(tool: str, ctx: Context | None = None) -> None:
        if calls is not None:
            with calls.open("a", encoding="utf-8") as handle:
                handle.write(tool + "\n")
        if metas is not None and ctx is not None:
            meta = dict(ctx.request_context.meta or {})
            with metas.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"tool": tool, "meta": meta}, default=str) + "\n")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def word_count(text: str, ctx: Context) -> dict[str, int]:
        """Count the words of a text."""
        count("word_count", ctx)
        return {"words": len(text.split())}

    @server.tool()
    def append_note(text: str, ctx: Context) -> dict[str, int]:
        """Append a note; answers how many notes there are now."""
        count("append_note", ctx)
        NOTES.append(text)
        return {"notes": len(NOTES)}

    @server.tool()
    async def slow(seconds: float) -> dict[str, float]:
        """Sleep, then answer."""
        count("slow")
        await anyio.sleep(seconds)
        return {"slept": seconds}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def repeat(text: str, times: int) -> dict[str, str]:
        """The text repeated: an answer as large as asked for."""
        count("repeat")
        return {"text": text * max(0, min(times, 64 * 1024 * 1024))}

    return server


def guarded(app: Any, token: str) -> Any:
    """``app`` behind a shared-token check (the header agentctl sends from a secret)."""

    async def check(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"x-notes-token") != token.encode():
            await PlainTextResponse("bad token", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    return check


async def serve(
    port: int, port_file: Path | None, calls: Path | None, metas: Path | None, token: str | None
) -> None:
    app = build(calls, metas).streamable_http_app()
    if token is not None:
        app = guarded(app, token)
    listener = socket.create_server(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [listener])
        while not server.started:
            await anyio.sleep(0.02)
        if port_file is not None:
            tmp = port_file.with_suffix(".tmp")
            tmp.write_text(str(listener.getsockname()[1]), encoding="utf-8")
            tmp.replace(port_file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--calls", type=Path)
    parser.add_argument("--meta", type=Path)
    parser.add_argument("--token-env")
    args = parser.parse_args()
    token = os.environ[args.token_env] if args.token_env else None
    anyio.run(serve, args.port, args.port_file, args.calls, args.meta, token)


if __name__ == "__main__":
    main()

"""A local model server that holds a whole agent dialogue, in each provider's wire format.

``AgentServer`` is a ``FixtureServer`` (127.0.0.1, counts and records every request) that,
when no reply is scripted, answers from the request itself, without state:

- no tool offered: answer ``done: <the user message>`` at once;
- no tool result in the conversation yet: call the first offered tool with the user message
  (a JSON object) as its arguments;
- a tool result present: answer with the JSON text ``{path, bytes, firstLine}`` of the file
  the tool returned — so the final answer proves the tool's result reached the server.

The dialect follows the request path: ``…/responses`` is OpenAI Responses (Azure OpenAI
included), ``…/v1/messages`` Anthropic Messages, ``…:generateContent`` Gemini. Replies are
built with ``fixtures``' builders, which the official SDKs are tested to parse. Scripted
replies (``script``) still come first, so a test can put a 429 or a redirect in front;
``delay`` slows every dialogue answer. ``scripts/provider_server.py`` serves it by hand.
"""

from __future__ import annotations

import json
from typing import Any

from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply, Seen

Json = dict[str, Any]


def dialect_of(path: str) -> str:
    if path.endswith("/responses"):
        return "openai"
    if path.endswith("/v1/messages"):
        return "anthropic"
    if path.endswith(":generateContent"):
        return "google"
    raise ValueError(f"no provider API at {path}")


def _tool_result(dialect: str, body: Json) -> Any:
    """The last tool result the conversation carries, or None."""
    found: Any = None
    if dialect == "openai":
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                found = item.get("output")
    elif dialect == "anthropic":
        for message in body.get("messages") or []:
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found = block.get("content")
    else:
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                if "functionResponse" in part:
                    found = part["functionResponse"].get("response", {}).get("output")
    return json.loads(found) if isinstance(found, str) else found


def _user_text(dialect: str, body: Json) -> str:
    if dialect == "openai":
        users = [i for i in body.get("input") or [] if i.get("role") == "user"]
        return str(users[0]["content"]) if users else "{}"
    if dialect == "anthropic":
        first = (body.get("messages") or [{}])[0].get("content")
        return first if isinstance(first, str) else str(first[0].get("text", "{}"))
    return str(body["contents"][0]["parts"][0].get("text", "{}"))


def _first_tool(dialect: str, body: Json) -> str:
    tools = body.get("tools") or []
    if dialect == "google":
        return str(tools[0]["functionDeclarations"][0]["name"])
    return str(tools[0]["name"])


def summary(tool_output: Json) -> str:
    """The final answer: what a model asked to describe the file would say."""
    content = str(tool_output.get("content") or "")
    first = content.splitlines()[0] if content else ""
    return json.dumps(
        {"path": tool_output.get("path"), "bytes": tool_output.get("bytes"), "firstLine": first}
    )


def dialogue_reply(seen: Seen) -> Json:
    """The JSON body that continues the conversation ``seen`` carries."""
    dialect = dialect_of(seen.path)
    body = seen.body or {}
    result = _tool_result(dialect, body)
    texts = {"openai": fx.openai_text, "anthropic": fx.anthropic_text}
    if not body.get("tools") and result is None:  # nothing to call: answer at once
        return texts.get(dialect, fx.gemini_text)(f"done: {_user_text(dialect, body)}")
    if result is None:
        name, arguments = _first_tool(dialect, body), json.loads(_user_text(dialect, body))
        calls = {"openai": fx.openai_tool_call, "anthropic": fx.anthropic_tool_use}
        return calls.get(dialect, fx.gemini_function_call)(name, arguments)
    return texts.get(dialect, fx.gemini_text)(summary(result))


class AgentServer(FixtureServer):
    """A ``FixtureServer`` that answers unscripted requests with ``dialogue_reply``."""

    def __init__(self, port: int = 0, delay: float = 0.0) -> None:
        self.delay = delay
        super().__init__(port)

    def next_reply(self, seen: Seen) -> Reply:
        with self.lock:
            self.seen.append(seen)
            if self.replies:
                return self.replies.popleft()
        try:
            return Reply(body=dialogue_reply(seen), delay=self.delay)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return Reply(status=400, body={"error": {"message": f"agent server: {exc}"}})

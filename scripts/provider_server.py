"""A local model server for the provider examples: every provider's API on one port.

    python -m scripts.provider_server [--port 8765] [--delay SECONDS]

Run from the repository root (it reuses the test suite's wire-format fixtures, which the
official SDKs are tested to parse). It speaks OpenAI Responses (Azure OpenAI too), Anthropic
Messages and Gemini ``generateContent``, holds no state, and answers each agent request the
way ``tests/providers/agent_server.py`` describes: first a call of the first offered tool with
the user message as arguments, then, once a tool result is in the conversation, a JSON answer
``{path, bytes, firstLine}``. It accepts any key. Every request is logged on stderr (method,
path, which key header it carried — never the key).
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.providers.agent_server import AgentServer
from tests.providers.fixtures import Reply, Seen

KEY_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")


class LoggingServer(AgentServer):
    def next_reply(self, seen: Seen) -> Reply:
        keys = [name for name in KEY_HEADERS if name in seen.headers]
        print(f"{seen.method} {seen.path} key header: {', '.join(keys) or 'none'}", file=sys.stderr)
        return super().next_reply(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    server = LoggingServer(args.port, delay=args.delay)
    print(f"provider server on http://127.0.0.1:{server.port} (Ctrl-C stops it)", file=sys.stderr)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()

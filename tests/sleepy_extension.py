"""A process extension that takes its time: the script the extension-timeout tests run.

It sleeps ``argv[1]`` seconds in its handshake, which it first marks by appending a line to
``handshakes.txt`` (so a test can tell the handshake is under way), and ``argv[2]`` in its
invocation, which it first marks by appending the effect id to ``invoked.txt`` (so a test can
tell whether anything was invoked), then answers with an empty output.
"""

from __future__ import annotations

PROTOCOL = "agentctl.dev/process-extension/v1"
MARKER = "invoked.txt"
HANDSHAKE_MARKER = "handshakes.txt"

SCRIPT = """\
import json, sys, time
P = "agentctl.dev/process-extension/v1"
if sys.argv[-1] == "--agentctl-handshake":
    open("handshakes.txt", "a").write("handshake\\n")
    time.sleep(float(sys.argv[1]))
    shake = {"protocolVersion": P, "inputSchema": {"type": "object"},
             "outputSchema": {"type": "object"}, "capabilities": ["c"]}
    print(json.dumps(shake))
else:
    req = json.load(sys.stdin)
    open("invoked.txt", "a").write(req["effectId"] + "\\n")
    time.sleep(float(sys.argv[2]))
    print(json.dumps({"protocolVersion": P, "effectId": req["effectId"], "output": {}}))
"""

"""A process extension that takes its time: the script the extension-timeout tests run.

It sleeps ``argv[1]`` seconds in its handshake and ``argv[2]`` in its invocation, which it
first marks by appending the effect id to ``invoked.txt`` (so a test can tell whether
anything was invoked), then answers with an empty output.
"""

from __future__ import annotations

PROTOCOL = "agentctl.dev/process-extension/v1"
MARKER = "invoked.txt"

SCRIPT = """\
import json, sys, time
P = "agentctl.dev/process-extension/v1"
if sys.argv[-1] == "--agentctl-handshake":
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

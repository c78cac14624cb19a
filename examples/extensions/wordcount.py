#!/usr/bin/env python3
"""A process extension (agentctl.dev/process-extension/v1): count the words of a file.

agentctl runs it twice per effect:
  wordcount.py --agentctl-handshake   prints the protocol version, schemas and capabilities;
  wordcount.py --agentctl-invoke      reads {protocolVersion, effectId, input} on stdin and
                                      prints {protocolVersion, effectId, output}.
It also writes artifacts/report.json into the workspace (a mutation agentctl records).
"""

import json
import os
import sys

PROTOCOL = "agentctl.dev/process-extension/v1"
INPUT_SCHEMA = {
    "type": "object",
    "properties": {"file": {"type": "string"}},
    "required": ["file"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"words": {"type": "integer"}, "report": {"type": "string"}},
    "required": ["words", "report"],
}


def handshake() -> dict:
    return {
        "protocolVersion": PROTOCOL,
        "inputSchema": INPUT_SCHEMA,
        "outputSchema": OUTPUT_SCHEMA,
        "capabilities": ["wordcount"],
    }


def invoke(request: dict) -> dict:
    with open(request["input"]["file"], encoding="utf-8") as handle:
        words = len(handle.read().split())
    os.makedirs("artifacts", exist_ok=True)
    with open("artifacts/report.json", "w", encoding="utf-8") as handle:
        json.dump({"file": request["input"]["file"], "words": words}, handle)
    output = {"words": words, "report": "artifacts/report.json"}
    return {"protocolVersion": PROTOCOL, "effectId": request["effectId"], "output": output}


if __name__ == "__main__":
    if sys.argv[-1] == "--agentctl-handshake":
        print(json.dumps(handshake()))
    elif sys.argv[-1] == "--agentctl-invoke":
        print(json.dumps(invoke(json.load(sys.stdin))))
    else:
        sys.exit("usage: wordcount.py --agentctl-handshake | --agentctl-invoke")

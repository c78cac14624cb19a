"""Installing the wire models' validators from stored schemas (``agentctl/mailbox/prebuilt.py``).

Each case runs in a fresh interpreter: installing replaces class attributes and the frame
decoder, which live for the whole process.
"""

from __future__ import annotations

import subprocess
import sys

PROBE_PARTIAL = """\
from agentctl.mailbox import prebuilt
from agentctl.mailbox.messages import Hello
from agentctl.mailbox.requests import ShellRequest

schemas = prebuilt.wire_schemas()  # every model built here, in this process
del schemas["ShellRequest"]
fresh = prebuilt._models()
for model in fresh:  # back to "not built", as in a new worker
    model.__pydantic_complete__ = False
before = {m: m.__pydantic_validator__ for m in fresh}
assert prebuilt.use_prebuilt(schemas) is False
assert all(m.__pydantic_validator__ is before[m] for m in fresh)  # nothing installed
print("ok")
"""

PROBE_DECODER = """\
from agentctl.mailbox import frames

body = b'{"type": "shutdown", "v": 1}'
frames.decode_body(body)  # the decoder is built now
frames.use_message_validator(lambda _body: "stand-in")
assert type(frames.decode_body(body)).__name__ == "Shutdown"  # too late: not used
print("ok")
"""

PROBE_DECODER_EARLY = """\
from agentctl.mailbox import frames

frames.use_message_validator(lambda _body: "stand-in")
assert frames.decode_body(b'{"type": "shutdown", "v": 1}') == "stand-in"
print("ok")
"""


def _run(probe: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_schemas_lacking_a_model_install_nothing() -> None:
    assert _run(PROBE_PARTIAL) == "ok"


def test_a_decoder_given_before_the_first_frame_is_used() -> None:
    assert _run(PROBE_DECODER_EARLY) == "ok"


def test_a_decoder_given_after_the_first_frame_is_not() -> None:
    assert _run(PROBE_DECODER) == "ok"

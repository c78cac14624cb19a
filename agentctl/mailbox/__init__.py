"""Frames and message types between the coordinator and its worker processes.

The mailbox knows nothing of the ledger or of executors: it is the wire contract only.
"""

from agentctl.mailbox.frames import MAX_FRAME_BYTES, FrameChannel, ProtocolError
from agentctl.mailbox.messages import (
    PROTOCOL_VERSION,
    Cancel,
    EffectRequest,
    Execute,
    Failure,
    Go,
    Hello,
    Message,
    Result,
    Shutdown,
    StreamAck,
    StreamFragment,
    WireError,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "Cancel",
    "EffectRequest",
    "Execute",
    "Failure",
    "FrameChannel",
    "Go",
    "Hello",
    "Message",
    "ProtocolError",
    "Result",
    "Shutdown",
    "StreamAck",
    "StreamFragment",
    "WireError",
]

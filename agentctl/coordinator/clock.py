"""The injected clock and identifier source of a coordinator.

Invariants: timestamps are RFC 3339 UTC with milliseconds, so they sort as text; identifiers
are a prefix plus a UUIDv7, so they sort by creation time. Tests inject a fixed ``Clock``.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta


def uuid7(ms: int | None = None) -> uuid.UUID:
    """A version-7 UUID: 48 bits of Unix milliseconds, then random bits."""
    millis = int(time.time() * 1000) if ms is None else ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return uuid.UUID(int=value)


def parse_stamp(text: str) -> datetime:
    """A timestamp ``Clock.now`` wrote (RFC 3339 UTC, ``Z``), as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# The last second ``Clock.now`` formatted, and its text (``%Y-%m-%dT%H:%M:%S``, UTC).
_second_text: tuple[int, str] = (-1, "")


@dataclass
class Clock:
    """Wall clock and id minting; subclass or replace in tests."""

    def now(self) -> str:
        # Called several times per effect step: the text up to the second is formatted once per
        # second; the milliseconds are truncated, as ``isoformat(timespec="milliseconds")`` does.
        global _second_text
        seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
        if _second_text[0] != seconds:
            _second_text = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        return f"{_second_text[1]}.{nanos // 1_000_000:03d}Z"

    def later(self, seconds: float) -> str:
        """``now()`` plus ``seconds``, in the same sortable text (a lease's expiry)."""
        at = parse_stamp(self.now()) + timedelta(seconds=seconds)
        return at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def monotonic(self) -> float:
        return time.monotonic()

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid7()}"

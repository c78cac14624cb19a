"""Operators' tuning knobs in the environment: each read one way, and refused when its value
is not what it says it is.

Invariants:
- an unset or empty variable means the knob's default;
- a value that is not a number of the knob's kind (or is below its least value) is a usage
  error naming the variable and what it takes (``ValidationError``, exit 2), never silently
  read as the default: ``check_all`` refuses it before a command does anything, and the
  modules that read a knob later (a worker pool, a frame channel, a worker inheriting the
  environment) read it through the same parser;
- this module imports nothing heavy: the CLI's start calls ``check_all`` on every command.
"""

from __future__ import annotations

import math
import os

from agentctl.errors import ValidationError

FRAME_SPIN_US = "AGENTCTL_FRAME_SPIN_US"
ANSWER_GRACE_SECONDS = "AGENTCTL_ANSWER_GRACE_SECONDS"


def frame_spin_us() -> int:
    """How long a frame channel may poll before it parks, in µs (0: never; ADR 0014)."""
    raw = os.environ.get(FRAME_SPIN_US, "").strip()
    if not raw:
        return 150
    if not (raw.isascii() and raw.isdigit()):  # (``int`` would take "+5", "5_0", "٥")
        raise ValidationError(
            f"{FRAME_SPIN_US}={raw!r}: expected a whole number of microseconds, 0 or more"
        )
    return int(raw)


def answer_grace_s() -> float:
    """How long beyond an effect's own timeout a worker may take to answer, in seconds."""
    raw = os.environ.get(ANSWER_GRACE_SECONDS, "").strip()
    if not raw:
        return 10.0
    try:
        seconds = float(raw) if raw.isascii() else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValidationError(
            f"{ANSWER_GRACE_SECONDS}={raw!r}: expected a number of seconds above 0"
        )
    return seconds


def check_all() -> None:
    """Refuse any knob set to a value it does not take (before a command does anything)."""
    frame_spin_us()
    answer_grace_s()

"""Whether this process has received a SIGINT, recorded apart from any exception.

Invariants:
- standard library only: ``entry`` installs ``defer`` before anything heavy is imported;
- the record outlives the KeyboardInterrupt: a library that catches one inside native code
  reports it as an error of its own (pydantic-core building a serializer gives a
  ``SchemaError`` naming it in its text, with no cause; a Rust panic is a ``BaseException``),
  and such an error is still the user's interrupt (``received``).
"""

from __future__ import annotations

# Not ``typing.TYPE_CHECKING``: importing typing (a few ms) would come before the guard.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

_received = False


def defer(_signum: int, _frame: object) -> None:
    """SIGINT while importing: remember it; raising mid-import would leave half-built modules."""
    global _received
    _received = True


def raise_interrupt(_signum: int, _frame: object) -> NoReturn:
    """SIGINT once the CLI is imported: remember it, then interrupt what is running."""
    global _received
    _received = True
    raise KeyboardInterrupt


def received() -> bool:
    """Whether a SIGINT reached one of the handlers above."""
    return _received

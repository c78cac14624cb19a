"""Whether this process has received a SIGINT, recorded apart from any exception.

Invariants:
- a SIGTERM is a SIGINT (``forward_term``, installed with ``defer``): outside a drive, whose
  signal receiver takes both itself, it is raised again as a SIGINT for the handler in place;
- standard library only: ``entry`` installs ``defer`` before anything heavy is imported;
- the record outlives the KeyboardInterrupt: a library that catches one inside native code
  reports it as an error of its own (pydantic-core building a serializer gives a
  ``SchemaError`` naming it in its text, with no cause; a Rust panic is a ``BaseException``),
  and such an error is still the user's interrupt (``received``);
- inside ``trio.run`` trio handles SIGINT itself (``trio_handles_interrupts``): trio installs
  its own handler — which defers the interrupt out of its scheduler's critical sections — only
  over ``signal.default_int_handler``, so ours is set aside for the call. An interrupt that a
  library swallows inside a trio run is therefore not recorded here (the run's own signal
  receivers and trio's KeyboardInterrupt still end it);
- a KeyboardInterrupt raised where Python cannot let it propagate — a weakref callback (the
  import system's module locks use them), a ``__del__``, a finalizer — is handed to
  ``sys.unraisablehook``, which would print it with a traceback and carry on as if no Ctrl-C
  came. ``deliver_again`` (that hook) sends the signal to the main thread once more instead,
  so the handler in place raises it in the code that runs next, where it can end the command;
- a signal sent again is sent until our handler has raised it where it can be seen: one sent
  while the main thread is still inside the hook is held (raised there, it would be lost
  again), and one that lands just before a blocking call (``time.sleep`` does not look for a
  signal already received before it blocks) would otherwise wait for that call to end.
"""

from __future__ import annotations

import signal
import sys

# Not ``typing.TYPE_CHECKING``: importing typing (a few ms) would come before the guard.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

_received = False
_main_thread: int | None = None  # set by ``install_unraisable_hook``
_in_hook = False  # the main thread is inside ``deliver_again``: an interrupt raised there is lost
_raised = 0  # interrupts ``raise_interrupt`` raised where the running code could see them
_RESEND_EVERY_S = 0.01
_RESEND_FOR_S = 10.0  # a main thread that stays deaf that long is in native code that retries


def defer(_signum: int, _frame: object) -> None:
    """SIGINT while importing: remember it; raising mid-import would leave half-built modules."""
    global _received
    _received = True


def forward_term(_signum: int, _frame: object) -> None:
    """SIGTERM wherever a drive's own receiver is not listening (start-up, compiling, opening
    the ledger, printing): handled exactly as a SIGINT, by whichever SIGINT handler is in
    place (``defer``, ``raise_interrupt``, trio's, or none while an outcome is final), so
    both end a command with exit 130 and its report instead of a silent kill (143)."""
    signal.raise_signal(signal.SIGINT)


def raise_interrupt(_signum: int, _frame: object) -> None:
    """SIGINT once the CLI is imported: remember it, then interrupt what is running — unless
    the main thread is inside the unraisable hook, where the interrupt would be swallowed
    again: the hook's thread sends it once more until it is raised past the hook."""
    global _received, _raised
    _received = True
    if _in_hook:
        return
    _raised += 1
    raise KeyboardInterrupt


def install_unraisable_hook() -> None:
    """Make ``deliver_again`` the process's unraisable hook (called on the main thread)."""
    global _main_thread
    import _thread

    _main_thread = _thread.get_ident()
    sys.unraisablehook = deliver_again


def deliver_again(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: an interrupt that could not be raised is sent again."""
    global _in_hook
    import _thread
    import contextlib

    main = _main_thread
    if not isinstance(unraisable.exc_value, KeyboardInterrupt) or main is None:
        sys.__unraisablehook__(unraisable)
        return
    _in_hook = _thread.get_ident() == main
    try:
        # From another thread: sent from here, the handler would run at once, still inside
        # this hook. A real signal (not ``interrupt_main``, which only marks it pending) also
        # ends a blocking call the main thread is in. A raw thread: nothing waits for it at
        # exit.
        with contextlib.suppress(RuntimeError):  # no thread to be had: lost, quietly
            _thread.start_new_thread(_send_until_raised, (main, _raised))
    finally:
        # The last statement before returning: no handler can run between it and the return.
        _in_hook = False


def _send_until_raised(thread_id: int, raised_before: int) -> None:
    import time

    deadline = time.monotonic() + _RESEND_FOR_S
    while _raised == raised_before and time.monotonic() < deadline:
        handler = signal.getsignal(signal.SIGINT)
        # At SIG_DFL the signal would kill the process without its exit report, at SIG_IGN
        # (a decided outcome) it changes nothing anyway.
        if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
            return
        signal.pthread_kill(thread_id, signal.SIGINT)
        if handler is not raise_interrupt:  # trio's (or Python's) own: it takes one and wakes
            return
        time.sleep(_RESEND_EVERY_S)


def received() -> bool:
    """Whether a SIGINT reached one of the handlers above (or ``note_received`` recorded one)."""
    return _received


def note_received() -> None:
    """Record an interrupt that trio's handler took and its caller set aside because the drive
    had already decided the run's outcome (``launch.run_trio``): the outcome stands, but no new
    work may start after it — an automatic compensation, say."""
    global _received
    _received = True


class trio_handles_interrupts:
    """Around ``trio.run``: Python's default SIGINT handler instead of ``raise_interrupt``, so
    trio installs its own (a KeyboardInterrupt raised inside trio's scheduler would leave the
    run half torn down, its ``finally`` blocks unrun); ours is back afterwards."""

    def __enter__(self) -> None:
        self._swapped = signal.getsignal(signal.SIGINT) is raise_interrupt
        if self._swapped:
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            except ValueError:  # not the main thread: no handler can be set from here
                self._swapped = False

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._swapped:
            signal.signal(signal.SIGINT, raise_interrupt)

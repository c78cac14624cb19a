"""Entry point of a worker process: ``python -m agentctl.workers --fd N``, or ``run_forked``
in a child forked from the coordinator (ADR 0017).

The arguments are the inherited socket fd and, optionally, executor modules to import once
the handshake is done (``--preload``, repeatable: the executors the run's plan names, so the
first effect does not pay for them); everything else arrives as messages.

Invariants (start-up, as the CLI's ``entry``: docs/adr/0013-start-up-caches.md):
- this module imports only the standard library at its top; ``run_and_exit`` turns the
  cyclic collector off and installs the start-up code cache (``dataclass_codes``: the
  methods of the wire models' dataclasses and of trio's ~65 attrs classes) before importing
  trio and the worker, then freezes that heap and turns the collector back on before serving
  (importing creates ~10^5 long-lived objects that collecting over and over never frees);
- before the first frame it installs the wire models' validators from the schemas stored in
  the user cache (``mailbox.wirecache``, ADR 0013 item 8), or builds and stores them;
- the worker inherits the coordinator's environment (effects get their own, cleared one), so
  it reads and writes the same user cache as the CLI; since it leaves with ``os._exit``,
  which runs no ``atexit`` handler, it saves the store itself before leaving, and only when
  it compiled a method the store lacked (``usercache`` writes atomically: workers starting
  together each replace the file whole, and the last one's store is kept).
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # not typing's: this module imports only the standard library early
if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctl.dataclass_codes import _Store


def _parse(argv: list[str]) -> tuple[int, tuple[str, ...]]:
    """``--fd N [--preload M]...``: the only command line a worker is started with
    (``coordinator.workerstart.worker_argv``); anything else goes to argparse, which exits
    with its usage message."""
    fd: int | None = None
    preload: list[str] = []
    pairs = list(zip(argv[::2], argv[1::2], strict=False))
    if len(argv) % 2 == 0:
        for flag, value in pairs:
            if flag == "--fd" and fd is None and value.isascii() and value.isdigit():
                fd = int(value)
            elif flag == "--preload" and not value.startswith("-"):
                preload.append(value)
            else:
                break
        else:
            if fd is not None:
                return fd, tuple(preload)
    return _parse_with_argparse(argv)


def _parse_with_argparse(argv: list[str]) -> tuple[int, tuple[str, ...]]:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentctl.workers")
    parser.add_argument("--fd", type=int, required=True, help="inherited AF_UNIX socket fd")
    parser.add_argument(
        "--preload", action="append", default=[], help="executor module to import at start"
    )
    ns = parser.parse_args(argv)
    return int(ns.fd), tuple(ns.preload)


def main(argv: list[str] | None = None, store: _Store | None = None) -> None:
    fd, preload = _parse(sys.argv[1:] if argv is None else argv)
    serve(fd, preload, store)


def serve(fd: int, preload: tuple[str, ...], store: _Store | None = None) -> None:
    """Serve the coordinator on the inherited socket ``fd`` until it is done with us."""
    import trio

    from agentctl.mailbox.wirecache import prepare_wire_models
    from agentctl.workers.serve import run_worker

    prepare_wire_models()  # the wire models' stored schemas, before the first frame
    if store is not None:  # the start-up's methods are in: saved, and let go
        store.close()
    if not gc.isenabled():  # start-up is over (``run_and_exit``): see the module docstring
        gc.freeze()
        gc.enable()
    trio.run(run_worker, fd, preload)


def run_and_exit() -> None:
    """``main``, then leave at once: the coordinator waits for this exit when it closes the
    pool, and everything a worker owns (its socket, its effects' processes) is released by
    then, so the interpreter's own teardown (tens of ms of module cleanup) is skipped."""
    gc.disable()
    from agentctl.dataclass_codes import install

    store = install()  # before the first dataclass or attrs class is defined
    os._exit(_reporting(lambda: main(store=store)))


def run_forked(fd: int, preload: tuple[str, ...]) -> int:
    """``serve`` in a child forked from a coordinator (``coordinator.workerfork``, ADR 0017),
    which already has trio and the wire models in memory; returns the exit code to leave
    with (the caller leaves by ``os._exit``). The inherited heap is frozen first, so the
    collector does not walk — and copy — the parent's objects."""
    gc.freeze()
    gc.enable()
    return _reporting(lambda: serve(fd, preload))


def _reporting(work: Callable[[], None]) -> int:
    """Run ``work``; its exit code, a failure reported as one line, not a traceback on the
    user's terminal; the streams flushed, since the caller leaves by ``os._exit``."""
    try:
        work()
    except Exception as exc:
        print(f"agentctl worker {os.getpid()}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    run_and_exit()

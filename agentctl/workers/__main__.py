"""Entry point of a worker process: ``python -m agentctl.workers --fd N``.

The arguments are the inherited socket fd and, optionally, executor modules to import once
the handshake is done (``--preload``, repeatable: the executors the run's plan names, so the
first effect does not pay for them); everything else arrives as messages.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

from agentctl.workers.serve import run_worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentctl.workers")
    parser.add_argument("--fd", type=int, required=True, help="inherited AF_UNIX socket fd")
    parser.add_argument(
        "--preload", action="append", default=[], help="executor module to import at start"
    )
    ns = parser.parse_args(argv)
    trio.run(run_worker, ns.fd, tuple(ns.preload))


def run_and_exit() -> None:
    """``main``, then leave at once: the coordinator waits for this exit when it closes the
    pool, and everything a worker owns (its socket, its effects' processes) is released by
    then, so the interpreter's own teardown (tens of ms of module cleanup) is skipped."""
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    run_and_exit()

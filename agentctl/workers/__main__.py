"""Entry point of a worker process: ``python -m agentctl.workers --fd N``.

The arguments are the inherited socket fd and, optionally, executor modules to import once
the handshake is done (``--preload``, repeatable: the executors the run's plan names, so the
first effect does not pay for them); everything else arrives as messages.
"""

from __future__ import annotations

import argparse

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


if __name__ == "__main__":
    main()

"""Entry point of a worker process: ``python -m agentctl.workers --fd N``.

The only argument is the inherited socket fd; everything else arrives as messages.
"""

from __future__ import annotations

import argparse

import trio

from agentctl.workers.serve import run_worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentctl.workers")
    parser.add_argument("--fd", type=int, required=True, help="inherited AF_UNIX socket fd")
    ns = parser.parse_args(argv)
    trio.run(run_worker, ns.fd)


if __name__ == "__main__":
    main()

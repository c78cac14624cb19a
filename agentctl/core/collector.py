"""The cyclic garbage collector held off while a large, acyclic structure is being built.

Job: loading, validating and compiling a workflow and creating its run allocate ~10^2
objects per task, nearly all of them kept until the phase ends (YAML values, models, the
plan). Every automatic collection in that phase scans the whole young heap and finds nothing
to free, and the full collections it triggers rescan everything built so far, which made
those phases superlinear in the workflow size (a 10,000-task chain spent ~2/3 of its
parse, validation and compile time collecting). ``collector_paused`` turns the collector off
for such a phase; it changes no result, only when cycles are reclaimed.

Invariants:
- the collector's previous state is restored on exit, also when the phase raises; nested
  pauses leave it off until the outermost one ends;
- a pause is bounded by its phase's input (a workflow source is at most 1 MiB), so the
  garbage it lets accumulate is bounded too; cycles made during a pause are collected by the
  first collections after it;
- no I/O: this only toggles interpreter state, so ``core`` stays pure.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off automatic cyclic collection for the ``with`` body (or a decorated call)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

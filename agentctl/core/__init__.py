"""Pure, deterministic domain logic: no trio, sqlite3, httpx, os, time or random here.

Everything in ``core`` is a function of its arguments, so it can be tested synchronously and
reused by every other layer. Clocks and identifiers are injected by the callers.
"""

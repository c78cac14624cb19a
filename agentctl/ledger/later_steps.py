"""Schema steps from v16 on, as SQL statements (``migrations.MIGRATIONS`` lists and applies them).

``migrations.py`` holds steps v1–v15 and the applier; later steps live here so it stays within
its size. The rules are the same: each step is a tuple of statements portable to PostgreSQL
(``pg/schema.py`` translates the types), run in one transaction with its ``user_version``.
"""

from __future__ import annotations


def provider_session_turns() -> tuple[str, ...]:
    """A provider session per agent task attempt (``ledger/sessions.py``): the v2 table gains
    what ``inspect`` shows of it — the provider's kind, its status and last finish, how many
    model calls it made, the usage they reported, and its latest model call's effect (the
    index finds the session an effect outcome settles). A tool call keeps the id the model
    gave it and its attempt (its key stays ``<task>:<attempt>:<id>``, unique in the run)."""
    return (
        "ALTER TABLE tool_calls ADD COLUMN attempt INTEGER",
        "ALTER TABLE tool_calls ADD COLUMN provider_call_id TEXT",
        "ALTER TABLE provider_sessions ADD COLUMN provider_kind TEXT",
        "ALTER TABLE provider_sessions ADD COLUMN status TEXT NOT NULL DEFAULT 'running'",
        "ALTER TABLE provider_sessions ADD COLUMN finish TEXT",
        "ALTER TABLE provider_sessions ADD COLUMN calls INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE provider_sessions ADD COLUMN usage_json TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE provider_sessions ADD COLUMN last_effect_id TEXT",
        "CREATE INDEX provider_sessions_by_effect ON provider_sessions (last_effect_id)",
    )


def derived_run_lookups() -> tuple[str, ...]:
    """The runs derived from a run, found by index instead of a scan of ``runs``: every
    ``resume`` asks whether a repair or retry took its run as their source
    (``lifecycle._refuse_superseded``), and ``report`` walks a run's descendants by
    ``parent_run_id`` or ``source_run_id`` (both indexed, so the OR of the two uses them)."""
    return (
        "CREATE INDEX runs_by_source ON runs (source_run_id)",
        "CREATE INDEX runs_by_parent ON runs (parent_run_id)",
    )

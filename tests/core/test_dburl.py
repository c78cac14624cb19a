"""``core.dburl``: a PostgreSQL URL's passwords are hidden whatever characters they hold."""

from __future__ import annotations

import pytest

from agentctl.core.dburl import is_postgres_url, normalized, passwords, redact, scrub

REDACTED = [
    ("postgresql://u:se?cret@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:se#cret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://u:pa%zz@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:a:b@c@h/db?x=1", "postgresql://u:***@h/db?x=1"),
    ("POSTGRESQL://u:secret@h/db", "POSTGRESQL://u:***@h/db"),
    ("postgres://u:pw@h", "postgres://u:***@h"),
    (
        "postgresql://u@h/db?sslpassword=k1&password=k2",
        "postgresql://u@h/db?sslpassword=***&password=***",
    ),
    ("postgresql://u@h/db?SSLPASSWORD=k1#frag", "postgresql://u@h/db?SSLPASSWORD=***#frag"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://h/db?user=a@b", "postgresql://h/db?user=a@b"),
    ("relative/path:with@signs.db", "relative/path:with@signs.db"),
]


@pytest.mark.parametrize(("url", "shown"), REDACTED)
def test_redact_hides_the_password_whatever_it_holds(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_passwords_are_found_as_written_and_percent_decoded() -> None:
    assert passwords("postgresql://u:p%40ss@h/db?sslpassword=s%2F1") == (
        "p%40ss",
        "s%2F1",
        "p@ss",
        "s/1",
    )
    assert passwords("postgresql://u:pa%zz@h/db") == ("pa%zz",)
    assert passwords("postgresql://u@h/db") == ()


def test_scrub_removes_passwords_from_a_driver_message() -> None:
    url = "postgresql://u:p%40ss@h/db?sslpassword=k1"
    message = 'invalid "p@ss" in "p%40ss"; key k1; conninfo password=other sslpassword = \'a b\''
    assert scrub(message, url) == (
        'invalid "***" in "***"; key ***; conninfo password=*** sslpassword = ***'
    )
    assert scrub('invalid percent-encoded token: "pa%zz"', "postgresql://u:pa%zz@h/d") == (
        'invalid percent-encoded token: "***"'
    )


def test_an_upper_case_scheme_is_a_postgres_url_and_connects_in_lower_case() -> None:
    assert is_postgres_url("POSTGRESQL://u:secret@h/db")
    assert normalized("POSTGRESQL://u:secret@h/db") == "postgresql://u:secret@h/db"
    assert normalized("Postgres://h/DB") == "postgres://h/DB"
    assert normalized("some/path.db") == "some/path.db"

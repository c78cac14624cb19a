"""The CLI on a PostgreSQL ledger, black-box: ``AGENTCTL_DB``, ``--artifacts`` and a second
shell's view of the same runs (the full suite over both backends is pg-suite's)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import REPO, Cli
from tests.ledger.pg_fixture import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]


def test_a_run_on_postgresql_keeps_its_blobs_in_the_shared_artifact_dir(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    host_a, host_b, shared = tmp_path / "a", tmp_path / "b", tmp_path / "shared"
    host_a.mkdir()
    host_b.mkdir()
    shutil.copy(REPO / "examples" / "hello.yaml", host_a / "hello.yaml")
    env = {"AGENTCTL_DB": pg_url}
    done = cli(
        "--output", "json", "--artifacts", str(shared), "run", "hello.yaml", cwd=host_a, env=env
    )
    assert done.rc == 0, done
    run_id = done.data["runId"]
    # The bytes are in the directory named, not beside any file and not in the cwd.
    assert list((shared / "sha256").rglob("*")) != []
    assert not (host_a / ".agentctl" / "artifacts").exists()
    # Another "host" (cwd) sees the run and verifies its artifacts in the shared directory.
    shown = cli("--output", "json", "inspect", run_id, cwd=host_b, env=env)
    assert shown.rc == 0 and shown.data["run"]["state"] == "succeeded", shown
    verify = cli(
        "--output",
        "json",
        "artifacts",
        "verify",
        "--all",
        cwd=host_b,
        env={"AGENTCTL_DB": pg_url, "AGENTCTL_ARTIFACTS": str(shared)},
    )
    assert verify.rc == 0 and verify.data["valid"] is True, verify
    # Without the shared directory the same blobs are missing: exit 5, never silently fine.
    alone = cli("--output", "json", "artifacts", "verify", "--all", cwd=host_b, env=env)
    assert alone.rc == 5, alone


def test_db_stats_and_encryption_on_postgresql(cli: Cli, pg_url: str) -> None:
    env = {"AGENTCTL_DB": pg_url}
    stats = cli("--output", "json", "db", "stats", env=env)
    assert stats.rc == 0, stats
    assert stats.data["journalMode"] == "postgresql" and stats.data["serverVersion"]
    assert stats.data["counts"]["runs"] == 0 and stats.data["sizeBytes"] > 0
    refused = cli("--output", "json", "db", "encryption", "inventory", env=env)
    assert refused.rc == 2 and "not supported on a PostgreSQL ledger" in refused.stderr


def test_db_encryption_on_postgresql_is_refused_before_anything_is_created(
    cli: Cli, pg_url: str, tmp_path: Path
) -> None:
    """Refused as bad input (exit 2) before the database is opened: opening it would have
    created agentctl's tables (or migrated older ones) and a local artifact directory."""
    import psycopg

    key = {"K1": "A" * 43 + "="}
    for args in (["inventory"], ["enable", "--key-id", "k1", "--key-env", "K1"]):
        refused = cli(
            "--output", "json", "db", "encryption", *args, "--db", pg_url, cwd=tmp_path, env=key
        )
        assert refused.rc == 2 and "not supported on a PostgreSQL ledger" in refused.stderr
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
    assert list(tmp_path.iterdir()) == []


def test_a_url_for_artifacts_exits_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    # --artifacts names a shared directory; a URL there (an object store a script meant) was
    # taken as the relative path "https:/…": the run kept its blobs in a directory "https:"
    # under the cwd, which no other host sees.
    shutil.copy(REPO / "examples" / "hello.yaml", tmp_path / "hello.yaml")
    env = {"AGENTCTL_DB": pg_url}
    for where in (
        ["--artifacts", "https://share.example/a", "run"],
        ["run", "--artifacts=s3://b/a"],
    ):
        done = cli("--output", "json", *where, "hello.yaml", env=env)
        assert done.rc == 2, done
        assert "is a URL" in done.error["error"]["message"], done
        assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.yaml"], done


def test_a_url_in_agentctl_artifacts_exits_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, pg_url: str
) -> None:
    # The variable is the flag's fallback on PostgreSQL: a URL there was the directory "https:".
    shutil.copy(REPO / "examples" / "hello.yaml", tmp_path / "hello.yaml")
    env = {"AGENTCTL_DB": pg_url, "AGENTCTL_ARTIFACTS": "https://share.example/a"}
    done = cli("--output", "json", "run", "hello.yaml", env=env)
    assert done.rc == 2, done
    assert "AGENTCTL_ARTIFACTS" in done.error["error"]["message"], done
    assert "is a URL" in done.error["error"]["message"], done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.yaml"], done

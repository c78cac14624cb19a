"""``agentctl db encryption inventory|enable|rotate``: column encryption at rest (ADR 0010).

Invariants:
- ``inventory`` changes nothing and needs the key only because every open does (an encrypted
  ledger never opens without it, exit 5);
- ``enable`` and ``rotate`` read the new key from the variable ``--key-env`` names (base64 of
  32 bytes) and record that name, so later runs find the key there (or in the variable that
  ``AGENTCTL_DB_KEY_ENV`` names); ``rotate`` opens the database with the current key first;
- ``--dry-run`` opens, counts and reports, and writes nothing; none of these creates a database.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from agentctl.cli_options import DbOpt
from agentctl.cli_state import _ledger, _now, db_app
from agentctl.clikit import DEFAULT_DB, deliver, is_server_db
from agentctl.errors import NotFoundError, ValidationError
from agentctl.render import Outcome, Settings, table

encryption_app = typer.Typer(
    help="Encrypt the ledger's sensitive columns at rest (AES-256-GCM).", no_args_is_help=True
)

KeyIdOpt = Annotated[str, typer.Option("--key-id", help="Id recorded with the new key.")]
KeyEnvOpt = Annotated[
    str, typer.Option("--key-env", help="Variable holding the new key: base64 of 32 bytes.")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Report, change nothing.")]


@encryption_app.command("inventory")
def inventory_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Per sensitive column: values in plaintext and encrypted under each key id."""
    _existing(db)
    with _ledger(db, verify=False) as ledger:
        data = _with_original_keys(ledger.encryption_inventory().to_json())
    deliver(Outcome("EncryptionInventory", data, human=_human(data)))


@encryption_app.command("enable")
def enable_cmd(
    key_id: KeyIdOpt, key_env: KeyEnvOpt, dry_run: DryRunOpt = False, db: DbOpt = DEFAULT_DB
) -> None:
    """Encrypt every sensitive value in one transaction; from then on every write is sealed."""
    _change("enable", key_id, key_env, dry_run, db)


@encryption_app.command("rotate")
def rotate_cmd(
    key_id: KeyIdOpt, key_env: KeyEnvOpt, dry_run: DryRunOpt = False, db: DbOpt = DEFAULT_DB
) -> None:
    """Re-encrypt every sensitive value under a new key in one transaction (the current key
    must be available too); the old key no longer opens the database."""
    _change("rotate", key_id, key_env, dry_run, db)


def _change(action: str, key_id: str, key_env: str, dry_run: bool, db: str) -> None:
    from agentctl.ledger import EncryptionChange
    from agentctl.ledger.crypto import load_key

    load_key(key_id, key_env, new=True)  # bad input (exit 2) before anything is opened
    _existing(db)
    change = EncryptionChange(action, key_id, key_env, _now(), dry_run=dry_run)
    with _ledger(db) as ledger:
        data = _with_original_keys(ledger.change_encryption(change).to_json())
    kind = "EncryptionEnable" if action == "enable" else "EncryptionRotate"
    deliver(Outcome(kind, data, human=_human(data)))


def _existing(db: str) -> None:
    """These commands work on an existing SQLite ledger: opening a missing one would create
    it, and opening a PostgreSQL database would create (or migrate) its tables, only to refuse
    then — so both are refused first."""
    if is_server_db(db):
        from agentctl.ledger.encryption import ENCRYPTION_UNSUPPORTED

        raise ValidationError(ENCRYPTION_UNSUPPORTED)
    if not os.path.exists(db):
        raise NotFoundError(f"no ledger at {db} (nothing was created)")


def _with_original_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` plus the keys the original's reports carry, derived from the column counts, so
    scripts written for it (``.data.enabled``, ``.data.valuesRewritten``…) keep working."""
    plaintext = sum(int(c["plaintext"]) for c in data["columns"])
    encrypted = sum(int(n) for c in data["columns"] for n in c["encrypted"].values())
    extra: dict[str, Any] = {"enabled": data["encrypted"], "keyReference": data["keyEnv"]}
    if data["action"] == "inventory":
        extra |= {"protectedValues": plaintext + encrypted, "encryptedValues": encrypted}
        extra["plaintextValues"] = plaintext
    else:
        extra |= {"operation": data["action"], "valuesScanned": plaintext + encrypted}
        extra["valuesRewritten"] = 0 if data["dryRun"] else data["changed"]
    return data | extra


def _human(data: dict[str, Any]) -> Any:
    def human(settings: Settings) -> str:
        key = f"key {data['keyId']} (from {data['keyEnv']})" if data["encrypted"] else "none"
        head = [f"encryption: {key}"]
        if data["action"] != "inventory":
            verb = "would reseal" if data["dryRun"] else "resealed"
            head.append(f"{data['action']}: {verb} {data['changed']} values")
        rows = [
            [
                f"{c['table']}.{c['column']}",
                str(c["plaintext"]),
                ", ".join(f"{k}: {n}" for k, n in sorted(c["encrypted"].items())) or "-",
            ]
            for c in data["columns"]
        ]
        return (
            "\n".join(head)
            + "\n"
            + table("columns", ["column", "plaintext", "encrypted"], rows, settings)
        )

    return human


def register() -> None:
    db_app.add_typer(encryption_app, name="encryption")

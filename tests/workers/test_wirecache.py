"""The wire models' core schemas kept between worker processes (``agentctl/mailbox/wirecache.py``).

A worker that finds a trusted stored set of schemas validates and encodes with validators
built from it instead of building the models; it must answer every frame exactly as a worker
that built them. The store is a pickle, so one that anybody but the user could have written
must never be loaded: the unsafe cases plant a pickle that creates a marker file if loaded.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentctl.mailbox import prebuilt, wirecache
from tests.cli import untrusted

SHELL = {"command": "/bin/true", "processAllowlist": ["true"]}


def _execute(effect_id: str, operation: str, request: dict[str, object]) -> dict[str, object]:
    return {
        "type": "execute",
        "v": 1,
        "effectId": effect_id,
        "runId": "run-1",
        "taskId": "t",
        "attempt": 1,
        "operation": operation,
        "request": request,
        "timeoutSeconds": 30,
    }


def _frames(ws: Path) -> list[dict[str, object]]:
    """Frames answered by a Result, by each kind of Failure, and last a malformed frame (the
    worker then drops the connection)."""
    w = str(ws)
    write = {"workspace": w, "writableRoots": ["out"], "path": "out/a.txt", "content": "x"}
    return [
        _execute("ok", "builtin.shell.exec", {"workspace": w, **SHELL}),
        _execute("exit", "builtin.shell.exec", {"workspace": w, "command": "/bin/false"}),
        _execute("denied", "builtin.shell.exec", {"workspace": w, **SHELL, "cwd": "../x"}),
        _execute("allow", "builtin.shell.exec", {"workspace": w, **SHELL, "command": "/bin/ls"}),
        _execute("bad", "builtin.shell.exec", {"workspace": w, "command": 3, "extra": 1}),
        _execute("limits", "builtin.shell.exec", {**SHELL, "limits": {"timeoutSeconds": 0}}),
        _execute("write", "builtin.write", write),
        _execute("again", "builtin.write", write),
        _execute("unknown", "no.such.op", {}),
        {**_execute("zero", "builtin.shell.exec", {}), "timeoutSeconds": 0},
    ]


def _recv(sock: socket.socket) -> bytes | None:
    header = sock.recv(4, socket.MSG_WAITALL)
    if not header:
        return None
    (length,) = struct.unpack(">I", header)
    return sock.recv(length, socket.MSG_WAITALL)


def _replies(env: dict[str, str], ws: Path) -> list[object]:
    """The reply bodies of a real worker to ``_frames``, one at a time, in a new workspace
    ``ws``; None for its EOF."""
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir()
    parent, child = socket.socketpair()
    with parent:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentctl.workers", "--fd", str(child.fileno())],
            pass_fds=(child.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        child.close()
        parent.settimeout(120)
        hello = json.loads(_recv(parent) or b"null")
        assert hello.pop("pid") == proc.pid
        replies: list[object] = [hello]
        for frame in _frames(ws):
            body = json.dumps(frame).encode()
            parent.sendall(struct.pack(">I", len(body)) + body)
            reply = _recv(parent)
            replies.append(None if reply is None else reply.decode())
    assert proc.wait(timeout=120) == 0
    return replies


def _env(cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCTL_")}
    if cache is None:  # no cache directory at all: XDG unset, no absolute home
        env.pop("XDG_CACHE_HOME", None)
        env["HOME"] = "no-home"
    else:
        env["XDG_CACHE_HOME"] = str(cache)
    return env


def _stored(cache: Path) -> Path:
    return cache / "agentctl" / wirecache.FILE_NAME


def test_a_worker_answers_alike_with_and_without_the_stored_schemas(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    plain = _replies(_env(None), tmp_path / "ws")  # no cache: each model built when used
    assert not _stored(cache).exists()
    building = _replies(_env(cache), tmp_path / "ws")  # an empty cache: built, then stored
    stored = _stored(cache)
    assert stored.read_bytes().startswith(wirecache.fingerprint())
    assert stored.stat().st_mode & 0o777 == 0o600
    before = stored.stat()
    loading = _replies(_env(cache), tmp_path / "ws")
    after = stored.stat()
    # Not rewritten: the store was found, and every validator came from it (a store that
    # failed to install would have been built again and replaced).
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert plain == building == loading
    kinds = [json.loads(r)["type"] if isinstance(r, str) else r for r in plain[1:]]
    assert kinds == ["result"] + ["failure"] * 5 + ["result"] * 2 + ["failure", None]


def _plant(cache: Path, marker: Path, key: bytes | None = None) -> Path:
    """A private store holding a pickle that creates ``marker`` when loaded."""
    return untrusted.plant(_stored(cache), key or wirecache.fingerprint(), marker)


def _one_shell_effect(cache: Path, ws: Path) -> None:
    replies = _replies(_env(cache), ws)
    assert json.loads(str(replies[1]))["type"] == "result"


def test_a_private_store_is_what_gets_loaded(tmp_path: Path) -> None:
    """The control for the unsafe cases: the planted pickle does run when it is trusted."""
    marker = tmp_path / "loaded"
    target = _plant(tmp_path / "cache", marker)
    _one_shell_effect(tmp_path / "cache", tmp_path / "ws")
    assert marker.exists()
    # What it held was no set of schemas: the worker built them and replaced the file.
    assert isinstance(pickle.loads(target.read_bytes().split(b"\n", 1)[1]), dict)


@pytest.mark.parametrize("spoil", untrusted.SPOILS)
def test_a_store_others_could_have_written_is_never_loaded(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    untrusted.skip_unless_possible(spoil)
    marker = tmp_path / "loaded"
    spoil(_plant(tmp_path / "cache", marker))
    _one_shell_effect(tmp_path / "cache", tmp_path / "ws")
    assert not marker.exists()


def test_a_store_made_from_other_sources_is_not_used(tmp_path: Path) -> None:
    marker = tmp_path / "loaded"
    target = _plant(tmp_path / "cache", marker, key=b"agentctl-wire-schemas-1 stale\n")
    _one_shell_effect(tmp_path / "cache", tmp_path / "ws")
    assert not marker.exists()
    assert target.read_bytes().startswith(wirecache.fingerprint())  # rebuilt and replaced


def _altered(schemas: dict[str, Any]) -> dict[str, Any]:
    """``schemas`` with three visible differences: ``Hello`` dumps its pid as ``storedPid``
    (its serializer), ``ShellRequest`` takes no command longer than one character (its
    validator), and the union upper-cases an ``Execute``'s effect id (the frame decoder)."""
    schemas["Hello"]["schema"]["fields"]["pid"]["serialization_alias"] = "storedPid"
    command = schemas["ShellRequest"]["schema"]["fields"]["command"]["schema"]
    command["max_length"] = 1
    execute = schemas[prebuilt.UNION]["choices"]["execute"]["schema"]["fields"]
    execute["effect_id"]["schema"]["to_upper"] = True
    return schemas


def test_a_worker_validates_and_dumps_with_the_stored_schemas(tmp_path: Path) -> None:
    """The control for the whole feature: a store whose schemas differ from the models' own
    changes what a real worker accepts and sends, so those schemas are what it runs with."""
    cache = tmp_path / "cache"
    _one_shell_effect(cache, tmp_path / "ws")  # a worker builds the store
    key, stored = _stored(cache).read_bytes().split(b"\n", 1)
    _stored(cache).write_bytes(key + b"\n" + pickle.dumps(_altered(pickle.loads(stored))))
    parent, child = socket.socketpair()
    with parent:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentctl.workers", "--fd", str(child.fileno())],
            pass_fds=(child.fileno(),),
            env=_env(cache),
            stdin=subprocess.DEVNULL,
        )
        child.close()
        parent.settimeout(120)
        hello = json.loads(_recv(parent) or b"null")
        shell = {"workspace": str(tmp_path / "ws"), **SHELL}
        body = json.dumps(_execute("ok", "builtin.shell.exec", shell))
        parent.sendall(struct.pack(">I", len(body)) + body.encode())
        reply = json.loads(_recv(parent) or b"null")
    assert proc.wait(timeout=120) == 0
    assert hello["storedPid"] == proc.pid and "pid" not in hello
    # The same frame that the first worker ran, refused by the stored one-character limit.
    assert (reply["type"], reply["effectId"]) == ("failure", "OK")
    assert reply["error"]["message"].endswith("1 validation error for ShellRequest")

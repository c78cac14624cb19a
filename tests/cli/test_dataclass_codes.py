"""Dataclass (and attrs) methods compiled once per user (``agentctl/dataclass_codes.py``).

The same classes are defined in three fresh processes — without the store, with an empty
store (compiled, then saved) and with the saved store (loaded) — and must behave the same in
all three. A store is code, so one that anybody but the user could have written must never
be used: the unsafe cases plant a store whose every method raises ``PLANTED``.
"""

from __future__ import annotations

import marshal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl import dataclass_codes
from tests.cli import untrusted
from tests.cli.cacheprobe import probe_json
from tests.conftest import REPO, cli_env

PROBE = """\
import dataclasses, inspect, json, sys
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

if sys.argv[1] == "store":
    from agentctl import dataclass_codes
    store = dataclass_codes.install()
else:
    store = None

@dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()

@dataclass(kw_only=True, slots=True)
class Options:
    name: str
    limit: int | None = None
    seen: list[int] = field(default_factory=list)
    hidden: int = field(default=7, init=False, repr=False, compare=False)
    shared: ClassVar[int] = 3

@dataclass(unsafe_hash=True)
class Scaled:
    base: float
    factor: InitVar[float] = 2.0
    value: float = field(init=False)
    def __post_init__(self, factor: float) -> None:
        self.value = self.base * factor

import attr  # after install: its methods are served from the store as well

@attr.s(frozen=True, auto_attribs=True)
class Pair:
    left: int
    right: str = "r"

@attr.s(auto_attribs=True, eq=True, order=True, slots=True)
class Rank:
    level: int
    name: str = attr.ib(default="n", repr=False)

@attr.s(frozen=True)
class Empty:  # no hashed field: ``hash((class hash,))`` compiles to one tuple constant
    pass

type_hash = hash(attr._make._generate_unique_filename(Pair, "hash"))
empty_hash = hash(attr._make._generate_unique_filename(Empty, "hash"))
pair_facts = {
    "reprs": [repr(Pair(1)), repr(Rank(2, "x"))],
    "eq": [Pair(1) == Pair(1, "r"), Pair(1) == Pair(2), Rank(1) < Rank(2)],
    # attrs hashes the class's own (per-process) hash with the fields: put back in the code
    "hash": [hash(Pair(1, "x")) == hash((type_hash, 1, "x")), hash(Empty()) == hash((empty_hash,))],
    "signatures": [str(inspect.signature(c)) for c in (Pair, Rank)],
}

import typing  # forward references: typing compiles their text (served from the store too)

class Hinted:
    a: "list[Point] | None"
    b: "dict[str, Options]"

try:
    typing.ForwardRef("1 +")
    bad = "compiled"
except SyntaxError as exc:
    bad = str(exc)
unpacked = typing.ForwardRef("*tuple[int, str]")
typing_facts = {
    "hints": {k: repr(v) for k, v in typing.get_type_hints(Hinted).items()},
    "bad": bad,
    "unpacked": [unpacked.__forward_arg__, repr(unpacked._evaluate(globals(), None, frozenset()))],
}

p, q = Point(1, 2, ("a",)), Point(1, 3)
o = Options(name="n", limit=4)
s = Scaled(1.5, 3.0)
try:
    p.x = 5  # type: ignore[misc]
    frozen = "assigned"
except dataclasses.FrozenInstanceError as exc:
    frozen = f"{type(exc).__name__}: {exc}"
facts = {
    "reprs": [repr(p), repr(q), repr(o), repr(s)],
    "eq": [p == Point(1, 2, ("a",)), p == q, o == Options(name="n", limit=4)],
    "order": [p < q, q <= p, sorted([q, p]) == [p, q]],
    "hash": [hash(p) == hash(Point(1, 2, ("a",))), hash(s) == hash(Scaled(1.5, 3.0))],
    "frozen": frozen,
    "signatures": [str(inspect.signature(c)) for c in (Point, Options, Scaled)],
    "annotations": [repr(c.__init__.__annotations__) for c in (Point, Options, Scaled)],
    "slots": Options.__slots__,
    "match_args": Point.__match_args__,
    "fields": [[f.name for f in dataclasses.fields(c)] for c in (Point, Options, Scaled)],
    "attrs": pair_facts,
    "typing": typing_facts,
}
served = attr._make._compile_and_eval.__module__ == "agentctl.dataclass_codes"
typing_served = getattr(typing, "compile", None) is not None
used = None if store is None else {
    "compiled": store.added, "reused": len(store.used), "attrs": served, "typing": typing_served
}
print(json.dumps({"facts": facts, "store": used}))
"""


def _probe(cache: Path, mode: str) -> dict[str, object]:
    return probe_json(["-c", PROBE, mode], cache)


def test_stored_methods_behave_as_freshly_compiled_ones(tmp_path: Path) -> None:
    plain = _probe(tmp_path, "plain")
    cold = _probe(tmp_path, "store")
    stored = tmp_path / "agentctl" / dataclass_codes.FILE_NAME
    assert stored.is_file() and stored.stat().st_mode & 0o777 == 0o600
    warm = _probe(tmp_path, "store")
    assert plain["facts"] == cold["facts"] == warm["facts"]
    reused = cold["store"]["reused"]  # type: ignore[index]
    assert cold["store"] == {"compiled": True, "reused": reused, "attrs": True, "typing": True}
    assert warm["store"]["compiled"] is False and warm["store"]["reused"] > 0  # type: ignore[index]


def _plant(cache: Path, marker: Path) -> Path:
    """A private store in which every known method text runs code creating ``marker``."""
    _probe(cache, "store")  # the real store: its digests are the texts the probe uses
    target = cache / "agentctl" / dataclass_codes.FILE_NAME
    key, _, body = target.read_bytes().partition(b"\n")
    planted = compile(
        f"def __create_fn__(**_locals):\n open({str(marker)!r}, 'w').close()\n"
        " raise RuntimeError('PLANTED')",
        "<planted>",
        "exec",
    )
    known = {digest: marshal.dumps(planted) for digest in marshal.loads(body)}
    target.write_bytes(key + b"\n" + marshal.dumps(known))
    target.chmod(0o600)
    return target


def _run_probe(cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, "store"],
        env=cli_env({"XDG_CACHE_HOME": str(cache)}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_private_store_is_what_gets_used(tmp_path: Path) -> None:
    """The control for the unsafe cases: the planted store does run when it is trusted."""
    marker = tmp_path / "planted-ran"
    _plant(tmp_path, marker)
    done = _run_probe(tmp_path)
    assert done.returncode != 0 and "PLANTED" in done.stderr
    assert marker.exists()


@pytest.mark.parametrize("spoil", untrusted.SPOILS)
def test_a_store_others_could_have_written_is_never_used(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    untrusted.skip_unless_possible(spoil)
    marker = tmp_path / "planted-ran"
    target = _plant(tmp_path, marker)
    spoil(target)
    done = _run_probe(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists()


def test_the_cli_keeps_its_dataclass_methods(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentctl", "version"],
        env=cli_env({"XDG_CACHE_HOME": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "agentctl" / dataclass_codes.FILE_NAME).is_file()


DAMAGES: dict[str, object] = {
    "not marshal data": b"\x00damaged",
    "not a code object": marshal.dumps(42),
    "not bytes": 42,
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_store_is_compiled_around(tmp_path: Path, damage: str) -> None:
    """A store with the right key but broken entries: methods are compiled as usual."""
    env = cli_env({"XDG_CACHE_HOME": str(tmp_path)})
    command = [sys.executable, "-m", "agentctl", "check", str(REPO / "examples" / "hello.yaml")]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    target = tmp_path / "agentctl" / dataclass_codes.FILE_NAME
    key, _, body = target.read_bytes().partition(b"\n")
    known = {digest: DAMAGES[damage] for digest in marshal.loads(body)}
    target.write_bytes(key + b"\n" + marshal.dumps(known))
    target.chmod(0o600)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout

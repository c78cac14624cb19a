"""The compiled form of imported modules' patterns kept per user (``agentctl/regex_codes.py``).

A module compiling patterns as it is imported is loaded in fresh processes — without the
store, with an empty store (compiled, sighted), again (compiled, kept: a pattern is kept from
its second sighting) and with the saved store (loaded) — and its patterns must behave the same
in all of them. A pattern whose text changes in every process is never kept. Only patterns compiled during an import are
kept (never one compiled later, which may be made from secrets), never one whose compiling
warns, and a store anybody but the user could have written is never used.
"""

from __future__ import annotations

import json
import marshal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentctl import regex_codes
from tests.cli import untrusted
from tests.conftest import REPO, cli_env

PATTERNS = '''\
import re

WORD = re.compile(r"(?P<head>\\w+)-(?P<tail>\\d{2,4})")
CASELESS = re.compile("straße|ǅ|k", re.IGNORECASE)
VERBOSE = re.compile(r"""
    ^ \\s* (\\w+)   # a name
    \\s* = \\s* (.*) $""", re.VERBOSE | re.MULTILINE)
BYTES = re.compile(rb"\\x00(?P<n>[\\x80-\\xff]+)")
PLANTED = re.compile("PLANTED")
WARNS = re.compile("[[a]")  # FutureWarning: possible nested set
LONE = re.compile("[\\ud800-\\udbff]x")  # a lone surrogate in a str pattern's text
TWIN_STR = re.compile("twin")
TWIN_BYTES = re.compile(b"twin")  # the same text as bytes: another pattern


def facts():
    text = "alpha-12 beta-3456 gamma-7\\nx = 1\\n  y=two"
    return {
        "shapes": [[p.pattern if isinstance(p.pattern, str) else p.pattern.hex(), p.flags,
                    p.groups, dict(p.groupindex)] for p in (WORD, CASELESS, VERBOSE, BYTES)],
        "word": [m.groupdict() for m in WORD.finditer(text)],
        "caseless": CASELESS.findall("STRASSE Straße ǆ ǅ K \\u212a"),
        "verbose": VERBOSE.findall(text),
        "bytes": [m.group("n").hex() for m in BYTES.finditer(b"a\\x00\\x81\\xffb\\x00c")],
        "warns": WARNS.findall("a[b"),
        "planted": WORD.fullmatch("PLANTED") is not None,
        "lone": [len(m) for m in LONE.findall("\\ud800x \\udbffx y")],
        "twins": [TWIN_STR.findall("twin"), [b.hex() for b in TWIN_BYTES.findall(b"twin")]],
    }
'''

PROBE = """\
import json, re, sys

if sys.argv[1] == "store":
    from agentctl import regex_codes
    store = regex_codes.install()
else:
    store = None

import patterns  # compiles its patterns as it is imported

# Compiled by the program at work, not by an import: never kept.
LATER = re.compile("secret-" + "value")
used = None if store is None else {"added": store.added, "used": len(store.used)}
print(json.dumps({"facts": patterns.facts(), "later": bool(LATER.match("secret-value")),
                  "store": used}))
"""


def _write_probe(where: Path) -> Path:
    (where / "patterns.py").write_text(PATTERNS, encoding="utf-8")
    probe = where / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    return probe


def _run(cache: Path, mode: str) -> subprocess.CompletedProcess[str]:
    probe = _write_probe(cache)
    return subprocess.run(
        [sys.executable, str(probe), mode],
        env=cli_env({"XDG_CACHE_HOME": str(cache)}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _probe(cache: Path, mode: str) -> dict[str, object]:
    done = _run(cache, mode)
    assert done.returncode == 0, done.stderr[-2000:]
    # The warning of the pattern that warns is given every time, store or not.
    assert "FutureWarning" in done.stderr, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


def _script(cache: Path, code: str, **env: str) -> None:
    """Run ``python -c CODE`` in ``cache`` (its modules beside it), with that user cache."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cache,
        env=cli_env({"XDG_CACHE_HOME": str(cache), **env}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _stored(cache: Path) -> tuple[bytes, dict[tuple[str | bytes, int], object]]:
    """The store's key line and its patterns' entries (its sightings left out)."""
    key, content = _stored_file(cache)
    return key, {k: v for k, v in content.items() if k != "sighted"}


def _sighted(cache: Path) -> list[bytes]:
    sighted: list[bytes] = _stored_file(cache)[1]["sighted"]
    return sighted


def _stored_file(cache: Path) -> tuple[bytes, dict[Any, Any]]:
    target = cache / "agentctl" / regex_codes.FILE_NAME
    key, _, body = target.read_bytes().partition(b"\n")
    return key + b"\n", marshal.loads(body)


def _store(cache: Path, key: bytes, known: object) -> None:
    target = cache / "agentctl" / regex_codes.FILE_NAME
    target.write_bytes(key + marshal.dumps(known))
    target.chmod(0o600)


def _fill(cache: Path) -> dict[str, object]:
    """Two processes with the store: the first sights the patterns, the second keeps them."""
    _probe(cache, "store")
    return _probe(cache, "store")


def test_stored_patterns_behave_as_freshly_compiled_ones(tmp_path: Path) -> None:
    plain = _probe(tmp_path, "plain")
    cold = _probe(tmp_path, "store")
    stored = tmp_path / "agentctl" / regex_codes.FILE_NAME
    assert stored.is_file() and stored.stat().st_mode & 0o777 == 0o600
    assert _stored(tmp_path)[1] == {} and _sighted(tmp_path)  # seen once: only digests
    second = _probe(tmp_path, "store")
    warm = _probe(tmp_path, "store")
    assert plain["facts"] == cold["facts"] == second["facts"] == warm["facts"]
    assert plain["facts"]["planted"] is False  # type: ignore[index]
    assert cold["store"]["added"] is True and second["store"]["added"] is True  # type: ignore[index]
    assert warm["store"]["added"] is False and warm["store"]["used"] >= 5  # type: ignore[index]


VARYING = """\
import os, re
re.compile("PER-PROCESS-" + os.environ["VARIANT"])
"""


def _run_varying(cache: Path, variant: str) -> None:
    """A process with the store importing ``VARYING``, whose pattern ends with ``variant``."""
    (cache / "varying.py").write_text(VARYING, encoding="utf-8")
    code = "from agentctl import regex_codes\nregex_codes.install()\nimport varying\n"
    _script(cache, code, VARIANT=variant)


def test_a_pattern_whose_text_changes_in_every_process_is_never_kept(tmp_path: Path) -> None:
    """Some modules build a pattern from a set, so its text follows the hash seed (tokenize):
    kept at first sight, each process added one no later process could use."""
    for variant in range(8):
        _run_varying(tmp_path, str(variant))
    _, known = _stored(tmp_path)
    assert not any(str(pattern).startswith("PER-PROCESS-") for pattern, _flags in known)
    assert len(_sighted(tmp_path)) == 8  # one digest each, 16 bytes


def test_only_patterns_compiled_by_an_import_are_kept(tmp_path: Path) -> None:
    _fill(tmp_path)
    _, known = _stored(tmp_path)
    patterns = {pattern for pattern, _flags in known}
    assert "PLANTED" in patterns and b"\\x00(?P<n>[\\x80-\\xff]+)" in patterns
    assert "secret-value" not in patterns  # compiled by the program at work
    assert "[[a]" not in patterns  # its compiling warns


def _plant(cache: Path) -> None:
    """A private store in which ``WORD``'s pattern has the code of ``PLANTED``'s."""
    _fill(cache)
    key, known = _stored(cache)
    word = next(k for k in known if k[0] == r"(?P<head>\w+)-(?P<tail>\d{2,4})")
    known[word] = known[("PLANTED", 0)]
    _store(cache, key, known)


def test_a_private_store_is_what_gets_used(tmp_path: Path) -> None:
    """The control for the unsafe cases: the planted store is used when it is trusted."""
    _plant(tmp_path)
    assert _probe(tmp_path, "store")["facts"]["planted"] is True  # type: ignore[index]


@pytest.mark.parametrize("spoil", untrusted.SPOILS)
def test_a_store_others_could_have_written_is_never_used(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    untrusted.skip_unless_possible(spoil)
    _plant(tmp_path)
    spoil(tmp_path / "agentctl" / regex_codes.FILE_NAME)
    assert _probe(tmp_path, "store")["facts"]["planted"] is False  # type: ignore[index]


DAMAGES: dict[str, Callable[[object], object]] = {
    "not a tuple": lambda entry: 42,
    "code the engine refuses": lambda entry: (0, [255, 255, 255], 0, {}, ()),
    "not a code list": lambda entry: (0, "code", 0, {}, ()),
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_store_is_compiled_around(tmp_path: Path, damage: str) -> None:
    """A store with the right key but broken entries: patterns are compiled as usual."""
    plain = _probe(tmp_path, "plain")
    _fill(tmp_path)
    key, known = _stored(tmp_path)
    _store(tmp_path, key, {k: DAMAGES[damage](v) for k, v in known.items()})
    assert _probe(tmp_path, "store")["facts"] == plain["facts"]


def test_an_entry_the_engine_refuses_is_replaced_at_once(tmp_path: Path) -> None:
    _fill(tmp_path)
    key, known = _stored(tmp_path)
    _store(tmp_path, key, {k: DAMAGES["code the engine refuses"](v) for k, v in known.items()})
    _probe(tmp_path, "store")
    assert _stored(tmp_path)[1] == known  # not left damaged for one more process


SIGHTINGS: dict[str, object] = {
    "not a list": 42,
    "an unhashable item": [[1]],
    "digests of the wrong length": [b"short"],
    "more than the cap": [i.to_bytes(16, "big") for i in range(1_500)],
}


@pytest.mark.parametrize("sighted", list(SIGHTINGS), ids=list(SIGHTINGS))
def test_damaged_sightings_are_ignored(tmp_path: Path, sighted: str) -> None:
    plain = _probe(tmp_path, "plain")
    _fill(tmp_path)
    key, known = _stored(tmp_path)
    _store(tmp_path, key, {**known, "sighted": SIGHTINGS[sighted]})
    assert _probe(tmp_path, "store")["facts"] == plain["facts"]


def test_past_the_cap_only_this_process_sightings_are_kept(tmp_path: Path) -> None:
    for variant in ("first", "second"):
        _run_varying(tmp_path, variant)
        if variant == "first":
            key, known = _stored(tmp_path)
            _store(tmp_path, key, {**known, "sighted": SIGHTINGS["more than the cap"]})
    assert len(_sighted(tmp_path)) == 1  # the second process's own


def test_both_a_str_and_a_bytes_pattern_of_one_text_are_kept(tmp_path: Path) -> None:
    _fill(tmp_path)
    patterns = {pattern for pattern, _flags in _stored(tmp_path)[1]}
    assert {"twin", b"twin", "[\ud800-\udbff]x"} <= patterns


def test_a_store_of_the_first_format_is_replaced(tmp_path: Path) -> None:
    """Format 1 kept patterns at first sight; its files are ignored, then rewritten."""
    plain = _probe(tmp_path, "plain")
    _fill(tmp_path)
    key, known = _stored(tmp_path)
    old_key = key.replace(b"agentctl-regex-codes-2 ", b"agentctl-regex-codes-1 ")
    assert old_key != key
    _store(tmp_path, old_key, {k: DAMAGES["code the engine refuses"](v) for k, v in known.items()})
    assert _probe(tmp_path, "store")["facts"] == plain["facts"]
    assert _stored(tmp_path)[0] == key


def test_a_store_that_is_not_marshal_data_is_ignored(tmp_path: Path) -> None:
    plain = _probe(tmp_path, "plain")
    _probe(tmp_path, "store")
    key, _ = _stored(tmp_path)
    (tmp_path / "agentctl" / regex_codes.FILE_NAME).write_bytes(key + b"\x00damaged")
    assert _probe(tmp_path, "store")["facts"] == plain["facts"]


def test_the_cli_keeps_the_patterns_its_imports_compile(tmp_path: Path) -> None:
    hello = REPO / "examples" / "hello.yaml"
    env = cli_env({"XDG_CACHE_HOME": str(tmp_path)})
    command = [sys.executable, "-m", "agentctl", "check", str(hello)]
    for _ in range(2):  # kept from the second sighting
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    _, known = _stored(tmp_path)
    # PyYAML's reader compiles its largest pattern (a class of most of Unicode) on import.
    assert any(isinstance(p, str) and p.startswith("[^\t\n\r -~") for p, _ in known)


THREADS = """\
import threading
from pathlib import Path

from agentctl import regex_codes

regex_codes.install()
Path("in_thread.py").write_text("import re\\nre.compile('IMPORTED-IN-A-THREAD')\\n")
Path("in_main.py").write_text("import re\\nre.compile('IMPORTED-IN-MAIN')\\n")
worker = threading.Thread(target=lambda: __import__("in_thread"))
worker.start()
worker.join()
import in_main
"""


def test_a_pattern_an_import_compiles_in_another_thread_is_not_kept(tmp_path: Path) -> None:
    """Recording swaps the process's warnings filters, so it happens in the main thread only."""
    for _ in range(2):  # kept from the second sighting
        _script(tmp_path, THREADS)
    _, known = _stored(tmp_path)
    patterns = {pattern for pattern, _flags in known}
    assert "IMPORTED-IN-MAIN" in patterns  # the control: the same import in the main thread
    assert "IMPORTED-IN-A-THREAD" not in patterns

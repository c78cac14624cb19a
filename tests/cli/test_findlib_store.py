"""``ctypes.util.find_library``'s answers kept per user for trio's import (``findlib_store``).

A probe imports trio in a fresh process — without the store, with an empty one (asked, then
saved) and with the saved one — counting the ``ldconfig`` processes started: the warm store
starts none, and trio still names its threads with the answer the real module gives. After
it, the real ``ctypes.util`` takes the stand-in's place. A planted answer is served only from
a private store, and only while the linker cache and search paths are the ones it was kept for.
"""

from __future__ import annotations

import marshal
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl import findlib_store
from tests.cli import untrusted
from tests.cli.cacheprobe import probe_json
from tests.conftest import cli_env

PROBE = """\
import json, subprocess, sys

started = []


class Counting(subprocess.Popen):
    def __init__(self, args, *rest, **options):
        started.append(" ".join(map(str, args)) if isinstance(args, list) else str(args))
        super().__init__(args, *rest, **options)


subprocess.Popen = Counting
if sys.argv[1] == "store":
    from agentctl import findlib_store
    if len(sys.argv) > 2:  # a stand-in for the linker cache, which a test may change
        findlib_store.LINKER_CACHE = sys.argv[2]
    findlib_store.install()

looked_up = []


class Spy:  # sees each search for a module, before any finder serves it
    def find_spec(self, name, path, target=None):
        looked_up.append(name)
        return None


sys.meta_path.insert(0, Spy())
import trio
from trio._core import _thread_cache

ldconfig = sum("ldconfig" in argv for argv in started)
import ctypes.util

served_by = type(sys.modules["ctypes.util"]).__name__
real_loaded = looked_up.count("ctypes.util") > (sys.argv[1] == "store")  # the stand-in's one
planted = ctypes.util.find_library("agentctl-planted")
ctypes.util.test  # any other name: the real module takes the stand-in's place
real = sys.modules["ctypes.util"]
print(json.dumps({
    "ldconfig": ldconfig,
    "names_threads": _thread_cache.set_os_thread_name is not None,
    "planted": planted,
    "served_by": served_by,
    "real_loaded": real_loaded,
    "real_in_place": real is ctypes.util and hasattr(real, "__file__"),
    "pthread": real.find_library("pthread"),
}))
"""


def _probe(cache: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    probe = cache / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    return probe_json([str(probe), *args], cache, env)


def _target(cache: Path) -> Path:
    return cache / "agentctl" / findlib_store.FILE_NAME


def _plant(cache: Path, *args: str) -> None:
    """A private store that also answers a library nobody has."""
    _probe(cache, "store", *args)
    key, _, body = _target(cache).read_bytes().partition(b"\n")
    known = marshal.loads(body)
    known["agentctl-planted"] = "libplanted.so.1"
    _target(cache).write_bytes(key + b"\n" + marshal.dumps(known))
    _target(cache).chmod(0o600)


def test_a_warm_store_answers_trio_without_starting_ldconfig(tmp_path: Path) -> None:
    plain = _probe(tmp_path, "plain")
    cold = _probe(tmp_path, "store")
    assert _target(tmp_path).stat().st_mode & 0o777 == 0o600
    warm = _probe(tmp_path, "store")
    assert plain["ldconfig"] and cold["ldconfig"]  # what the store saves
    assert warm["ldconfig"] == 0 and warm["served_by"] == "_StandIn"
    assert plain["real_loaded"] and not warm["real_loaded"]
    assert plain["names_threads"] and warm["names_threads"]
    _, _, body = _target(tmp_path).read_bytes().partition(b"\n")
    assert marshal.loads(body) == {"pthread": plain["pthread"]}
    assert warm["pthread"] == plain["pthread"] and warm["real_in_place"] is True


def test_a_private_store_is_what_gets_served(tmp_path: Path) -> None:
    """The control for the cases below: the planted answer is served when it is trusted."""
    _plant(tmp_path)
    assert _probe(tmp_path, "store")["planted"] == "libplanted.so.1"
    assert _probe(tmp_path, "plain")["planted"] is None


@pytest.mark.parametrize("spoil", untrusted.SPOILS)
def test_a_store_others_could_have_written_is_never_served(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    untrusted.skip_unless_possible(spoil)
    _plant(tmp_path)
    spoil(_target(tmp_path))
    assert _probe(tmp_path, "store")["planted"] is None


def test_answers_are_served_whatever_the_search_paths(tmp_path: Path) -> None:
    """The linker cache's answer does not depend on them (valgrind sets LD_LIBRARY_PATH)."""
    _plant(tmp_path)
    moved = _probe(tmp_path, "store", env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert moved["planted"] == "libplanted.so.1" and moved["ldconfig"] == 0


def test_answers_kept_for_another_linker_cache_are_not_served(tmp_path: Path) -> None:
    linker_cache = tmp_path / "ld.so.cache"
    linker_cache.write_bytes(b"one")
    _plant(tmp_path, str(linker_cache))
    assert _probe(tmp_path, "store", str(linker_cache))["planted"] == "libplanted.so.1"
    linker_cache.write_bytes(b"a library installed")
    assert _probe(tmp_path, "store", str(linker_cache))["planted"] is None


def test_the_cli_keeps_the_answer_trio_asks_for(tmp_path: Path) -> None:
    workflow = tmp_path / "one.yaml"
    workflow.write_text(
        "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: one}\n"
        "spec:\n  actions:\n    a: {kind: builtin.assign}\n"
        "  tasks:\n  - id: t0\n    uses: action:a\n    with: {i: 0}\n",
        encoding="utf-8",
    )
    env = cli_env({"XDG_CACHE_HOME": str(tmp_path)})
    command = [sys.executable, "-m", "agentctl", "run", str(workflow)]
    command += ["--db", str(tmp_path / "runtime.db")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _, _, body = _target(tmp_path).read_bytes().partition(b"\n")
    assert set(marshal.loads(body)) == {"pthread"}


SEARCH_PATHS = """\
import json, sys

from agentctl import findlib_store

findlib_store.install()
import ctypes.util

stand_in = ctypes.util
print(json.dumps({
    "served_by": type(stand_in).__name__,
    "ldconfig": stand_in._findSoname_ldconfig("agentctlprobe"),  # the real module's search
    "probe": stand_in.find_library("agentctlprobe"),  # found through LD_LIBRARY_PATH only
    "pthread": stand_in.find_library("pthread"),  # the control: the linker cache's answer
}))
"""


def _a_library_with_a_soname() -> Path:
    """A shared library the linker cache lists (``ldconfig -p``): zlib's."""
    listed = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True)
    for line in listed.stdout.splitlines():
        if line.strip().startswith("libz.so.1 ") and "=>" in line:
            return Path(line.split("=>")[1].strip())
    pytest.skip("no zlib in the linker cache")


def test_an_answer_of_the_search_paths_is_not_kept(tmp_path: Path) -> None:
    """``find_library`` falls back to the linker's search paths (``ld -t`` over
    ``LD_LIBRARY_PATH``), which the key does not name: such an answer must never be kept."""
    libs = tmp_path / "libs"
    libs.mkdir()
    shutil.copyfile(_a_library_with_a_soname(), libs / "libagentctlprobe.so")
    probe = tmp_path / "search_paths.py"
    probe.write_text(SEARCH_PATHS, encoding="utf-8")
    found = probe_json([str(probe)], tmp_path, {"LD_LIBRARY_PATH": str(libs)})
    assert found["served_by"] == "_StandIn" and found["ldconfig"] is None
    assert found["probe"] == "libz.so.1"  # zlib's soname, read from the copy
    _, _, body = _target(tmp_path).read_bytes().partition(b"\n")
    assert marshal.loads(body) == {"pthread": found["pthread"]}

"""Ways a cache file in the user's cache directory may be one somebody else could write.

Shared by the tests of the start-up caches (``agentctl/usercache.py``): each function turns
a private cache file into one that must not be trusted; ``skip_unless_possible`` skips the
one that needs root.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest


def writable_by_others(target: Path) -> None:
    target.chmod(0o666)


def owned_by_another_user(target: Path) -> None:
    os.chown(target, 65534, 65534)


def directory_writable_by_group(target: Path) -> None:
    target.parent.chmod(0o770)


def a_symlink(target: Path) -> None:
    real = target.with_name("elsewhere")
    target.rename(real)
    target.symlink_to(real)


def directory_a_symlink(target: Path) -> None:
    real = target.parent.with_name("real-agentctl")
    target.parent.rename(real)
    target.parent.symlink_to(real)


SPOILS: list[Callable[[Path], None]] = [
    writable_by_others,
    owned_by_another_user,
    directory_writable_by_group,
    a_symlink,
    directory_a_symlink,
]


def skip_unless_possible(spoil: Callable[[Path], None]) -> None:
    if spoil is owned_by_another_user and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")


def plant(target: Path, key: bytes, marker: Path) -> Path:
    """A private cache file ``target`` under ``key`` holding a pickle that creates ``marker``
    when it is loaded."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.write_bytes(key + pickle.dumps(_Touch(str(marker))))
    target.chmod(0o600)
    return target


class _Touch:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (Path(self.path),))

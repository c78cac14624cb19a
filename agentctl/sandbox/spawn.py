"""Starting a child process from trio without a thread hop, and waiting for it by pidfd.

``trio.lowlevel.open_process`` runs ``subprocess.Popen`` in a worker thread; on this path (a
shell effect's whole cost is its spawn) the hand-off to that thread and back costs about as
much as a third of the spawn itself. ``subprocess.Popen`` here uses ``vfork`` + ``exec``
(no ``preexec_fn``, no uid/gid changes), so calling it on the event loop blocks it only until
the child has exec'd — a fraction of a millisecond — and no cancellation can land between the
fork and our record of the child.

Invariants:
- the child gets exactly the ``env`` and ``cwd`` given, leads its own process group (in the
  caller's session), inherits no descriptor but its three standard streams (``close_fds``);
- the parent ends of the pipes are owned by the ``Child`` (raw descriptors, wrapped in
  non-blocking trio streams when asked for); stdin is one shared ``/dev/null`` unless piped;
  the child ends are closed in the parent as soon as the child exists (or the spawn failed), so
  EOF on a pipe means every holder of its write end is gone;
- ``wait_exited`` returns once the child has exited but before it is reaped (Linux pidfd): the
  zombie keeps its pid and process-group id reserved, so signalling the group then cannot hit
  a recycled pid; ``reap`` collects the exit status. Without pidfd support the wait happens in
  a thread, as trio does it, and ``wait_exited`` reaps too;
- a reaped child's pidfd stays readable: one ``reap`` left open must not be waited on again
  (``close`` closes it with the pipes).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping, Sequence

import trio


def _pidfd_or_none(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:  # an old kernel (ENOSYS) or a sandbox forbidding it
        return None
    return fd


class Child:
    """One started child process and the parent ends of its pipes.

    The read ends stay plain descriptors until a caller asks for a trio stream
    (``stdout``/``stderr``): the common supervision (``sandbox.process._pump``) reads them
    itself after its epoll set reports them readable, and wrapping them would cost two
    ``fcntl``/``ioctl`` calls each way per pipe.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: trio.lowlevel.FdStream | None,
        stdout_fd: int,
        stderr_fd: int,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        self._streams: dict[int, trio.lowlevel.FdStream] = {}
        self._pidfd = _pidfd_or_none(popen.pid)
        self._pidfd_seen_by_trio = False

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def stdout(self) -> trio.lowlevel.FdStream:
        return self._stream(self.stdout_fd)

    @property
    def stderr(self) -> trio.lowlevel.FdStream:
        return self._stream(self.stderr_fd)

    def _stream(self, fd: int) -> trio.lowlevel.FdStream:
        if fd not in self._streams:
            self._streams[fd] = trio.lowlevel.FdStream(fd)
        return self._streams[fd]

    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable once the child has exited (its pidfd), if any;
        after that, ``reap`` collects the status (and closes the descriptor)."""
        return self._pidfd

    async def wait_exited(self) -> None:
        """Return once the child has exited (see the module doc: not yet reaped with pidfd)."""
        if self._pidfd is None:
            await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
            return
        self._pidfd_seen_by_trio = True
        await trio.lowlevel.wait_readable(self._pidfd)

    def reap(self, *, keep_exit_fd: bool = False) -> int:
        """Collect the exit status of a child ``wait_exited`` saw exit; closes the pidfd unless
        ``keep_exit_fd`` (then ``close`` does: a caller that replies first and closes after)."""
        code = self._popen.wait()
        if not keep_exit_fd:
            self._close_pidfd()
        return code

    async def wait(self) -> int:
        """Wait for the child's exit and reap it (at once if that is done already)."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        await self.wait_exited()
        return self.reap()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            with contextlib.suppress(OSError):
                # Only a descriptor trio waited on has a registration to drop; telling trio
                # about any other costs a failing ``epoll_ctl``.
                if self._pidfd_seen_by_trio:
                    trio.lowlevel.notify_closing(fd)
                os.close(fd)

    def close(self) -> None:
        """Close every descriptor we hold for the child: the pipes and the pidfd (``reap`` may
        have left it open); again is a no-op."""
        self.close_pipes()
        self._close_pidfd()

    def close_pipes(self) -> None:
        """Close our ends of the pipes; again is a no-op (the numbers are forgotten, so a
        second call cannot close a descriptor that reused one)."""
        if self.stdin is not None:
            self.stdin.close()
        fds, self.stdout_fd, self.stderr_fd = (self.stdout_fd, self.stderr_fd), -1, -1
        for fd in fds:
            stream = self._streams.pop(fd, None)
            if stream is not None:
                stream.close()
            elif fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _pipe() -> tuple[int, int]:
    # Blocking ends: the supervising loop reads a pipe only after epoll reported it readable
    # and is its only reader, so a read never blocks (a trio ``FdStream`` made for a caller
    # that asks for one sets its descriptor non-blocking itself).
    return os.pipe2(os.O_CLOEXEC)


_devnull: int | None = None


def _devnull_fd() -> int:
    """One ``/dev/null`` descriptor kept for the process's life (close-on-exec; each child
    gets it ``dup2``-ed as its stdin), where ``subprocess.DEVNULL`` opens and closes one per
    child."""
    global _devnull
    if _devnull is None:
        _devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull


def spawn_child(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, piped_stdin: bool
) -> Child:
    """Start ``argv`` (see the module invariants); raises OSError if it cannot start."""
    child_ends: list[int] = []
    parent_ends: list[int] = []
    try:
        stdin_r, stdin_w = _pipe() if piped_stdin else (_devnull_fd(), None)
        if stdin_w is not None:
            child_ends.append(stdin_r)
            parent_ends.append(stdin_w)
        out_r, out_w = _pipe()
        parent_ends.append(out_r)
        child_ends.append(out_w)
        err_r, err_w = _pipe()
        parent_ends.append(err_r)
        child_ends.append(err_w)
        popen = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=stdin_r,
            stdout=out_w,
            stderr=err_w,
            process_group=0,
            close_fds=True,
        )
    except BaseException:
        for fd in parent_ends:
            os.close(fd)
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    stdin = trio.lowlevel.FdStream(stdin_w) if stdin_w is not None else None
    return Child(popen, stdin, out_r, err_r)

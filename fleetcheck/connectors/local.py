"""`connection: local`: the same command and payload on this machine, through /bin/sh,
with the same dialogue as over SSH (so local hosts get shared analysis), cancel, caps
and deadline. The command stays in fleetcheck's process group, so a Ctrl-C at the terminal
(or a signal to the group) reaches the probe too; on close what is left of it (the shell,
the probe and their children) is killed."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Optional

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, Session,
                                        TransportError, wait_for)
from fleetcheck.connectors.dialogue import converse
from fleetcheck.variables import Variable

VARIABLES: tuple[Variable, ...] = ()  # this machine: nothing to say how to reach it


class PipeStreams:
    """A subprocess's pipes as the dialogue's Streams (non-blocking reads and writes)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.out_fd: Optional[int] = proc.stdout.fileno()  # type: ignore[union-attr]
        self.err_fd: Optional[int] = proc.stderr.fileno()  # type: ignore[union-attr]
        for fd in (self.out_fd, self.err_fd, proc.stdin.fileno()):  # type: ignore[union-attr]
            os.set_blocking(fd, False)

    def send(self, data: bytes, deadline: Deadline) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        view = memoryview(data)
        while view:
            wait_for([stdin], selectors.EVENT_WRITE, min(deadline.left(), 0.5))
            try:
                view = view[os.write(stdin.fileno(), view[:1 << 16]):]
            except BlockingIOError:
                continue
            except BrokenPipeError:  # it stopped reading: what it wrote says why
                return

    def close_input(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    def _read(self, which: str) -> Optional[bytes]:
        fd = getattr(self, which)
        if fd is None:
            return None
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b""
        if not data:
            setattr(self, which, None)
            return None
        return data

    def read_out(self) -> Optional[bytes]:
        return self._read("out_fd")

    def read_err(self) -> Optional[bytes]:
        return self._read("err_fd")

    def finished(self) -> bool:
        return self.out_fd is None and self.err_fd is None and self.proc.poll() is not None

    def wait(self, timeout: float) -> None:
        fds = [fd for fd in (self.out_fd, self.err_fd) if fd is not None]
        if fds:
            wait_for(fds, selectors.EVENT_READ, timeout)
        else:  # both pipes closed, the process lingers
            time.sleep(min(timeout, 0.02))

    def exit_status(self) -> Optional[int]:
        return self.proc.poll()


def descendants(pid: int) -> list[int]:
    """The processes started under `pid`, children before their own, from /proc (a
    launched server in a session of its own among them)."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 10000:
        parent = todo.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % parent)
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (parent, task)) as handle:
                    children = [int(c) for c in handle.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            todo.extend(children)
    return found


class LocalSession(Session):
    """Each run is one /bin/sh child of the controller, under the host's deadline."""

    def __init__(self, deadline: Deadline, env: dict[str, str] | None = None):
        """env: variables added to the children's environment (never to their command
        lines, where any user of this machine reads them in `ps`)."""
        self.deadline = deadline
        self.env = dict(os.environ, **env) if env else None
        self.procs: list[subprocess.Popen] = []

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        deadline = self.deadline
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=self.env)
        except OSError as exc:  # no /bin/sh, out of processes or descriptors
            raise TransportError("probe", "cannot start /bin/sh on this machine: %s"
                                 % (exc.strerror or exc))
        self.procs.append(proc)
        try:
            return converse(PipeStreams(proc), payload, deadline, cancel, answer)
        finally:
            self._stop(proc)

    def _stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            for pid in [proc.pid] + descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        proc.wait()

    def close(self) -> None:
        for proc in self.procs:
            self._stop(proc)
        self.procs = []


class LocalConnector(Connector):
    connection = "local"

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        deadline.left()
        return LocalSession(deadline)

"""Waiting on the event itself (a file written, a process state, a socket listening, a URL
answering), never on a fixed time: a loaded machine takes longer, and a fixed sleep either
wastes the time or loses the race. `wait_for` polls a predicate until it holds and fails
the test naming what never happened."""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str,
             interval: float = 0.05) -> T:
    """The predicate's first true value; an AssertionError saying `what` did not happen
    within `timeout` seconds. `interval` is only how often it is asked."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError("%s: not within %g s" % (what, timeout))
        time.sleep(interval)


def listening(address: str, port: int) -> bool:
    """Something accepts connections on address:port."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((address, port)) == 0


def answering(url: str) -> bool:
    """The URL answers with 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            response.read()
            return True
    except OSError:
        return False


def wait_listening(address: str, port: int, timeout: float = 30.0) -> None:
    wait_for(lambda: listening(address, port), timeout, "%s:%d listening" % (address, port))


def wait_answering(url: str, timeout: float = 30.0) -> None:
    wait_for(lambda: answering(url), timeout, "%s answering" % url, interval=0.2)


def gone_or_zombie(pid: int) -> bool:
    """The process has exited (reaped, or a zombie waiting for its parent)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def namespace_processes(sshd_pid: int) -> dict[int, str]:
    """pid -> command line of every process in the PID namespace of `sshd_pid` (a test
    host's sshd), itself left out."""
    namespace = os.readlink("/proc/%d/ns/pid" % sshd_pid)
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == sshd_pid:
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % entry) != namespace:
                continue
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                found[int(entry)] = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
    return found


def wait_process_in(sshd_pid: int, needle: str, timeout: float = 60.0) -> int:
    """The pid of a process in the host's PID namespace whose command line holds `needle`."""
    def found() -> int | None:
        return next((pid for pid, cmd in namespace_processes(sshd_pid).items()
                     if needle in cmd), None)
    return wait_for(found, timeout, "a process running %r on the host" % needle)

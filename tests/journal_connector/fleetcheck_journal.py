"""`connection: journal`, a connection from outside fleetcheck (one file and an entry
point): the probe runs on this machine as with `connection: local`, and every command run
is appended to the journal file the inventory names (an audit trail on the controller)."""

from __future__ import annotations

import json
import threading
from typing import Any

from fleetcheck.connectors.base import Answerer, CommandResult, Connector, Deadline, Session
from fleetcheck.connectors.local import LocalSession
from fleetcheck.variables import Variable, path

VARIABLES = (Variable("journal_file", ("journal_file",), path),)


class JournalSession(Session):
    def __init__(self, host: Any, deadline: Deadline):
        self.host = host
        self.local = LocalSession(deadline)

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        result = self.local.run(command, payload, cancel, answer)
        with open(self.host.settings["journal_file"], "a", encoding="utf-8") as journal:
            journal.write(json.dumps({"host": self.host.name, "exit": result.exit_status,
                                      "payload_bytes": len(payload)}) + "\n")
        return result

    def close(self) -> None:
        self.local.close()


class JournalConnector(Connector):
    connection = "journal"

    def open(self, host: Any, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        deadline.left()
        return JournalSession(host, deadline)


def not_a_connector() -> None:
    """What the `journal_broken` entry point names by mistake."""

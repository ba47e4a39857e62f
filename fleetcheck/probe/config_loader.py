"""The drafter's config as this vLLM loads it: vLLM's own loader
(`vllm.transformers_utils.config.get_config`, which the server calls for the drafter's
model config) run in a child of the install's interpreter, offline, killed at a timeout
inside the host's deadline. It imports vllm there (seconds), never in the probe. The
child prints one JSON line: the loaded config as a dict, or why it could not load."""

import os
import time

LOADER = "vllm.transformers_utils.config.get_config"
LOADER_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
def say(**kw):
    sys.stdout.write(json.dumps(kw, default=repr) + "\n"); sys.stdout.flush()
try:
    import torch
except Exception as exc:
    say(error="cannot import torch: %s: %s" % (type(exc).__name__, exc), stage="torch")
    sys.exit(0)
try:
    import transformers
except Exception as exc:
    say(error="cannot import transformers: %s: %s" % (type(exc).__name__, exc),
        stage="transformers")
    sys.exit(0)
try:
    from vllm.transformers_utils.config import get_config
except Exception as exc:
    say(error="cannot import vllm's config loader: %s: %s" % (type(exc).__name__, exc),
        stage="loader")
    sys.exit(0)
BUILDS = json.loads(sys.argv[2])
for directory in sys.argv[3:]:
    try:
        config = get_config(directory, trust_remote_code=False)
        say(dir=directory, config=config.to_dict(), cls=type(config).__name__,
            transformers=transformers.__version__)
    except Exception as exc:
        say(dir=directory, error="%s: %s" % (type(exc).__name__, str(exc)[:500]),
            stage="load")
"""


def load_configs(interpreter, site, groups, timeout, builds=()):
    """{dir: {config, cls, run_as} or {error, stage}}, and a note for the whole load.
    `groups`: [(RunAs or None, [dirs])], each group loaded in a child of its own under
    those credentials (main.drafter_groups: a drafter as its server's owner); None: not
    loaded. `builds`: drafter_build.build_requests, each built in the child of the group
    holding its drafter and its target, its outcome under "builds" by server id (or why
    there is none)."""
    out = {"interpreter": interpreter, "loader": LOADER, "timeout_s": round(timeout, 1),
           "configs": {}, "builds": {},
           "run_as": next((g[0].words() for g in groups if g[0]), None)}
    started = time.monotonic()
    if timeout <= 1:
        out["error"] = "no time left in the host's deadline for the loader"
        groups = ()
    for runner, directories in groups:
        if runner is None:
            for directory in directories:
                out["configs"][directory] = {
                    "error": "not loaded: another user's server names it, and the probe "
                             "cannot run the loader as that user", "stage": "trust"}
            continue
        left = timeout - (time.monotonic() - started)
        # a server's drafter is built with its target by one child, as the owner of both
        load_group(out, interpreter, site, directories, left, runner,
                   [b for b in builds if b["drafter"] in directories and
                    b["target"] in directories])
    for build in builds:  # the loader's own failure (no torch) is drafter-loaded's to say
        out["builds"].setdefault(build["id"], {
            "stage": "no loader" if out.get("stage") in ("torch", "transformers", "loader")
            else "not built", "error": "no answer: %s" % (
                out.get("error") or "the drafter and its target are not loaded by one "
                "child under one user's rights")})
    out["elapsed_s"] = round(time.monotonic() - started, 3)
    return out


def load_group(out, interpreter, site, directories, timeout, runner, builds):
    """One loader child for `directories` (and the drafters it builds), as `runner`, its
    answers into `out`."""
    import json
    from fleetcheck.probe.child import run_child
    from fleetcheck.probe.drafter_build import BUILD_PART
    from fleetcheck.probe.limits import bounded, cut, lines, loads
    if timeout <= 1:
        out["timed_out"] = True
        out["error"] = "the loader did not finish in %.0f s" % out["timeout_s"]
        return
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_CONFIGURE_LOGGING="0", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    stdout, stderr, code, timed_out = run_child(
        [interpreter, "-S", "-I", "-B", "-c", LOADER_SCRIPT + BUILD_PART, site,
         json.dumps(builds)] + list(directories),
        timeout, env, runner)
    if timed_out:
        out["timed_out"] = True
        out["error"] = "the loader did not finish in %.0f s" % timeout
    for line in lines(stdout):  # the install's code wrote them: every value bounded
        try:
            item = loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("build"), str) and any(
                b["id"] == item["build"] for b in builds):
            name = item.pop("build")
            out["builds"][name] = dict(bounded(item), run_as=runner.words())
        elif isinstance(item.get("dir"), str) and item["dir"] in directories:
            directory = item.pop("dir")
            out["configs"][directory] = dict(bounded(item), run_as=runner.words())
        elif "dir" not in item and item.get("error"):
            out["error"], out["stage"] = cut(item["error"]), bounded(item.get("stage"))
    if code and "error" not in out:
        out["error"] = "the loader exited with %s: %s" % (
            code, stderr.decode("utf-8", "replace").strip()[-300:])


def not_loaded(interpreter, why):
    """The loader's facts when the install's code may not run (trust.code_runner)."""
    return {"interpreter": interpreter, "loader": LOADER, "configs": {},
            "error": "not run: %s" % why}

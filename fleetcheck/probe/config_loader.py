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
for directory in sys.argv[2:]:
    try:
        config = get_config(directory, trust_remote_code=False)
        say(dir=directory, config=config.to_dict(), cls=type(config).__name__,
            transformers=transformers.__version__)
    except Exception as exc:
        say(dir=directory, error="%s: %s" % (type(exc).__name__, str(exc)[:500]),
            stage="load")
"""


def load_configs(interpreter, site, directories, timeout, runner):
    """{dir: {config, cls} or {error, stage}}, and a note for the whole child. `runner`
    (trust.code_runner's) says whose credentials the child runs with."""
    from fleetcheck.probe.child import run_child
    from fleetcheck.probe.limits import bounded, cut, lines, loads
    out = {"interpreter": interpreter, "loader": LOADER, "timeout_s": round(timeout, 1),
           "configs": {}, "run_as": runner.words()}
    if timeout <= 1:
        out["error"] = "no time left in the host's deadline for the loader"
        return out
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_CONFIGURE_LOGGING="0", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    started = time.monotonic()
    stdout, stderr, code, timed_out = run_child(
        [interpreter, "-S", "-I", "-B", "-c", LOADER_SCRIPT, site] + list(directories),
        timeout, env, runner)
    if timed_out:
        out["timed_out"] = True
        out["error"] = "the loader did not finish in %.0f s" % timeout
    out["elapsed_s"] = round(time.monotonic() - started, 3)
    for line in lines(stdout):  # the install's code wrote them: every value bounded
        try:
            item = loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("dir"), str) and item["dir"] in directories:
            directory = item.pop("dir")
            out["configs"][directory] = bounded(item)
        elif "dir" not in item and item.get("error"):
            out["error"], out["stage"] = cut(item["error"]), bounded(item.get("stage"))
    if code and "error" not in out:
        out["error"] = "the loader exited with %s: %s" % (
            code, stderr.decode("utf-8", "replace").strip()[-300:])
    return out


def not_loaded(interpreter, why):
    """The loader's facts when the install's code may not run (trust.code_runner)."""
    return {"interpreter": interpreter, "loader": LOADER, "configs": {},
            "error": "not run: %s" % why}

"""The served drafter run through the install's own code: for each server of a DFlash
drafter (and each drafter a plan names), one child of the install's interpreter (the
executor's, executor.py: same runner, confinement and deadline) calls what the server
will call on the drafter's config and its target's, as this install loads them
(drafter_script.py). The answers are raw: checks/drafter_run.py turns them into verdicts.

Which configs: the loader child's (config_loader.py) where it loaded them, else the
config as the install's own conversions give it (config_conversion.py), else the file."""

import os

# the files each runner reads the drafter's settings in (globs under the site dir)
RUNNERS = {
    "v1": {"aux": ["vllm/v1/worker/gpu_model_runner.py"],
           "mask": ["vllm/v1/spec_decode/llm_base_proposer.py",
                    "vllm/v1/spec_decode/dflash.py"],
           "anchor": ["vllm/v1/spec_decode/llm_base_proposer.py",
                      "vllm/v1/spec_decode/dflash.py"]},
    "v2": {"aux": ["vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"],
           "mask": ["vllm/v1/worker/gpu/spec_decode/utils.py"],
           "anchor": ["vllm/v1/worker/gpu/spec_decode/dflash/speculator.py"]},
}


def config_of(model, loaded):
    """(config dict, whence) of a model place as this install loads it."""
    if not model:
        return None, None
    entry = ((loaded or {}).get("configs") or {}).get(model.get("dir") or "")
    if entry and isinstance(entry.get("config"), dict):
        return entry["config"], "loader"
    reading = model.get("reading") or {}
    if isinstance(reading.get("data"), dict):
        return reading["data"], "conversion"
    config = model.get("config") or {}
    if isinstance(config.get("data"), dict):
        return config["data"], "file"
    return None, None


def drafter_questions(served, codes):
    """{question id: question} for every served DFlash drafter and each one named."""
    loaded = served.get("loaded")
    out = {}
    places = [(s.get("drafter_model"), s) for s in served.get("servers", [])
              if str(s.get("method") or "").lower() == "dflash"]
    places += [(m, None) for m in served.get("named", [])]
    for model, server in places:
        drafter, whence = config_of(model, loaded)
        if drafter is None:
            continue
        arch = ((model.get("reading") or {}).get("architecture"))
        code = (codes or {}).get(arch) or {}
        target, target_whence = config_of(server.get("target_model") if server else None,
                                          loaded)
        name = "pid:%s" % server["pid"] if server else "named:%s" % model.get("dir")
        build = ((loaded or {}).get("builds") or {}).get("pid:%s" % server["pid"]) \
            if server else None
        out[name] = {"id": name, "kind": "drafter", "drafter_config": drafter,
                     "build": build,
                     "drafter_from": whence, "target_config": target,
                     "target_from": target_whence, "module": code.get("module"),
                     "max_model_len": server.get("max_model_len") if server else None,
                     "runners": RUNNERS, "drafter_dir": model.get("dir")}
    return out


def run_drafters(interpreter, site, asked, timeout, runner):
    """{question id: answer}: one executor child asked every drafter question (the
    install's modules load once for all of them)."""
    from fleetcheck.probe.drafter_script import script
    from fleetcheck.probe.executor import ask_install
    modules = set(q["module"] for q in asked.values() if q.get("module"))
    real = sorted(modules | set(
        g for files in RUNNERS.values() for globs in files.values() for g in globs))
    # the build (the loader child's answer) stays here: the child's request travels in argv
    replies = ask_install(interpreter, site, dict(
        (name, dict(((k, v) for k, v in question.items() if k != "build"), real=real))
        for name, question in asked.items()), timeout, runner, script(), 16)[0]
    answers = {}
    for name, question in sorted(asked.items()):
        answer = replies[name]
        answer.update((key, question.get(key)) for key in (
            "drafter_from", "target_from", "drafter_dir", "max_model_len", "target_config",
            "drafter_config", "build"))
        answers[name] = answer
    return answers


def drafter_facts(served, interpreter, code_root, runner, why, timeout):
    """The `runs` facts: each served drafter's answers, or why the code was not run (never
    a verdict from a static reading in its place)."""
    from fleetcheck.probe.executor import unprivileged
    asked = drafter_questions(served, served.get("codes"))
    if not asked:
        return {}
    if runner is not None:
        runner, why = unprivileged(runner)
    if runner is None:
        return failed(asked, "the install's code was not run: %s" % why)
    if not os.path.isfile(interpreter or ""):
        return failed(asked, "the install's interpreter %s does not exist" % interpreter)
    try:
        return run_drafters(interpreter, code_root, asked, timeout, runner)
    except Exception as exc:  # a bug here must not cost the host's other facts
        return failed(asked, "running the install's code: %s: %s" % (type(exc).__name__,
                                                                      exc))


def failed(asked, why):
    """Each question's answer when the run could not be made: why, and the drafter's build
    by the loader's child (drafter_build.py), which does not depend on this run."""
    return dict((name, {"error": why, "build": question.get("build")})
                for name, question in asked.items())

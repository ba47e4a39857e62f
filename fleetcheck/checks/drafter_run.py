"""Verdicts from a served drafter run through the install's own code (probe/drafter_run.py):
what each runner does with the drafter's config against its target's. An exception the
install raises is a fail that quotes it; a value that contradicts the config's intent is a
fail naming the key; an outcome that depends on something unknown (the runner, the
target) is a warn naming it. Both drafter checks carry these aspects, so they agree
(drafter-loaded only where the install's loader ran on the drafter)."""

from __future__ import annotations

from typing import Any

from fleetcheck.checks.aspects import Verdict
from fleetcheck.results import Evidence
from fleetcheck.status import Status

SLIDING = "sliding_attention"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
RUNNER_NAMES = {"v1": "the V1 model runner", "v2": "the V2 model runner"}


def runner_in_use(env: dict[str, str] | None, environ_error: str | None,
                  default: str | None = None) -> tuple[str | None, str]:
    """("v1"/"v2"/None, why) from the server's VLLM_USE_V2_MODEL_RUNNER, else the
    install's own default for it (vllm/envs.py), else unknown: the install then picks."""
    if env is None:
        return None, "no server here says which runner"
    value = env.get("VLLM_USE_V2_MODEL_RUNNER")
    if value is None:
        if environ_error:
            return None, "the server's environment cannot be read (%s)" % environ_error
        if default is not None and default.strip().lower() in TRUE + FALSE:
            return ("v2" if default.strip().lower() in TRUE else "v1"), \
                "VLLM_USE_V2_MODEL_RUNNER unset, this install's default %r" % default
        return None, "VLLM_USE_V2_MODEL_RUNNER is unset, so this install picks the runner"
    if value.strip().lower() in TRUE:
        return "v2", "VLLM_USE_V2_MODEL_RUNNER=%s" % value
    if value.strip().lower() in FALSE:
        return "v1", "VLLM_USE_V2_MODEL_RUNNER=%s" % value
    return None, "VLLM_USE_V2_MODEL_RUNNER=%s is not a boolean" % value[:40]


def dflash_config(config: dict[str, Any]) -> dict[str, Any]:
    value = config.get("dflash_config")
    return value if isinstance(value, dict) else {}


def intended_aux(config: dict[str, Any]) -> tuple[list[int] | None, str]:
    """The taps the drafter was trained on, as its own format states them."""
    ids = dflash_config(config).get("target_layer_ids")
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return [i + 1 for i in ids], "dflash_config.target_layer_ids + 1"
    ids = config.get("aux_hidden_state_layer_ids")
    if isinstance(ids, list) and ids:
        return list(ids), "aux_hidden_state_layer_ids"
    return None, ""


def wants_window(config: dict[str, Any], layer: int) -> bool:
    types = config.get("layer_types")
    if dflash_config(config).get("use_swa") is True:
        return True
    return isinstance(types, list) and layer < len(types) and types[layer] == SLIDING


def window_key(config: dict[str, Any]) -> str:
    """The key a sliding layer's window is read from: dflash_config's, else the top level."""
    if "swa_window_size" in dflash_config(config):
        return "dflash_config.swa_window_size"
    return "sliding_window"


def mask_key(config: dict[str, Any]) -> str:
    """The key the mask token is read from: dflash_config's, else the top level."""
    if "mask_token_id" in dflash_config(config) or "mask_token_id" not in config:
        return "dflash_config.mask_token_id"
    return "mask_token_id"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def vocab_sizes(config: dict[str, Any], target: Any) -> list[int]:
    """The embedding tables the drafter may look its mask token up in: its own
    (sized by its vocab_size) and the target's (shared with it by the proposer)."""
    text = target.get("text_config") if isinstance(target, dict) and isinstance(
        target.get("text_config"), dict) else target
    sizes = [config.get("vocab_size"), text.get("vocab_size") if isinstance(text, dict)
             else None]
    return [s for s in sizes if isinstance(s, int) and not isinstance(s, bool) and s > 0]


def mask_tokens(entry: dict[str, Any]) -> list[Any]:
    """The parallel drafting token a runner's def stored (V1) or returned (V2)."""
    found = []
    for run in outcomes(entry):
        if "parallel_drafting_token_id" in run.get("stored", {}):
            found.append(run["stored"]["parallel_drafting_token_id"])
        elif run.get("kind") == "returned" and "stored" not in run:
            found.append(run.get("value"))
    return found


def outcomes(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in entry.get("runs") or [] if r.get("kind") != "infeasible"]


def at(entry: dict[str, Any], run: dict[str, Any] | None = None) -> Evidence:
    where = (run or {}).get("at") or entry.get("function") or ""
    file, _, rest = where.partition(":")
    line, _, text = rest.partition(":")
    return Evidence(file=file or None, line=int(line) if line.isdigit() else None,
                    text=text.strip())


def raised(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The failing run when every run raised (the stand-in config's class name is the
    loaded config's to a reader)."""
    runs = outcomes(entry)
    # "rejected": a raise statement of the install's own; "raised": an error on the way
    failing = [r for r in runs if r.get("kind") in ("raised", "rejected")]
    if not failing or len(failing) != len(runs):
        return None
    return dict(failing[0], detail=str(failing[0].get("detail")).replace(
        "'Namespace' object", "the loaded config"))


def runner_problems(part: dict[str, Any], config: dict[str, Any], loaded: bool = False,
                    vocab: list[int] | None = None) -> list[tuple[str, Evidence]]:
    """What one runner refuses or gets wrong: (words, evidence). The decoder layer's
    construction counts only on a config the install's loader loaded (`loaded`): a file's
    config lacks the class defaults the loader fills, which the layer reads. `vocab`: the
    sizes of the embedding tables the mask token may be looked up in."""
    problems: list[tuple[str, Evidence]] = []
    for function in part.get("attention") or []:
        name = (function.get("function") or "").rsplit(": ", 1)[-1]
        for index, layer in enumerate(function.get("layers") or []):
            failing = raised(layer)
            if failing:
                problems.append(("%s raises for layer %d: %s" % (
                    name, index, failing.get("detail")), at(function, failing)))
                break
            values = [r.get("value") for r in outcomes(layer)]
            windows = [v[0] for v in values if isinstance(v, list) and len(v) == 2]
            odd = [w for w in windows if w is not None and not is_number(w)]
            if odd:
                problems.append(("%s %r for layer %d (by %s) is not a number: the server's "
                                 "KV cache sizing (window - 1) raises at start" % (
                                     window_key(config), odd[0], index, name),
                                 at(function)))
                break
            if windows and wants_window(config, index) and all(w is None for w in windows):
                problems.append(("layer %d is sliding by layer_types/dflash_config.use_swa, "
                                 "but %s gives it no window" % (index, name),
                                 at(function)))
                break
    for entry in (part.get("build") or []) if loaded else []:
        failing = raised(entry)
        if failing and not any(str(failing.get("detail")) in w for w, _ in problems):
            problems.append(("building %s for layer 0 raises: %s" % (
                entry["function"].rsplit(": ", 1)[-1], failing.get("detail")),
                at(entry, failing)))
    intent, source = intended_aux(config)
    for entry in part.get("aux") or []:
        failing = raised(entry)
        if failing:
            problems.append(("%s raises: %s" % (entry["function"].rsplit(": ", 1)[-1],
                                                failing.get("detail")), at(entry, failing)))
            continue
        values = [r.get("value") for r in outcomes(entry) if isinstance(r.get("value"), list)]
        if intent and values and all(v != intent for v in values):
            stale = config.get("eagle_aux_hidden_state_layer_ids")
            key = "eagle_aux_hidden_state_layer_ids" if stale is not None else source
            problems.append(("taps target layers %s, not %s (%s): %s%s" % (
                values[0], intent, source, key, " %s is read first, without the +1" % (
                    stale,) if stale is not None else ""), at(entry)))
    for entry in part.get("mask") or []:
        failing = raised(entry)
        if failing:
            problems.append(("dflash_config.mask_token_id: %s raises: %s" % (
                entry["function"].rsplit(": ", 1)[-1], failing.get("detail")),
                at(entry, failing)))
            continue
        stored = [r.get("stored", {}).get("parallel_drafting_token_id", 0)
                  for r in outcomes(entry) if "stored" in r]
        if stored and all(s is None for s in stored):
            problems.append(("dflash_config.mask_token_id is null, which %s takes as the "
                             "parallel drafting token: the first request fails" % (
                                 entry["function"].rsplit(": ", 1)[-1]), at(entry)))
            continue
        written = dflash_config(config).get("mask_token_id", config.get("mask_token_id"))
        if written is not None and (isinstance(written, bool) or not isinstance(
                written, int)) and written in mask_tokens(entry):
            problems.append(("%s %r, which %s takes as the parallel drafting token, is not an "
                             "integer token id: the first request fails" % (
                                 mask_key(config), written,
                                 entry["function"].rsplit(": ", 1)[-1]), at(entry)))
            continue
        tokens = [t for t in mask_tokens(entry) if is_number(t)]
        if tokens and vocab and all(not 0 <= t < size for t in tokens for size in vocab):
            problems.append(("%s %s, which %s takes as the parallel drafting token, is "
                             "outside the embedding table (vocab_size %s): the first "
                             "request fails" % (
                                 mask_key(config), tokens[0],
                                 entry["function"].rsplit(": ", 1)[-1],
                                 " / ".join(str(v) for v in sorted(set(vocab)))), at(entry)))
    anchor = dflash_config(config).get("sample_from_anchor")
    for entry in part.get("anchor") or []:
        failing = raised(entry)
        if failing:
            problems.append(("%s raises: %s" % (entry["function"].rsplit(": ", 1)[-1],
                                                failing.get("detail")), at(entry, failing)))
    if anchor is True and not part.get("anchor"):
        problems.append(("dflash_config.sample_from_anchor is true, which this runner never "
                         "reads: it drafts from the mask positions, one position off",
                         Evidence(file=None, line=None, text="sample_from_anchor: true")))
    return problems


def runner_unknowns(part: dict[str, Any]) -> list[str]:
    """What keeps one runner's verdict from being decided: a def that could not be run
    (its error), runs that disagree (some raise, some return: a condition the run could
    not settle), or no code of the runner at all (an install without that runner)."""
    entries = [(e, e.get("function") or "") for key in ("aux", "mask", "anchor", "build")
               for e in part.get(key) or []]
    for function in part.get("attention") or []:
        if function.get("error"):
            entries.append((function, function.get("function") or ""))
        for index, layer in enumerate(function.get("layers") or []):
            entries.append((layer, "%s for layer %d" % (function.get("function") or "",
                                                        index)))
    if not entries:
        return ["no code of this runner ran (the install may not have it)"]
    out = []
    for entry, name in entries:
        name = name.rsplit(": ", 1)[-1]
        if entry.get("error"):
            out.append("%s could not be run: %s" % (name, entry["error"]))
            continue
        kinds = set("raised" if r.get("kind") in ("raised", "rejected") else "returned"
                    for r in outcomes(entry))
        if len(kinds) > 1:
            out.append("%s raises on some runs and returns on others" % name)
    return out


def judge_target(verdict: Verdict, answer: dict[str, Any], here: str) -> None:
    """The fc layer's input, the taps and the position limit against the target."""
    config = answer.get("drafter_config") or {}
    target = answer.get("target_config")
    fc = [r.get("value") for entry in answer.get("fc") or [] for r in outcomes(entry)]
    fc = [v for v in fc if isinstance(v, int) and not isinstance(v, bool)]
    intent, _ = intended_aux(config)
    if not isinstance(target, dict):
        verdict.add(Status.WARN, "%s: the target's config was not read, so the fc input size "
                    "(target_hidden_size), the taps and the position limit are not judged "
                    "against it" % here)
        return
    text = target.get("text_config") if isinstance(target.get("text_config"), dict) else target
    hidden, layers = text.get("hidden_size"), text.get("num_hidden_layers")
    if fc and intent and isinstance(hidden, int):
        expected = hidden * len(intent)
        if fc[0] != expected:
            verdict.add(Status.FAIL, "%s: target_hidden_size %s: the install sizes the fc input "
                        "%d, but the target's hidden_size %d x %d aux layers is %d: the "
                        "first request fails" % (here, config.get("target_hidden_size"), fc[0],
                                                 hidden, len(intent), expected),
                        *[at(e) for e in answer.get("fc") or []][:1])
        else:
            verdict.add(Status.PASS, "%s: fc input %d = target hidden_size %d x %d aux "
                        "layers" % (here, fc[0], hidden, len(intent)))
    if intent and isinstance(layers, int):
        bad = [i for i in intent if not 1 <= i <= layers]
        if bad:
            verdict.add(Status.FAIL, "%s: dflash_config.target_layer_ids taps %s outside the "
                        "target's %d layers" % (here, bad, layers))
    judge_vocab(verdict, config, text, answer.get("build") or {}, here)
    limit = answer.get("max_model_len")
    source = "--max-model-len"
    if not isinstance(limit, int):
        limit, source = text.get("max_position_embeddings"), \
            "the target's max_position_embeddings"
    own = config.get("max_position_embeddings")
    if isinstance(limit, int) and isinstance(own, int) and own < limit:
        verdict.add(Status.FAIL, "%s: max_position_embeddings %d is below the server's context "
                    "%d (%s): the drafter's rotary cache is wrong past %d" % (
                        here, own, limit, source, own))


def judge_build(verdict: Verdict, build: dict[str, Any] | None, here: str,
                unknown: Status) -> None:
    """The drafter built as its server builds it and its checkpoint's shapes loaded through
    the install's weight loader (probe/drafter_build.py). A load the install refuses, a
    layer parameter it leaves without a weight, a checkpoint tensor it throws away, and a
    build that fails where one key changed makes it build, are fails naming the keys whose
    change fixes them; so is a speculative config the install refuses where the target's
    alone is made. A failure nothing in the drafter's config explains may be this host's
    (a device the platform expects, a flag of the server's the probe does not pass):
    `unknown`, never a pass."""
    if not build:
        return
    if build.get("loaded"):
        verdict.add(Status.PASS, "%s: the install builds it as its server does and loads the "
                    "%s tensors of its checkpoint (their shapes)" % (here, build.get("tensors")))
        return
    if build.get("skipped") or build.get("stage") == "no loader":
        verdict.add(Status.SKIP, "%s: its checkpoint not loaded: %s" % (
            here, build.get("skipped") or build.get("error")))
        return
    error, stage = build.get("error"), build.get("stage")
    place = at({"function": build.get("at") or ""})
    evidence = Evidence(file=place.file, line=place.line, text=str(error or ""))
    keys = [k for k in build.get("keys") or [] if isinstance(k, dict) and k.get("key")]
    fixes = "; ".join("with %s %s it %s" % (
        k["key"], changed(k.get("value"), k.get("loads_with")),
        "builds and loads every tensor" if stage == "model" else "loads every tensor")
        for k in keys)
    names = [str(n) for n in build.get("names") or []]
    count = build.get("count") if isinstance(build.get("count"), int) else len(names)
    listed = "%s%s" % (", ".join(names[:4]), " and %d more" % (count - 4) if count > 4 else "")
    tensor = " (%s)" % build["tensor"] if build.get("tensor") else ""
    if not fixes:
        fixes = "no one key of its config, changed, %s" % (
            "fixes it" if build.get("searched", True) else "fixes it among those tried "
            "before the search's time ran out")
    if stage == "checkpoint":
        verdict.add(Status.FAIL, "%s: its checkpoint cannot be read: %s" % (here, error))
    elif stage == "weights":
        verdict.add(Status.FAIL, "%s: the server refuses its checkpoint at start: %s%s; %s" % (
            here, error, tensor, fixes), evidence)
    elif stage == "unloaded":
        verdict.add(Status.FAIL, "%s: no tensor of its checkpoint is loaded into %s: the server "
                    "starts and serves them as uninitialized memory (vLLM's own check that "
                    "every parameter got a weight did not run on it); %s" % (
                        here, listed, fixes), Evidence(file=None, line=None, text=listed))
    elif stage == "dropped":
        verdict.add(Status.FAIL, "%s: the install throws away %s of its checkpoint: the server "
                    "serves the drafter without what it was trained with; %s" % (
                        here, listed, fixes), Evidence(file=None, line=None, text=listed))
    elif stage == "model" and keys:
        verdict.add(Status.FAIL, "%s: the server refuses to build the drafter at start: %s; "
                    "%s" % (here, error, fixes), evidence)
    elif stage == "config-target":
        verdict.add(unknown, "%s: not built as its server builds it: the install makes no "
                    "config of the target alone here either (%s), so the server's flags or "
                    "environment this probe does not pass decide it" % (
                        here, build.get("target_error")), evidence)
    elif stage == "config":  # the target alone makes a config: the drafter's settings do not
        verdict.add(Status.FAIL, "%s: the install refuses the server's speculative config%s "
                    "(the target alone makes one): %s" % (
                        here, " (it quotes %s)" % ", ".join(build["quoted"])
                        if build.get("quoted") else "", error), evidence)
    else:
        verdict.add(unknown, "%s: not built as its server builds it (%s): %s" % (
            here, stage, error), evidence)


def changed(value: Any, loads_with: Any) -> str:
    """What a key was and what loads: a list by its length (the search resized it; its
    items are the config's to choose)."""
    if isinstance(value, list) and isinstance(loads_with, list):
        return "of %d entries (not %d)" % (len(loads_with), len(value))
    return "%s (not %s)" % (short(loads_with), short(value))


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def judge_vocab(verdict: Verdict, config: dict[str, Any], target: dict[str, Any],
                build: dict[str, Any], here: str) -> None:
    """A drafter whose checkpoint has no lm_head drafts with its target's: the logits it
    makes are the target's vocab wide, and its compute_logits places them into a row of
    its own draft_vocab_size (else vocab_size)."""
    key = "draft_vocab_size" if is_number(config.get("draft_vocab_size")) else "vocab_size"
    own, theirs = config.get(key), target.get("vocab_size")
    if not build.get("loaded") or build.get("own_head") is not False or \
            not is_number(own) or not is_number(theirs) or own == theirs:
        return
    verdict.add(Status.FAIL, "%s: %s %s, but its checkpoint has no lm_head, so it drafts "
                "with the target's (vocab_size %s): the logits do not fit a row of %s and "
                "the first request fails" % (here, key, own, theirs, own))


def judge_run(verdict: Verdict, answer: dict[str, Any] | None, here: str,
              env: dict[str, str] | None, environ_error: str | None,
              default: str | None = None) -> None:
    """One drafter's run answers into `verdict`. `env` None: a drafter only a plan names,
    no server: what depends on the runner or the target is noted, not warned."""
    if answer is None:
        return
    unknown = Status.WARN if env is not None else Status.SKIP
    judge_build(verdict, answer.get("build"), here, unknown)
    if answer.get("error"):
        verdict.add(unknown, "%s: not run through the install's code: %s" % (
            here, answer["error"]))
        return
    config = answer.get("drafter_config") or {}
    used, why = runner_in_use(env, environ_error, default)
    loaded = answer.get("drafter_from") == "loader"
    vocab = vocab_sizes(config, answer.get("target_config"))
    problems = dict((runner, runner_problems(answer.get("runners", {}).get(runner) or {},
                                             config, loaded, vocab))
                    for runner in ("v1", "v2"))
    source = "as the install's loader loads it" if answer.get("drafter_from") == "loader" \
        else "as the install converts config.json"
    for runner in ("v1", "v2"):
        found = problems[runner]
        if not found:
            continue
        words = "; ".join(w for w, _ in found)
        if used == runner or (used is None and problems["v1"] and problems["v2"]):
            verdict.add(Status.FAIL, "%s (%s) on %s (%s): %s" % (
                here, source, RUNNER_NAMES[runner], why, words), *[e for _, e in found][:3])
        elif used is None:
            verdict.add(unknown, "%s on %s only (%s): %s" % (
                here, RUNNER_NAMES[runner], why, words), *[e for _, e in found][:3])
    unknowns = dict((runner, runner_unknowns(answer.get("runners", {}).get(runner) or {}))
                    for runner in ("v1", "v2"))
    judged = [used] if used else ["v1", "v2"]
    undecided = [(r, unknowns[r]) for r in judged if unknowns[r] and not problems[r]]
    for runner, words in undecided:  # never a pass on what could not be decided
        verdict.add(unknown, "%s on %s (%s): not decided by the install's code: %s" % (
            here, RUNNER_NAMES[runner], why, "; ".join(words[:3])))
    if not undecided and used and not problems[used]:
        verdict.add(Status.PASS, "%s: %s (%s) takes this drafter in the install's own "
                    "code" % (here, RUNNER_NAMES[used], why))
    elif not undecided and used is None and not problems["v1"] and not problems["v2"]:
        verdict.add(Status.PASS, "%s: both model runners take this drafter in the install's "
                    "own code" % here)
    if env is not None or isinstance(answer.get("target_config"), dict):
        judge_target(verdict, answer, here)

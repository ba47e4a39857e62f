"""The per-host drafter checks: `drafter-config` (each DFlash drafter's config against
the keys, layer offset, runner requirement and architectures this install's code reads)
and `drafter-loaded` (the config as the install's own loader loads it, against the
file). The group check (`served-config`) is checks/served_config.py.

Every verdict names the file and key it judged, and the code line that reads the key,
so a person can re-check both by hand. These checks appear only in runs where some host
serves or is expected to serve a drafter; then every host has them (skip where nothing
applies), so the matrix and JUnit stay rectangular."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.drafter_run import judge_run
from fleetcheck.checks.served_entries import (DRAFTER_ID, DRAFTER_TITLE, LOADED_ID,
                                              LOADED_TITLE, judged_pids)
from fleetcheck.checks.verdict import check_result
from fleetcheck.results import CheckResult, Evidence
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import ConfigCode, Facts, ModelPlace, ServedProcess

SLIDING = "sliding_attention"
LAYER_TYPES = (SLIDING, "full_attention")  # transformers' names, which vLLM's DFlash code reads
LAYER_IDS_KEY = "dflash_config.target_layer_ids"
# compared after loading beside every key the install's DFlash module reads
ALWAYS_COMPARED = ("architectures", "layer_types", "num_hidden_layers", "sliding_window",
                   LAYER_IDS_KEY)
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")
MISSING = object()


def lookup(data: Any, dotted: str) -> Any:
    """The value at a dotted key of a config dict, or MISSING."""
    value = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def is_window_key(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return "window" in last and not last.startswith("use_") and not last.startswith("max_")


def window_keys(code: ConfigCode) -> list[str]:
    """The keys this install takes a sliding window from, in the order it tries them."""
    keys: list[str] = []
    for read in code.reads:
        for key in [read.key] + list(read.alternatives):
            if is_window_key(key) and key not in keys:
                keys.append(key)
    return keys


def read_line(code: ConfigCode, key: str) -> Evidence | None:
    for read in code.reads:
        if read.key == key or key in read.alternatives:
            return Evidence(file=read.file, line=read.line, text=read.text or "")
    return None


def spelled(keys: list[str]) -> str:
    return " or ".join(keys) if keys else "no such key"


def layer_offset(facts: Facts) -> tuple[int | None, str]:
    """The constant this install adds to target_layer_ids, from the dflash-layer-offset
    fix check's findings (every DFlash path), or None when they disagree or are absent."""
    signature = (facts.signatures or {}).get("dflash-layer-offset")
    executed = (facts.executed or {}).get("dflash-layer-offset")
    if signature is None and executed is None:
        return None, "the dflash-layer-offset check did not run"
    findings = dict(signature.findings) if signature is not None else {}
    if executed is not None:  # what running the install's code found
        findings.update(executed.findings)
    offsets = {label.rsplit(":", 1)[-1] for label, items in findings.items() if items}
    if len(offsets) == 1 and next(iter(offsets)).isdigit():
        value = int(next(iter(offsets)))
        return value, "+%d, as dflash-layer-offset found on every DFlash path" % value
    return None, "dflash-layer-offset found %s" % (", ".join(sorted(offsets)) or "no path")


def target_layers(model: ModelPlace | None) -> tuple[int | None, str | None]:
    if model is None or model.config is None or not isinstance(model.config.data, dict):
        return None, None
    data = model.config.data
    for path in ("num_hidden_layers", "text_config.num_hidden_layers"):
        value = lookup(data, path)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, "%s: %s" % (model.config.path, path)
    return None, None


def file_evidence(model: ModelPlace, key: str, value: Any) -> Evidence:
    path = model.config.path if model.config else model.dir
    return Evidence(file=path, line=None, text="%s: %s" % (
        key, "(absent)" if value is MISSING else short_json(value)))


def short_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def drafter_name(model: ModelPlace) -> str:
    label = model.spec or model.dir or "?"
    return label + ("@" + model.revision[:12] if model.revision else "")


def loaded_config(facts: Facts, model: ModelPlace) -> dict[str, Any] | None:
    """The drafter's config as the install's own loader returned it, when it ran."""
    load = facts.served.loaded if facts.served else None
    entry = load.configs.get(model.dir or "") if load is not None else None
    if entry is None or entry.error or not isinstance(entry.config, dict):
        return None
    return entry.config


def was_loaded(facts: Facts, model: ModelPlace) -> bool:
    """Whether the install's loader answered for this drafter (its config or a refusal)."""
    load = facts.served.loaded if facts.served else None
    return load is not None and load.configs.get(model.dir or "") is not None


REGISTRY = "vllm/model_executor/models/registry.py"


def conversion_words(model: ModelPlace) -> str:
    """How the config judged came from config.json: the install's conversions that applied."""
    reading = model.reading
    names = [c.name for c in (reading.conversions if reading else []) if c.name and not c.error]
    return " (as this install converts it: %s)" % "; ".join(names) if names else ""


def judged_config(model: ModelPlace) -> dict[str, Any]:
    """The config this install's code reads: the converted one, else the file's."""
    reading = model.reading
    if reading is not None and isinstance(reading.data, dict):
        return reading.data
    return model.config.data if model.config and isinstance(model.config.data, dict) else {}


def judge_drafter(verdict: Verdict, model: ModelPlace, servers: list[ServedProcess],
                  codes: dict[str, ConfigCode], offset: tuple[int | None, str],
                  named: bool, loaded: dict[str, Any] | None = None
                  ) -> tuple[dict[str, Any] | None, ConfigCode | None]:
    """One drafter's aspects into `verdict`; the config judged (as the install converts
    config.json) and the code of the architecture it maps to, when there are. `loaded`:
    the config as the install's loader returned it, which decides what the file leaves
    to the loader (transformers derives `layer_types` when the file has none)."""
    name = drafter_name(model)
    if model.error:
        status = Status.FAIL if named or not model.absent else Status.WARN
        verdict.add(status, "drafter %s: %s" % (name, model.error),
                    Evidence(file=model.repo_dir or model.dir, line=None, text=model.error))
        return None, None
    if model.config is None or model.config.error or not isinstance(model.config.data, dict):
        why = model.config.error if model.config else "no config.json read"
        verdict.add(Status.FAIL, "drafter %s: %s" % (name, why),
                    Evidence(file=model.config.path if model.config else model.dir,
                             line=None, text=why or ""))
        return None, None
    here = "drafter %s" % name
    reading = model.reading
    if reading is None:
        verdict.add(Status.ERROR, "%s: this install's code could not be read (no install)" % here)
        return None, None
    for conversion in reading.conversions:
        where = Evidence(file=conversion.file, line=conversion.line,
                         text=conversion.text or conversion.error or "")
        if conversion.error:
            raises = "raises" in conversion.error
            verdict.add(Status.FAIL if raises else Status.ERROR, "%s: %s: %s" % (
                here, conversion.name or "this install's conversion", conversion.error), where)
        else:
            verdict.add(Status.PASS, "%s: config.json as this install converts it: %s" % (
                here, conversion.name), where)
    if reading.error:
        if not reading.conversions:
            verdict.add(Status.ERROR, "%s: %s" % (here, reading.error))
        return None, None
    data = judged_config(model)
    archs = data.get("architectures")
    if reading.registry_error or reading.architecture is None:
        verdict.add(Status.FAIL, "%s: architectures %s%s: %s, so this install cannot build it" % (
            here, short_json(archs if archs is not None else None), conversion_words(model),
            reading.registry_error or "no architecture"),
            file_evidence(model, "architectures", archs if archs is not None else MISSING),
            Evidence(file=REGISTRY, line=None, text=reading.registry_error or ""))
        return data, None
    code = codes.get(reading.architecture)
    if code is None or code.error:
        verdict.add(Status.ERROR, "%s: the code of %s could not be read (%s)" % (
            here, reading.architecture, code.error if code else "no facts for it"))
        return data, None
    defined = code.classes[0].replace(":", ".") if code.classes else "%s.%s" % (
        (code.module or "?").rsplit("/", 1)[-1][:-3], code.cls)  # where the class is defined
    verdict.add(Status.PASS, "%s: architecture %s -> %s" % (here, reading.architecture, defined),
        Evidence(file=REGISTRY, line=code.registry_line, text=code.registry_text or ""))
    judge_layer_ids(verdict, model, data, servers, offset, here)
    judge_layer_types(verdict, model, data, code, servers, here, loaded)
    # mask_token_id, read where this install reads it
    mask_keys = [k for r in code.reads for k in [r.key] + list(r.alternatives)
                 if k.rsplit(".", 1)[-1] == "mask_token_id"]
    mask_keys = list(dict.fromkeys(mask_keys))
    if mask_keys:
        found = [(k, lookup(data, k)) for k in mask_keys if lookup(data, k) is not MISSING
                 and lookup(data, k) is not None]
        if not found:
            verdict.add(Status.FAIL, "%s: this install reads %s; the drafter has neither%s"
                        % (here, spelled(mask_keys), conversion_words(model)),
                        file_evidence(model, mask_keys[0], MISSING),
                        read_line(code, mask_keys[0]))
        else:
            verdict.add(Status.PASS, "%s: %s %s" % (here, found[0][0], found[0][1]))
    # the keys of the drafter's own dict this install reads with no default and no guard:
    # vLLM fails to build the drafter without them (a config class gives them no default)
    for read in code.reads:
        if read.required and "." in read.key and lookup(data, read.key) is MISSING:
            verdict.add(Status.FAIL, "%s: this install reads %s with no default and no guard "
                        "(%s:%s), which the drafter lacks%s: vLLM fails building it" % (
                            here, read.key, read.file, read.line, conversion_words(model)),
                        file_evidence(model, read.key, MISSING), read_line(code, read.key))
    return data, code


def judge_layer_ids(verdict: Verdict, model: ModelPlace, data: dict[str, Any],
                    servers: list[ServedProcess], offset: tuple[int | None, str],
                    here: str) -> None:
    ids = lookup(data, LAYER_IDS_KEY)
    if ids is MISSING:
        verdict.add(Status.FAIL, "%s: no %s: this install then taps its default layers, not the "
                    "drafter's" % (here, LAYER_IDS_KEY), file_evidence(model, LAYER_IDS_KEY, ids))
        return
    if not isinstance(ids, list) or not ids or \
            not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        verdict.add(Status.FAIL, "%s: %s is not a list of layer numbers" % (here, LAYER_IDS_KEY),
                    file_evidence(model, LAYER_IDS_KEY, ids))
        return
    add, how = offset
    shift = 1 if add is None else add
    declared = data.get("num_target_layers")
    targets = [(target_layers(s.target_model), s) for s in servers]
    if not targets:
        if isinstance(declared, int):
            targets = [((declared, "%s: num_target_layers" % model.config.path), None)]
    judged = False
    for (layers, where), server in targets:
        if layers is None:
            continue
        judged = True
        bad = [i for i in ids if not 0 <= i <= layers - shift]
        target = server.target if server is not None else "its num_target_layers"
        if bad:
            verdict.add(Status.FAIL, "%s: target_layer_ids %s%s out of range for target %s with "
                        "%d layers (ids are taken %s, so each must be 0..%d)" % (
                            here, bad, conversion_words(model), target, layers, how
                            if add is not None else "+1 (assumed: %s)" % how, layers - shift),
                        file_evidence(model, LAYER_IDS_KEY, ids),
                        Evidence(file=where.split(": ")[0], line=None,
                                 text="num_hidden_layers: %d" % layers))
        else:
            verdict.add(Status.PASS, "%s: target_layer_ids %s within the %d layers of %s" % (
                here, ids, layers, target))
        if server is not None and isinstance(declared, int) and declared != layers:
            verdict.add(Status.FAIL, "%s: num_target_layers %d, but target %s has %d layers" % (
                here, declared, server.target, layers),
                file_evidence(model, "num_target_layers", declared))
    if not judged:
        verdict.add(Status.WARN, "%s: target_layer_ids %s not checked: the target's "
                    "num_hidden_layers is unknown here" % (here, ids))


def judge_layer_types(verdict: Verdict, model: ModelPlace, data: dict[str, Any],
                      code: ConfigCode, servers: list[ServedProcess], here: str,
                      loaded: dict[str, Any] | None = None) -> None:
    types = data.get("layer_types")
    layers = data.get("num_hidden_layers")
    use_swa = lookup(data, "dflash_config.use_swa") is True
    if types is None and loaded is not None and isinstance(loaded.get("layer_types"), list):
        # the file leaves layer_types to the loader (Qwen3Config derives it from
        # use_sliding_window and max_window_layers): what this vLLM runs is the loaded one
        types = loaded["layer_types"]
        here = "%s (layer_types absent in config.json; as this install's loader derives " \
               "it: %s)" % (here, short_json(types))
    elif types is None and data.get("use_sliding_window") is True and not use_swa:
        verdict.add(Status.WARN, "%s: layer_types absent with use_sliding_window true: the loader "
                    "derives which layers slide (from max_window_layers), and it did not run "
                    "here, so the sliding layers and the runner they need are not judged"
                    % here, file_evidence(model, "layer_types", MISSING))
        return
    if types is not None:
        if not isinstance(types, list) or (isinstance(layers, int) and len(types) != layers):
            verdict.add(Status.FAIL, "%s: layer_types has %s entries for %s drafter layers" % (
                here, len(types) if isinstance(types, list) else "no list of",
                layers), file_evidence(model, "layer_types", types))
            return
    unknown = sorted(set(map(str, (t for t in types or [] if t not in LAYER_TYPES))))
    if unknown:
        verdict.add(Status.FAIL, "%s: layer_types holds %s, which no attention layer is (each is "
                    "%s)" % (here, ", ".join(unknown), " or ".join(LAYER_TYPES)),
                    file_evidence(model, "layer_types", types))
        return
    sliding = sum(1 for t in types or [] if t == SLIDING)
    total = len(types or [])
    if not sliding and not use_swa:
        verdict.add(Status.PASS, "%s: %s full-attention layer(s), no window needed" % (
            here, total or layers))
        return
    keys = window_keys(code)
    where = read_line(code, keys[0]) if keys else None
    values = [(k, lookup(data, k)) for k in keys]
    present = [(k, v) for k, v in values if v is not MISSING and v is not None]
    if not keys:
        verdict.add(Status.FAIL, "%s: %d sliding layer(s), but this install reads no window key "
                    "(its DFlash layers run as full attention; see dflash-swa)" % (here, sliding))
    elif not present:
        unread = sorted(k for k in flat_keys(data) if is_window_key(k) and k not in keys)
        if unread:
            verdict.add(Status.FAIL, "%s: this install reads %s; the drafter has %s" % (
                here, spelled(keys), ", ".join(unread)),
                file_evidence(model, unread[0], lookup(data, unread[0])), where)
        else:
            verdict.add(Status.FAIL, "%s: %d sliding layer(s) without a window: this install "
                        "reads %s, which the drafter %s" % (
                            here, sliding or total, spelled(keys),
                            "sets to null" if any(v is None for _, v in values) else "lacks"),
                        file_evidence(model, keys[-1], lookup(data, keys[-1])), where)
    else:
        verdict.add(Status.PASS, "%s: %d of %d layer(s) sliding, window %s from %s" % (
            here, sliding or total, total or layers, present[0][1], present[0][0]))
    if 0 < sliding < total:
        judge_runner(verdict, code, servers, here, sliding, total)


def judge_runner(verdict: Verdict, code: ConfigCode, servers: list[ServedProcess],
                 here: str, sliding: int, total: int) -> None:
    """A mixed drafter on code that requires the V2 model runner: the server's
    environment must select it (or vLLM's own default must)."""
    need = code.v2_required
    if need is None or need.line is None:
        verdict.add(Status.PASS, "%s: mixed layers; this install's DFlash module states no runner "
                    "requirement" % here)
        return
    rule = Evidence(file=need.file, line=need.line, text=need.text or "")
    default = code.v2_default
    default_text = (default.default if default and not default.error else None)
    default_ev = Evidence(file=default.file, line=default.line, text=default.text or "") \
        if default and default.line else None
    if not servers:
        verdict.add(Status.SKIP, "%s: mixed layers (%d of %d sliding) need the V2 model runner; "
                    "no server runs it here to check VLLM_USE_V2_MODEL_RUNNER" % (
                        here, sliding, total), rule)
        return
    for server in servers:
        value = server.env.get("VLLM_USE_V2_MODEL_RUNNER")
        who = "server pid %d (port %s)" % (server.pid, server.port)
        if value is None and server.environ_error:
            verdict.add(Status.WARN, "%s: mixed layers need the V2 model runner; %s's environment "
                        "cannot be read (%s)" % (here, who, server.environ_error), rule)
        elif value is not None and value.strip().lower() in TRUE:
            verdict.add(Status.PASS, "%s: mixed layers on the V2 model runner "
                        "(VLLM_USE_V2_MODEL_RUNNER=%s)" % (here, value))
        elif value is not None and value.strip().lower() in FALSE:
            verdict.add(Status.FAIL, "%s: mixed layers (%d of %d sliding) require the V2 model "
                        "runner, but %s has VLLM_USE_V2_MODEL_RUNNER=%s" % (
                            here, sliding, total, who, value), rule)
        elif default_text is not None and default_text.strip().lower() in FALSE:
            verdict.add(Status.FAIL, "%s: mixed layers (%d of %d sliding) require the V2 model "
                        "runner; %s does not set VLLM_USE_V2_MODEL_RUNNER and this install "
                        "defaults to %r: relaunch with VLLM_USE_V2_MODEL_RUNNER=1" % (
                            here, sliding, total, who, default_text), rule, default_ev)
        elif default_text is not None and default_text.strip().lower() in TRUE:
            verdict.add(Status.PASS, "%s: mixed layers on the V2 model runner (this install's "
                        "default)" % here)
        else:
            verdict.add(Status.WARN, "%s: mixed layers (%d of %d sliding) require the V2 model "
                        "runner; %s leaves VLLM_USE_V2_MODEL_RUNNER unset and this install "
                        "then picks the runner itself (V1 without Triton or with a feature V2 "
                        "lacks): set VLLM_USE_V2_MODEL_RUNNER=1" % (here, sliding, total, who),
                        rule, default_ev)


def slides(config: dict[str, Any]) -> bool:
    """Does some layer of this config use a sliding window (as vLLM's DFlash code decides:
    a sliding layer type, dflash_config.use_swa, or no layer_types with
    use_sliding_window)?"""
    types = config.get("layer_types")
    if lookup(config, "dflash_config.use_swa") is True:
        return True
    if isinstance(types, list):
        return SLIDING in types
    return config.get("use_sliding_window") is True


def flat_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        out.append(prefix + key)
        if isinstance(value, dict) and key.endswith("_config"):
            out.extend(flat_keys(value, prefix + key + "."))
    return out


def judge_refused(verdict: Verdict, model: ModelPlace, facts: Facts) -> None:
    """A drafter whose code could not be judged: still a fail where the loader refused it."""
    load = facts.served.loaded if facts.served else None
    entry = load.configs.get(model.dir or "") if load is not None else None
    if entry is not None and entry.error:
        verdict.add(Status.FAIL,
                    "drafter %s: %s refuses it: %s" % (drafter_name(model), load.loader,
                                                       entry.error),
                    Evidence(file=model.config.path if model.config else model.dir,
                             line=None, text=entry.error))


def refused_by_loader(facts: Facts, model: ModelPlace) -> bool:
    """The install's loader ran on this drafter's config and refused it."""
    load = facts.served.loaded if facts.served else None
    entry = load.configs.get(model.dir or "") if load is not None else None
    return entry is not None and bool(entry.error) and entry.stage == "load"


def judge_loaded(verdict: Verdict, model: ModelPlace, data: dict[str, Any],
                 facts: Facts, code: ConfigCode) -> None:
    """The file against the config the install's loader returned."""
    load = facts.served.loaded if facts.served else None
    name = drafter_name(model)
    if load is None:
        return
    entry = load.configs.get(model.dir or "")
    if entry is None:
        why = load.error or "the loader gave no answer for it"
        verdict.add(Status.SKIP, "drafter %s not loaded: %s" % (name, why))
        return
    if entry.error:
        verdict.add(Status.FAIL,
                    "drafter %s: %s refuses it: %s" % (name, load.loader, entry.error),
                    Evidence(file=model.config.path if model.config else model.dir,
                             line=None, text=entry.error))
        return
    loaded = entry.config if isinstance(entry.config, dict) else {}
    keys = list(ALWAYS_COMPARED) + [r.key for r in code.reads]
    keys += [r.alternatives[i] for r in code.reads for i in range(len(r.alternatives))]
    conversions = model.reading.conversions if model.reading else []
    skipped = set()
    if any(c.stage == "engine" and not c.error for c in conversions):
        skipped.add("architectures")  # rewritten after loading: the loader never shows it
    if not slides(loaded) and not slides(data):
        skipped |= {k for k in keys if is_window_key(k)}  # no layer uses a window
    source = "config.json" + conversion_words(model)
    lost = []
    for key in dict.fromkeys(keys):
        before = lookup(data, key)
        if before is MISSING or key in skipped:
            continue
        after = lookup(loaded, key)
        if after is MISSING or after != before:
            lost.append(key)
            hint = ""
            if key == "sliding_window" and after is None and data.get("use_sliding_window") \
                    is not True:
                hint = (" (%s drops sliding_window unless use_sliding_window is true; the "
                        "file has use_sliding_window: %s)" % (
                            entry.cls or "the config class",
                            short_json(data.get("use_sliding_window"))))
            verdict.add(Status.FAIL, "drafter %s: %s is %s in %s but %s once %s loads "
                        "it%s" % (name, key, short_json(before), source, "absent" if after is MISSING
                                  else short_json(after), load.loader, hint),
                        file_evidence(model, key, before),
                        Evidence(file=load.loader, line=None, text="%s: %s" % (
                            key, "(absent)" if after is MISSING else short_json(after))))
    if not lost:
        compared = [k for k in dict.fromkeys(keys) if lookup(data, k) is not MISSING and
                    k not in skipped]
        verdict.add(Status.PASS, "drafter %s: the %d keys this install reads are the same in "
                    "%s and after %s loads it (%s, transformers %s%s)%s" % (
                        name, len(compared), source, load.loader, entry.cls, entry.transformers,
                        ", as %s" % (entry.run_as or load.run_as)
                        if entry.run_as or load.run_as else "",
                        "; not compared, since no layer slides: %s" % ", ".join(sorted(
                            k for k in skipped if is_window_key(k) and
                            lookup(data, k) is not MISSING))
                        if any(is_window_key(k) and lookup(data, k) is not MISSING
                               for k in skipped) else ""))
    missing = [r for r in code.reads if r.required and lookup(loaded, r.key) is MISSING]
    for read in missing:
        verdict.add(Status.FAIL,
                    "drafter %s: this install reads %s with no default and no guard (%s:%s), "
                    "which the loaded config lacks: vLLM fails building the drafter" % (
                        name, read.key, read.file, read.line), read_line(code, read.key))


def drafters_of(facts: Facts) -> list[tuple[ModelPlace, list[ServedProcess], bool]]:
    """Each DFlash drafter (by directory or name), the judged servers serving it, and
    whether only an expectation named it."""
    served = facts.served
    judged = judged_pids(facts)
    found: dict[str, tuple[ModelPlace, list[ServedProcess], bool]] = {}
    for server in served.servers if served else []:
        if server.pid not in judged:
            continue
        model = server.drafter_model
        if model is None or (server.method or "").lower() != "dflash":
            continue
        key = model.dir or model.spec or ""
        found.setdefault(key, (model, [], False))[1].append(server)
    for model in served.named if served else []:
        key = model.dir or model.spec or ""
        if key not in found:
            found[key] = (model, [], True)
    return list(found.values())


def judge_runs(facts: Facts, model: ModelPlace, servers: list[ServedProcess], named: bool,
               verdicts: tuple[Verdict, ...]) -> None:
    """The drafter run through the install's own code, per server, into both checks (so
    they agree wherever it ran)."""
    runs = (facts.served.runs if facts.served else None) or {}
    keyed = [("pid:%d" % s.pid, s) for s in servers]
    if not servers:
        keyed = [("named:%s" % model.dir, None)]
    reading = model.reading
    code = (facts.served.codes or {}).get(reading.architecture or "") if facts.served and \
        reading else None
    default = code.v2_default.default if code and code.v2_default and \
        not code.v2_default.error else None
    for key, server in keyed:
        here = "drafter %s%s, run through the install's code" % (
            drafter_name(model), " for server pid %d" % server.pid if server else "")
        for verdict in verdicts:
            judge_run(verdict, runs.get(key), here, server.env if server else None,
                      server.environ_error if server else None, default)


def drafter_checks(facts: Facts) -> list[CheckResult]:
    """drafter-config and drafter-loaded, when the host serves or is expected to serve a
    DFlash drafter; none otherwise (apply_served pads them once the fleet is in)."""
    served = facts.served
    if served is not None and served.error:
        return [check_result(DRAFTER_ID, DRAFTER_TITLE, Status.ERROR,
                             "the probe could not read what the servers serve: %s"
                             % served.error)]
    drafters = drafters_of(facts)
    if served is None or not drafters:
        return []
    offset = layer_offset(facts)
    static, loaded = Verdict(), Verdict()
    for model, servers, named in drafters:
        data, code = judge_drafter(static, model, servers, served.codes or {}, offset, named,
                                   loaded_config(facts, model))
        if data is not None and code is not None:
            judge_loaded(loaded, model, data, facts, code)
        else:
            judge_refused(loaded, model, facts)
        if refused_by_loader(facts, model):  # so both checks say what the install refuses
            judge_refused(static, model, facts)
        # drafter-loaded carries the run only where the loader ran on this drafter: with
        # config loading off (or no answer for it) it stays a skip saying so
        judge_runs(facts, model, servers, named,
                   (static, loaded) if was_loaded(facts, model) else (static,))
    why = "config loading is off" if served.loaded is None else "nothing loaded"
    return [static.result(DRAFTER_ID, DRAFTER_TITLE, "no DFlash drafter"),
            loaded.result(LOADED_ID, LOADED_TITLE, "not compared: " + why)]

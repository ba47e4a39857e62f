"""The executor's answers (what the install's code did with DFlash's inputs, run by run)
turned into findings the playbook's outcomes name: `NAME:LABEL` with a hit each whose text
is what was observed and whose trail is the lines that ran. Runs that disagree are a `?`
naming the condition (file:line: text) that separates them: never a pass."""

MAX_TRAIL = 12
MAX_HITS = 5


def split_at(line_text):
    """("file", line, "text") of "file:line: text"."""
    head, _, text = line_text.partition(": ")
    path, _, line = head.rpartition(":")
    try:
        return path, int(line), text
    except ValueError:
        return None, None, line_text


def trail_of(lines):
    """The lines that ran, bounded: the first and the last (where the value came out)."""
    if len(lines) > MAX_TRAIL:
        lines = lines[:MAX_TRAIL // 2] + lines[-(MAX_TRAIL // 2):]
    out = []
    for item in lines:
        path, line, text = split_at(item)
        out.append({"file": path, "line": line, "text": text, "step": "ran"})
    return out


def hit(path, line, text, step, lines=(), why=None):
    found = {"file": path, "line": line, "text": text, "step": step,
             "trail": trail_of(list(lines))}
    if why:
        found["why"] = why
    return found


def at_hit(at, text, step, lines=(), why=None):
    path, line, _ = split_at(at or "")
    return hit(path, line, text, step, lines, why)


def separating(runs, differs):
    """The condition that separates the first two runs that `differs` tells apart."""
    for a in runs:
        for b in runs:
            if a is b or not differs(a, b):
                continue
            for ca, cb in zip(a.get("choices", []), b.get("choices", [])):
                if ca["where"] == cb["where"] and ca["value"] != cb["value"]:
                    return "%s (%s)" % (ca["where"], ca["what"])
            return "%s" % (a.get("choices") or [{"where": "an unknown"}])[-1]["where"]
    return None


RUNNER_CHOICES = ("use_v2_model_runner", "VLLM_USE_V2_MODEL_RUNNER")


def runner_values(run):
    """The outcomes a run took for the model runner the server is started with."""
    return set(choice["value"] for choice in run.get("choices", []) if any(
        name in "%s %s" % (choice.get("where"), choice.get("what")) for name in RUNNER_CHOICES))


def runner_decides(built, refused):
    """Whether the model runner alone tells the runs that built the layers from those the
    install refused: a drafter refused only on one runner is served on the other (the
    V2-only mixed drafter). Refused for anything else (a platform query), it is not."""
    built_values = [runner_values(run) for run in built]
    refused_values = [runner_values(run) for run in refused]
    if not all(len(values) == 1 for values in built_values + refused_values):
        return False
    return not (set().union(*built_values) & set().union(*refused_values))


def feasible(runs):
    return [r for r in runs if r["observation"].get("kind") != "infeasible"]


def error_hit(answer, what):
    why = "%s: %s" % (what, answer["error"])
    return hit(None, None, why, "could not run", why=why)


def ids_words(value):
    return "(%s)" % ", ".join(str(v) for v in value) if isinstance(value, list) else repr(value)


def offset_findings(name, answer):
    """Each def that reads the key: the shift of the ids it returned in every run."""
    out = {}
    if isinstance(answer, dict):
        out[name + ":?"] = [error_hit(answer, "the layer-id functions")]
        return out
    for entry in answer:
        where = "%s:%s" % (entry.get("file"), entry.get("line"))
        if entry.get("error"):
            out.setdefault(name + ":?", []).append(hit(
                entry.get("file"), entry.get("line"), entry["error"], "could not run",
                why="%s at %s: %s" % (entry.get("function"), where, entry["error"])))
            continue
        runs = feasible(entry.get("runs", []))
        ids = entry.get("ids")
        shifts = set(r["observation"].get("shift") if r["observation"].get("kind") == "ids"
                     else None for r in runs)
        first = runs[0] if runs else None
        if runs and all(other_ids(r["observation"], ids) for r in runs):
            out.setdefault(name + ":wrong", []).append(hit(
                entry.get("file"), entry.get("line"), "%s %s" % (
                    entry.get("function"), describe_offset(first["observation"], ids)),
                "returned", first["lines"]))
            continue
        if not runs or None in shifts or len(shifts) != 1:
            def differs(a, b):
                return a["observation"] != b["observation"]
            condition = separating(runs, differs)
            seen = "; ".join(sorted(set(describe_offset(r["observation"], ids) for r in runs)))
            why = "%s (%s): %s%s" % (entry.get("function"), where, seen or "no run finished",
                                     " depending on %s" % condition if condition else "")
            out.setdefault(name + ":?", []).append(hit(
                entry.get("file"), entry.get("line"), why, "runs disagree",
                first["lines"] if first else (), why=why))
            continue
        shift = shifts.pop()
        label = "<0" if shift < 0 else (str(shift) if shift < 2 else "2+")
        text = "%s %s" % (entry.get("function"), describe_offset(first["observation"], ids))
        if len(runs) > 1:
            text += " (all %d runs)" % len(runs)
        out.setdefault("%s:%s" % (name, label), []).append(hit(
            entry.get("file"), entry.get("line"), text, "returned" if shift == 1 else
            "shift %+d" % shift, first["lines"]))
    return out


def other_ids(observation, ids):
    """Layer ids that are not the ids shifted by one amount: a list of as many ints."""
    value = observation.get("value")
    return observation.get("kind") == "returned" and isinstance(value, list) and \
        isinstance(ids, list) and bool(value) and \
        all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def describe_offset(observation, ids):
    kind = observation.get("kind")
    if kind == "ids":
        return "%s %s for target_layer_ids %s" % (
            observation.get("how"), ids_words(observation.get("value")), ids)
    if kind == "returned":
        return "returned %s, not layer ids, for target_layer_ids %s" % (
            observation.get("value"), ids)
    return "%s %s at %s" % (kind, observation.get("detail"), observation.get("at"))


def layer_words(layers):
    return ", ".join("layer %s got %s" % (l.get("layer"), "window %s" % l["window"]
                                          if l.get("window") is not None else "None")
                     for l in layers if "error" not in l) or "no attention layer was built"


def judge_layers(observation, expected):
    """("right" | "wrong" | "raised", words) of one run of one drafter."""
    layers = observation.get("layers") or []
    if observation.get("kind") == "rejected":
        return "raised", "%s at %s" % (observation.get("detail"), observation.get("at"))
    if observation.get("kind") == "raised":
        return "failed", "%s at %s" % (observation.get("detail"), observation.get("at"))
    errors = [l["error"] for l in layers if "error" in l]
    if errors:
        return "wrong", errors[0]
    unknown = [l for l in layers if l.get("unknown")]
    if unknown:
        return "failed", "layer %s got %s, a value the install's code took from a stand-in " \
            "(not run) at %s" % (unknown[0].get("layer"), unknown[0].get("window"),
                                unknown[0].get("at"))
    got = dict((l["layer"], l.get("window")) for l in layers)
    wrong = [i for i, want in enumerate(expected) if got.get(i, "missing") != want]
    if wrong:
        return "wrong", "%s (expected %s)" % (layer_words(layers), ", ".join(
            "layer %d %s" % (i, expected[i]) for i in wrong[:3]))
    return "right", layer_words(layers)


def window_findings(name, answer):
    out = {}
    if answer.get("error"):
        out[name + ":?"] = [error_hit(answer, "the drafter")]
        return out
    labels = []
    for kind in ("uniform", "mixed"):
        scenario = answer.get("scenarios", {}).get(kind) or {}
        runs = feasible(scenario.get("runs", []))
        expected = scenario.get("expected") or []
        judged = [(judge_layers(r["observation"], expected), r) for r in runs]
        subject = "a %s sliding drafter (%s)" % (kind, "4 sliding layers, 1 full" if
                                                 kind == "mixed" else "every layer sliding")
        if not judged:
            why = "%s: no run finished" % subject
            out.setdefault(name + ":?", []).append(hit(answer.get("file"), None, why,
                                                       "could not run", why=why))
            labels.append("?")
            continue
        right = [r for (v, _), r in judged if v == "right"]
        wrong = [(w, r) for (v, w), r in judged if v == "wrong"]
        raised = [(w, r) for (v, w), r in judged if v == "raised"]
        failed = [(w, r) for (v, w), r in judged if v == "failed"]
        if failed:  # the code failed under the executor, not by a raise of its own
            why = "%s: %s" % (subject, failed[0][0])
            out.setdefault(name + ":?", []).append(at_hit(
                failed[0][0].rpartition(" at ")[2], why, "could not run", failed[0][1]["lines"],
                why=why))
            labels.append("?")
        elif right and wrong:
            condition = separating(runs, lambda a, b: judge_layers(
                a["observation"], expected)[0] != judge_layers(b["observation"], expected)[0])
            why = "%s: the windows depend on %s: %s in one run, %s in another" % (
                subject, condition, layer_words(right[0]["observation"]["layers"]), wrong[0][0])
            out.setdefault(name + ":?", []).append(at_hit(
                condition, why, "runs disagree", right[0]["lines"], why=why))
            labels.append("?")
        elif wrong:
            out.setdefault(name + ":wrong", []).append(at_hit(
                (wrong[0][1]["observation"].get("layers") or [{}])[0].get("at"),
                "%s: %s" % (subject, wrong[0][0]), "built", wrong[0][1]["lines"]))
            labels.append("wrong")
        elif right and raised and not runner_decides(right, [r for _, r in raised]):
            # refused on some runs for something else than the runner it is served on (a
            # platform query, say): whether a fleet's servers take it is not decided
            condition = separating(runs, lambda a, b: judge_layers(
                a["observation"], expected)[0] != judge_layers(b["observation"], expected)[0])
            why = "%s: it raises %s depending on %s, not on the model runner" % (
                subject, raised[0][0], condition)
            out.setdefault(name + ":?", []).append(at_hit(
                condition, why, "runs disagree", raised[0][1]["lines"], why=why))
            labels.append("?")
        elif right and raised:
            condition = separating(runs, lambda a, b: judge_layers(
                a["observation"], expected)[0] != judge_layers(b["observation"], expected)[0])
            text = "%s: %s; it raises %s when %s" % (
                subject, layer_words(right[0]["observation"]["layers"]), raised[0][0],
                condition)
            out.setdefault(name + ":config", []).append(at_hit(
                right[0]["observation"]["layers"][0].get("at"), text, "built",
                right[0]["lines"]))
            out.setdefault(name + ":conditional", []).append(at_hit(
                raised[0][0].rpartition(" at ")[2], text, "raised", raised[0][1]["lines"]))
            labels.append("config")
        elif right:
            out.setdefault(name + ":config", []).append(at_hit(
                right[0]["observation"]["layers"][0].get("at"), "%s: %s" % (
                    subject, layer_words(right[0]["observation"]["layers"])), "built",
                right[0]["lines"]))
            labels.append("config")
        else:  # every run refused by the install's own raise: it cannot be served
            label = "rejected"
            text = "%s: raised %s" % (subject, raised[0][0])
            out.setdefault("%s:%s" % (name, label), []).append(at_hit(
                raised[0][0].rpartition(" at ")[2], text, "raised", raised[0][1]["lines"],
                why=text if label == "?" else None))
            labels.append(label)
    return out


def drop_findings(name, answer):
    out = {}
    if answer.get("error"):
        out[name + ":?"] = [error_hit(answer, "the speculative config")]
        return out
    said = []
    decided_lines = []
    for method, decided in sorted((answer.get("decisions") or {}).items()):
        ran = feasible(decided.get("runs", []))
        if ran:
            decided_lines += [line for line in ran[0]["lines"] if line not in decided_lines]
        values = set(repr(r["observation"].get("value")) if r["observation"].get(
            "kind") == "returned" else "?" for r in feasible(decided.get("runs", [])))
        said.append("%s() -> %s" % (method, "/".join(sorted(values))))
    scheduler = answer.get("scheduler") or {}
    if scheduler.get("error"):
        out[name + ":?"] = [error_hit(scheduler, "the scheduler")]
        return out
    runs = feasible(scheduler.get("runs", []))
    treated = [eagle_treatment(r["observation"]) for r in runs]
    decisions = "; ".join(said)
    if not runs or "?" in treated or len(set(t == "kept" for t in treated)) != 1:
        condition = separating(runs, lambda a, b: (eagle_treatment(a["observation"]) == "kept")
                               != (eagle_treatment(b["observation"]) == "kept"))
        seen = sorted(set(treatment_words(r["observation"]) for r in runs))
        why = "the KV cache manager got %s for DFlash%s (%s)" % (
            " or ".join(seen) or "nothing (never reached)", " depending on %s" % condition
            if condition else "", decisions)
        out[name + ":?"] = [hit(scheduler.get("file"), scheduler.get("to_line"), why,
                                "runs disagree", runs[0]["lines"] if runs else (), why=why)]
        return out
    dropped = treated[0] != "kept"
    text = "%s: %s for method dflash at its defaults (%s; %d runs)" % (
        scheduler.get("function"), treatment_words(runs[0]["observation"]), decisions,
        len(runs))
    lines = decided_lines[:MAX_TRAIL // 2] + runs[0]["lines"][-(MAX_TRAIL // 2):]
    built = hit(scheduler.get("file"), scheduler.get("to_line"), text, "built", lines)
    argument = (scheduler.get("arguments") or {}).get("use_eagle")
    if argument:  # first: the line of the call that hands the manager its use_eagle
        path, line, words = split_at(argument)
        built["trail"].insert(0, {"file": path, "line": line, "text": words,
                                  "step": "argument"})
    out["%s:%s" % (name, "dropped" if dropped else "kept")] = [built]
    opt_out = answer.get("scheduler_opt_out") or {}
    # the opt-in flag alone (0.30-0.32): no gate of the config's own decides the drop; where
    # one does (needs_eagle_block_drop) and still gives DFlash the drop, it is a fail
    gated = "needs_eagle_block_drop" in (answer.get("decisions") or {})
    if dropped and not gated and opt_out.get("runs"):
        values = set(eagle_treatment(r["observation"]) for r in feasible(opt_out["runs"]))
        if values == {"kept"}:
            out[name + ":opt-in"] = [hit(scheduler.get("file"), scheduler.get("to_line"),
                                         "with disable_eagle_block_drop=True the manager gets "
                                         "use_eagle=False", "built")]
    return out


def eagle_treatment(observation):
    """What the KV cache manager was given for DFlash: "dropped" (EAGLE's block drop),
    "hashed" (the lookahead block hashes that stand in for it), "kept", or "?"."""
    if observation.get("kind") != "built" or not isinstance(observation.get("use_eagle"), bool):
        return "?"
    lookahead = observation.get("lookahead")
    if observation["use_eagle"]:
        return "dropped"
    if isinstance(lookahead, int) and not isinstance(lookahead, bool) and lookahead > 0:
        return "hashed"
    if lookahead is None or isinstance(lookahead, int):
        return "kept"
    return "?"


def treatment_words(observation):
    if observation.get("kind") != "built":
        return "%s %s at %s" % (observation.get("kind"), observation.get("detail"),
                                observation.get("at"))
    words = "KVCacheManager got use_eagle=%s" % observation.get("use_eagle")
    if observation.get("lookahead") is not None:
        words += ", num_hash_lookahead_tokens=%s" % observation.get("lookahead")
    return words


def findings_of(name, question, answer):
    """{label: [hits]} of one finder's answer."""
    kind = question["kind"]
    if kind == "offset":
        return offset_findings(name, answer)
    if kind == "window":
        return window_findings(name, answer)
    return drop_findings(name, answer)

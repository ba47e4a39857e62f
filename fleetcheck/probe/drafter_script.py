"""The drafter questions of the executor's child (see drafter_run.py): what the install's
own functions do with one served drafter's config against its target's. This text is
sent after the executor's child script (executor_script.SCRIPT without its closing
`main()` call), so it uses that script's loader, stand-ins, tracer and exploration.

For each runner (V1, V2) it calls: every def of the drafter's module that takes a config
and a layer index (the per-layer attention resolution) for every layer, with
`get_current_vllm_config()` answering that runner; the def that sizes the fc layer; the
aux-layer selection of each runner; each runner's parallel-drafting token; the V2
speculator's construction (its own validations). Each call's outcome is printed with
the install line it ended on."""

PART = r'''

def drafter_namespace(data):
    """A loaded config dict as the model config object holds it (nested *_config dicts stay
    dicts, as transformers keeps dflash_config)."""
    return Namespace(**dict((str(k), v) for k, v in (data or {}).items()))


def drafter_spec(hf_config, target, max_model_len):
    spec = speculative_standin(hf_config)
    target_model = Given("target_model_config")
    target_model.hf_config = target
    target_model.hf_text_config = target
    target_model.max_model_len = max_model_len
    spec.target_model_config = target_model
    return spec


def permissive_self(cls, fields):
    """An instance of the install's class without its __init__: the fields given, a
    stand-in for any other attribute (what a base class's __init__, not run, would have
    set), so the method runs on to the checks it makes of the config."""
    try:
        return bare_instance(cls, fields)
    except Exception:
        return standin_self(cls, cls.__name__, fields)


def called(function, roles, owner=None, fields=None):
    """One call of the install's function, its unknowns explored: the distinct outcomes,
    each as (kind, value or text, install line). With `owner`, the function is a method
    called on an instance without its __init__, and what it stored on it is returned."""
    def run():
        target = function
        self = None
        if owner is not None:
            self = permissive_self(owner, dict(fields or {}))
            target = types.MethodType(function, self)
        args, kwargs = bind_arguments(target, roles)
        outcome, lines = traced(lambda: target(*args, **kwargs))
        stored = {}
        if self is not None and not isinstance(self, StandIn):
            stored = dict((k, v) for k, v in vars(self).items() if not isinstance(v, StandIn))
        return (outcome, stored), lines

    results, complete = explore(run)
    out = []
    for (outcome, stored), taken, lines in results:
        item = {"kind": outcome[0], "choices": [w for _, w, _ in taken][:8]}
        if outcome[0] == "returned":
            item["value"] = plain(outcome[1]) if not isinstance(outcome[1], StandIn) \
                else "(unknown)"
        else:
            item["detail"], item["at"] = outcome[1], outcome[2]
        if stored:
            item["stored"] = dict((k, plain(v)) for k, v in stored.items()
                                  if k in fields.get("_watch", ()))
        out.append(item)
    return {"runs": out[:8], "complete": complete}


def defs_in(relative, key):
    """(class, function object, line) of each def of a file whose body reads `key`."""
    path = os.path.join(SITE, relative)
    data = source(path)
    if key.encode() not in data:
        return []
    module = load_entry(relative)
    found = []
    for class_name, node in defs_reading(path, key_names(data, key)):
        owner = module.__dict__.get(class_name) if class_name else None
        function = getattr(owner, node.name, None) if class_name else \
            module.__dict__.get(node.name)
        if callable(function):
            found.append((owner if isinstance(owner, type) else None, function,
                          "%s:%d: %s" % (relative, node.lineno, (class_name + "." if
                                                                 class_name else "") +
                                         node.name)))
    return found


CURRENT_CONFIG = []  # what get_current_vllm_config() answers: the runner being asked


def drafter_module(relative, spec, use_v2):
    """(the drafter's module, the runner's config): the module loaded with this runner
    current (what its code's get_current_vllm_config() answers)."""
    vllm_config = vllm_config_standin(spec, use_v2=use_v2)
    vllm_config.model_config = Given("model_config")
    CURRENT_CONFIG[:] = [vllm_config]
    REPLACEMENTS["get_current_vllm_config"] = lambda *a, **k: CURRENT_CONFIG[0]
    return load_entry(relative), vllm_config


def layer_attention(relative, hf_config, spec, use_v2):
    """Each def of the drafter's module taking (config, layer_idx), called for every layer
    with this runner current."""
    module, _ = drafter_module(relative, spec, use_v2)
    out = []
    layers = getattr(hf_config, "num_hidden_layers", 0)
    layers = layers if isinstance(layers, int) and 0 < layers <= 256 else 0
    for name, function in sorted(module.__dict__.items()):
        if not inspect.isfunction(function) or rel(function.__code__.co_filename) != relative:
            continue
        try:
            names = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            continue
        if len(names) != 2 or "config" not in names[0] or "layer" not in names[1]:
            continue
        per_layer = []
        for index in range(layers):
            per_layer.append(called(function, [(r"config", hf_config), (r"layer", index)]))
        out.append({"function": "%s:%d: %s" % (relative, function.__code__.co_firstlineno,
                                               name), "layers": per_layer})
    return out


def layer_builds(relative, hf_config, spec, use_v2):
    """Each class of the drafter's module built per layer (its __init__ takes a config and
    a layer index: the decoder layer), on the first layer: every attribute of the config
    it reads, as the server's model construction reads them."""
    module, vllm_config = drafter_module(relative, spec, use_v2)
    out = []
    for name, cls in sorted(module.__dict__.items()):
        init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
        if not inspect.isfunction(init) or rel(init.__code__.co_filename) != relative:
            continue
        try:
            names = list(inspect.signature(init).parameters)
        except (TypeError, ValueError):
            continue
        if "config" not in names or not any("layer" in n for n in names):
            continue
        roles = [(r"vllm_config", vllm_config), (r"^config$", hf_config), (r"layer", 0)]
        out.append(dict(called(init, roles, cls, {"_watch": ()}), function="%s:%d: %s" % (
            relative, init.__code__.co_firstlineno, name + ".__init__")))
    return out


def fc_input(relative, spec, key):
    vllm_config = vllm_config_standin(spec)
    out = []
    for owner, function, at in defs_in(relative, key):
        if owner is not None:
            continue
        out.append(dict(called(function, [(r"vllm_config", vllm_config), (r"spec", spec)]),
                        function=at))
    return out


def runner_calls(globs, key, hf_config, spec, watch=()):
    """Every def in the runner's files that reads `key`, called with this drafter."""
    vllm_config = vllm_config_standin(spec)
    roles = [(r"spec", spec), (r"vllm_config", vllm_config),
             (r"hf_config|draft_config|^config$", hf_config),
             (r"draft_model_config", spec.draft_model_config)]
    out = []
    for relative in files_under(globs):
        try:
            found = defs_in(relative, key)
        except (OSError, SyntaxError, ValueError) as exc:
            out.append({"function": relative, "error": "cannot parse: %s" % exc})
            continue
        except OutOfTime:
            raise
        except Exception as exc:
            out.append({"function": relative, "error": "cannot load: %s: %s" % (
                type(exc).__name__, str(exc)[:TEXT])})
            continue
        for owner, function, at in found:
            fields = {"speculative_config": spec, "vllm_config": vllm_config,
                      "draft_model_config": spec.draft_model_config,
                      "use_aux_hidden_state_outputs": True, "_watch": tuple(watch)}
            if owner is not None:
                answer = called(function, roles, owner, fields)
            else:
                answer = called(function, roles, None, fields)
            out.append(dict(answer, function=at))
    return out


def ask_drafter(question):
    hf_config = drafter_namespace(question["drafter_config"])
    target = drafter_namespace(question.get("target_config"))
    spec = drafter_spec(hf_config, target, question.get("max_model_len"))
    answer = {"runners": {}}
    module = question.get("module")
    for runner, use_v2 in (("v1", False), ("v2", True)):
        files = question["runners"][runner]
        part = {}
        if module:
            part["attention"] = layer_attention(module, hf_config, spec, use_v2)
            part["build"] = layer_builds(module, hf_config, spec, use_v2)
        part["aux"] = runner_calls(files["aux"], "eagle_aux_hidden_state_layer_ids",
                                   hf_config, spec)
        part["mask"] = runner_calls(files["mask"], "mask_token_id", hf_config, spec,
                                    watch=("parallel_drafting_token_id",))
        part["anchor"] = runner_calls(files["anchor"], "sample_from_anchor", hf_config, spec,
                                      watch=("sample_from_anchor",))
        answer["runners"][runner] = part
    if module:
        answer["fc"] = fc_input(module, spec, "target_hidden_size")
    return answer


ASKERS["drafter"] = ask_drafter
main()
'''


def script():
    """The executor's child without its own entry point, then the drafter questions."""
    from fleetcheck.probe.executor_script import SCRIPT
    body = SCRIPT.rstrip()
    if body.endswith("main()"):
        body = body[:-len("main()")]
    return body + PART

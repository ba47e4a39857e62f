"""The served drafter built as its server builds it, and its checkpoint loaded without its
data: in the loader's child (config_loader.py), the install's own EngineArgs make the
server's config from its target, its speculative settings and its --max-model-len; the
install's own model class is built on the meta device (no memory for the weights); then
each tensor of the drafter's *.safetensors, as an empty meta tensor of the shape and dtype
its header gives, goes through the install's own weight loader. A shape the install's
model disagrees with fails there exactly as it fails the server at start ("Attempted to
load weight ... into parameter ..."), without reading a byte of the weights; so do layer
parameters no tensor reaches and tensors the install throws away, which the server does
not catch for DFlash.

The keys are named by running the code again from the config as loaded: each number of
the drafter's config (and each list of numbers, resized) set to what the failing sizes
say, each flag flipped, each value the failure quotes set to the target's; the model is
rebuilt and loaded, and a key whose change makes the checkpoint load whole is one the
config got wrong. A failure no key explains may be this host's (a device the platform
expects), so the checks leave it undecided (checks/drafter_run.py)."""

# the child's part, run after the loader's (config_loader.LOADER_SCRIPT): it has `say`
BUILD_PART = r'''
import copy, dataclasses, os as _os, re, stat as _stat, struct as _struct, time as _time
import traceback

HEADER_MAX = 100 * 1024 * 1024  # what safetensors itself accepts
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
          "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
          "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
SEARCH_S = 10.0  # at most this long naming the keys, per drafter
INDEX_MAX = 16 * 1024 * 1024
SITE_PREFIX = sys.argv[1].rstrip("/") + "/"


class Undecided(Exception):
    """What this child cannot judge the drafter by (a dtype torch here lacks)."""


def read_regular(path, size):
    """Up to `size` bytes of `path`, opened without blocking and only if a regular file
    (the drafter's directory is its server owner's choice; this child has that owner's
    rights, and follows links as the server does: a hub cache's files are links)."""
    fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
    try:
        if not _stat.S_ISREG(_os.fstat(fd).st_mode):
            raise ValueError("%s is not a regular file" % path)
        chunks, left = [], size
        while left > 0:
            chunk = _os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        _os.close(fd)


def checkpoint_files(directory):
    """The *.safetensors files the server loads: those model.safetensors.index.json maps
    tensors to when it is there (vLLM drops the others), else every one."""
    names = sorted(n for n in _os.listdir(directory) if n.endswith(".safetensors"))
    index = _os.path.join(directory, "model.safetensors.index.json")
    if _os.path.exists(index):
        mapped = json.loads(read_regular(index, INDEX_MAX)).get("weight_map") or {}
        names = [n for n in names if n in set(str(v) for v in mapped.values())]
    return names


SIDE_FILES = {"mask_embedding.pt": 64 * 1024 * 1024}  # what DFlash's load_weights reads whole


def checkpoint_shapes(directory):
    """[(tensor name, shape, safetensors dtype)] of the checkpoint files' headers; the side
    files the install's loader reads whole checked first (regular, bounded)."""
    for name, limit in SIDE_FILES.items():
        path = _os.path.join(directory, name)
        if _os.path.lexists(path):
            fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
            try:
                info = _os.fstat(fd)
            finally:
                _os.close(fd)
            if not _stat.S_ISREG(info.st_mode) or info.st_size > limit:
                raise ValueError("%s is not a regular file of at most %d bytes" % (path, limit))
    out = []
    for name in checkpoint_files(directory):
        path = _os.path.join(directory, name)
        head = read_regular(path, 8)
        if len(head) < 8:
            raise ValueError("%s is shorter than a safetensors header" % name)
        length = _struct.unpack("<Q", head)[0]
        if length > HEADER_MAX:
            raise ValueError("%s declares a %d-byte header" % (name, length))
        header = json.loads(read_regular(path, 8 + length)[8:])
        for tensor, info in sorted(header.items()):
            if tensor != "__metadata__":
                out.append((tensor, [int(d) for d in info["shape"]], str(info["dtype"])))
    return out


def server_config(request, speculative=True):
    """The server's VllmConfig, made by the install's EngineArgs from its settings (without
    its speculative config: what the target alone makes)."""
    from vllm.engine.arg_utils import EngineArgs
    in_process_inspection()
    fields = set(f.name for f in dataclasses.fields(EngineArgs))
    spec = {"method": request["method"], "model": request["drafter"]}
    if request.get("num_speculative_tokens") is not None:
        spec["num_speculative_tokens"] = request["num_speculative_tokens"]
    kwargs = {"model": request["target"], "max_model_len": request.get("max_model_len"),
              "skip_tokenizer_init": True, "enforce_eager": True,
              "speculative_config": spec if speculative else None}
    return EngineArgs(**dict((k, v) for k, v in kwargs.items()
                             if k in fields and v is not None)).create_engine_config()


def in_process_inspection():
    """The registry inspects a model class in a subprocess (so the server's own process
    never initializes CUDA), which needs a writable temporary directory and a cache in
    the user's home that a service user may lack; this child builds the drafter's class
    anyway, so it inspects here."""
    from vllm.model_executor.models import registry
    if hasattr(registry, "_run_in_subprocess"):
        registry._run_in_subprocess = lambda fn: fn()


def fake_groups():
    """One rank of one: what the parallel groups answer in a server of one device (the
    layers ask them their sizes; nothing is sent)."""
    from vllm.distributed import parallel_state
    class One(object):
        world_size = 1
        rank_in_group = 0
        rank = 0
        local_rank = 0
        is_first_rank = True
        is_last_rank = True
        ranks = [0]
    for name in ("_TP", "_PP", "_DCP", "_PCP", "_EP", "_DP", "_EPLB"):
        if hasattr(parallel_state, name) and getattr(parallel_state, name) is None:
            setattr(parallel_state, name, One())


def meta_weights(shapes):
    import torch
    for tensor, shape, dtype in shapes:
        kind = getattr(torch, DTYPES.get(dtype, ""), None)
        if kind is None:
            raise Undecided("%s has dtype %s, which this child does not map" % (tensor, dtype))
        yield tensor, torch.empty(shape, dtype=kind, device="meta")


def where(exc):
    """(install file:line, tensor name): the innermost frame of the install's code the
    exception passed, and the parameter the innermost frame naming one was loading
    (AutoWeightsLoader's qualified name, else a loop's weight name)."""
    frames = [(f, n) for f, n in traceback.walk_tb(exc.__traceback__)
              if f.f_code.co_filename.startswith(SITE_PREFIX + "vllm/")]
    at = None
    if frames:
        at = "%s:%d" % (frames[-1][0].f_code.co_filename[len(SITE_PREFIX):], frames[-1][1])
    for frame, _ in reversed(frames):
        for local in ("weight_qualname", "base_prefix", "weight_name", "name"):
            value = frame.f_locals.get(local)
            if isinstance(value, str) and "." in value:
                return at, value
    return at, None


RECORDED = []  # (module, names) each AutoWeightsLoader.load_weights returned in a load


DROPPED = []  # checkpoint tensors a WeightsMapper of the install mapped to nothing


def record_loads():
    """Keep what the install's AutoWeightsLoader says it loaded (a drafter class may drop
    that answer: DFlash's load_weights returns None, and then the server never checks
    that every parameter got a weight), and which checkpoint tensors its WeightsMapper
    throws away (other than those its own REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER calls
    unused)."""
    from vllm.model_executor.models import utils as model_utils
    cls = getattr(model_utils, "AutoWeightsLoader", None)
    if cls is None or getattr(cls.load_weights, "recorded", False):
        return cls is not None
    original = cls.load_weights
    unused = getattr(cls, "REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER", None)

    def load_weights(self, *args, **kwargs):
        names = original(self, *args, **kwargs)
        if isinstance(names, set):
            RECORDED.append((self.module, set(names)))
        return names
    load_weights.recorded = True
    cls.load_weights = load_weights
    mapper = getattr(model_utils, "WeightsMapper", None)
    if mapper is None or not hasattr(mapper, "map_name") or unused is None:
        return True
    apply = mapper.apply

    def mapped(self, weights):
        def fed():
            for name, data in weights:
                try:
                    if self.map_name(name) is None and unused.map_name(name) is not None:
                        DROPPED.append(name)
                except Exception:
                    pass
                yield name, data
        return apply(self, fed())
    mapper.apply = mapped
    return True


def never_loaded(model, quantized):
    """The parameters of the drafter's decoder layers no loader said it loaded: the server
    serves them as the memory it got (the target shares only embeddings and the head). On
    a quantized drafter, whose scales a checkpoint may leave to defaults, only layers of
    which nothing was loaded count."""
    prefixes = dict((id(m), q) for q, m in model.named_modules())
    got = set()
    for module, names in RECORDED:
        prefix = prefixes.get(id(module))
        if prefix is not None:
            got.update((prefix + "." if prefix else "") + n for n in names)
    layer = re.compile(r"(?:^|\.)layers\.([0-9]+)\.")
    params = [(n, layer.search(n)) for n, p in model.named_parameters() if p.numel() > 0]
    missing = sorted(n for n, found in params if found and n not in got)
    if quantized:
        fed = set(layer.search(n).group(1) for n in got if layer.search(n))
        missing = [n for n in missing if layer.search(n).group(1) not in fed]
    return missing


def build_and_load(config, shapes):
    """Build the drafter on the meta device and load the checkpoint's shapes; None, or
    (the stage that failed: "model" building it, "weights" loading, with the exception;
    "unloaded", with the layer parameters no tensor of the checkpoint was loaded into;
    "dropped", with the checkpoint's tensors the install threw away)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import initialize_model
    draft = config.speculative_config.draft_model_config
    context = getattr(config.compilation_config, "static_forward_context", None)
    if isinstance(context, dict):
        context.clear()  # each build registers its attention layers anew
    stage = "model"
    recording = record_loads()
    del RECORDED[:], DROPPED[:]
    try:
        with set_current_vllm_config(config):
            loader = get_model_loader(config.load_config)
            before = torch.get_default_dtype()
            torch.set_default_dtype(draft.dtype)
            try:
                with torch.device("meta"):
                    model = initialize_model(vllm_config=config, model_config=draft)
            finally:
                torch.set_default_dtype(before)
            loader.get_all_weights = lambda model_config, model: meta_weights(shapes)
            stage = "weights"
            loader.load_weights(model, draft)
    except Undecided:
        raise
    except Exception as exc:
        return stage, exc
    quantized = getattr(draft, "quantization", None) is not None
    missing = never_loaded(model, quantized) if recording and RECORDED else []
    if missing:
        return "unloaded", missing
    # a quantized checkpoint's own mappers drop what its method rebuilds (GPTQ's g_idx)
    return ("dropped", sorted(set(DROPPED))) if DROPPED and not quantized else None


def config_keys(hf_config):
    """(key, value, parent) of the loaded config's top level and of its nested dicts."""
    data = hf_config.to_dict()
    keys = [(k, v, None) for k, v in sorted(data.items())]
    for parent, value in sorted(data.items()):
        if isinstance(value, dict) and isinstance(getattr(hf_config, parent, None), dict):
            keys += [(k, v, parent) for k, v in sorted(value.items())]
    return keys


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def candidates(hf_config, target, stage, problem, shapes):
    """(key, parent dict's key or None, value) changes of the drafter's config to try.
    First, each key the failure quotes the value of, set to the target's value (a drafter
    copies most of its target's config); for a failed build, then every other key the
    drafter does not share with its target, set to the target's. For a failed load: each integer scaled by the
    ratio of two sizes the failure quotes (a checkpoint's to the install's), then halved
    and doubled; each list of integers shortened to such a ratio. For parameters left
    unloaded or tensors dropped: each flag flipped, each integer set to the checkpoint's
    layer count."""
    import re
    keys = config_keys(hf_config)
    theirs = target.to_dict() if hasattr(target, "to_dict") else {}
    differing = [(k, v) for k, v, parent in keys
                 if parent is None and k in theirs and theirs[k] != v and v is not None]
    out = [(k, None, theirs[k]) for k, v in differing
           if not isinstance(v, (dict, list)) and re.search(
               r"(?<![\w.])%s(?!\w|\.\w)" % re.escape(str(v)), str(problem))]
    if stage == "model":  # then every other key the drafter does not share with its target
        return out + [(k, None, theirs[k]) for k, v in differing
                      if (k, None, theirs[k]) not in out]
    if stage in ("unloaded", "dropped"):
        layers = len(set(re.findall(r"(?:^|\.)layers\.([0-9]+)\.", "\n".join(
            t for t, _, _ in shapes), re.M)))
        for key, value, parent in keys:
            if isinstance(value, bool):
                out.append((key, parent, not value))
            elif is_int(value) and layers and value != layers:
                out.append((key, parent, layers))
        return out
    numbers = []
    for digits in re.findall(r"[0-9]+", str(problem)):
        if int(digits) > 0 and int(digits) not in numbers:
            numbers.append(int(digits))
    ratios = [(a, b) for a in numbers[:6] for b in numbers[:6] if a != b]
    ratios += [r for r in ((1, 2), (2, 1)) if r not in ratios]
    for a, b in ratios:
        for key, value, parent in keys:
            if is_int(value) and value > 0 and (value * a) % b == 0:
                out.append((key, parent, value * a // b))
            elif isinstance(value, list) and value and all(is_int(v) for v in value) and \
                    (len(value) * a) % b == 0 and 0 < len(value) * a // b != len(value):
                size = len(value) * a // b  # shortened, or lengthened by its last item
                out.append((key, parent, value[:size] + [value[-1]] * (size - len(value))))
    seen, unique = set(), []
    for change in out:
        if repr(change) not in seen:
            seen.add(repr(change))
            unique.append(change)
    return unique


def with_value(hf_config, key, parent, value):
    """Set one key of the loaded config (a nested *_config dict's with `parent`)."""
    if parent is None:
        setattr(hf_config, key, value)
    else:
        getattr(hf_config, parent)[key] = value


def snapshot(hf_config):
    return copy.deepcopy(hf_config.__dict__)


def restore(hf_config, saved):
    hf_config.__dict__.clear()
    hf_config.__dict__.update(copy.deepcopy(saved))


def name_the_keys(config, saved, shapes, stage, problem, started):
    """Each change of one key of the drafter's config as loaded (`saved`, before the first
    build wrote to it) that makes the checkpoint load whole, every layer parameter given a
    weight and no tensor thrown away: ([(dotted key, its value, the value that loads)], at
    most 3: more than one, and any may be the key the config got wrong; whether every
    candidate was tried before the time ran out)."""
    hf_config = config.speculative_config.draft_model_config.hf_config
    target = getattr(config.model_config, "hf_text_config", None) or \
        config.model_config.hf_config
    restore(hf_config, saved)
    found, complete = [], True
    for key, parent, value in candidates(hf_config, target, stage, problem, shapes):
        if len(found) >= 3:
            break
        if _time.monotonic() - started > SEARCH_S:
            complete = False
            break
        restore(hf_config, saved)
        with_value(hf_config, key, parent, value)
        worked = build_and_load(config, shapes) is None
        if worked:
            found.append((("%s.%s" % (parent, key) if parent else key), old_value(
                saved, key, parent), value))
    restore(hf_config, saved)
    return found, complete


def old_value(saved, key, parent):
    return saved.get(key) if parent is None else (saved.get(parent) or {}).get(key)


def quoted_keys(directory, exc):
    """The keys of the drafter's config.json whose value (or an item of it) the error
    quotes: what a refusal of the server's config is about, when it is the drafter's."""
    import re
    try:
        data = json.loads(read_regular(_os.path.join(directory, "config.json"), 1 << 20))
    except Exception:
        return []
    pairs = [(k, v) for k, v in data.items()] if isinstance(data, dict) else []
    pairs += [("%s.%s" % (k, k2), v2) for k, v in list(pairs) if isinstance(v, dict)
              for k2, v2 in v.items()]
    text, out = str(exc), []
    for key, value in pairs:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, (str, int, float)) and not isinstance(item, bool) and \
                    len(str(item)) >= 3 and re.search(
                        r"(?<![\w.])%s(?!\w|\.\w)" % re.escape(str(item)), text):
                out.append(key)
                break
    return out[:5]


META = re.compile(r"meta tensor|device[=:] ?'?meta|on meta|meta device", re.I)


def failed(stage, exc):
    return {"stage": stage, "error": "%s: %s" % (type(exc).__name__, str(exc)[:500])}


def build_one(request):
    directory = request["drafter"]
    started = _time.monotonic()
    out = {"build": request["id"]}
    try:
        shapes = checkpoint_shapes(directory)
    except Exception as exc:
        out.update(failed("checkpoint", exc))
        return out
    if not shapes:
        out["skipped"] = "no *.safetensors in the drafter's directory"
        return out
    out["tensors"] = len(shapes)
    try:
        config = server_config(request)
    except Exception as exc:
        out.update(failed("config", exc))
        try:  # the drafter's, only if the target alone makes a config
            server_config(request, speculative=False)
        except Exception as alone:
            out.update(stage="config-target", target_error="%s: %s" % (
                type(alone).__name__, str(alone)[:300]))
            return out
        out["quoted"] = quoted_keys(directory, exc)
        return out
    fake_groups()
    hf_config = config.speculative_config.draft_model_config.hf_config
    saved = snapshot(hf_config)
    try:
        outcome = build_and_load(config, shapes)
    except Undecided as exc:
        out.update(failed("unsupported", exc))
        return out
    if outcome is None:
        out["loaded"] = True
        out["own_head"] = any("lm_head" in t for t, _, _ in shapes)
        return out
    stage, problem = outcome
    if stage in ("unloaded", "dropped"):
        out.update(stage=stage, names=problem[:20], count=len(problem))
    else:
        at, tensor = where(problem)
        if META.search(str(problem)):
            stage = "meta"  # what a tensor without data cannot do: this child's limit
        out.update(failed(stage, problem), at=at, tensor=tensor)
    if stage in ("model", "weights", "unloaded", "dropped"):
        found, out["searched"] = name_the_keys(config, saved, shapes, stage, problem, started)
        out["keys"] = [{"key": k, "value": v, "loads_with": w} for k, v, w in found]
    return out


def build_each(requests):
    """Each request's build, as its server's runner setting; one build for requests alike
    (servers of one drafter, target and settings)."""
    done = {}
    for request in requests:
        alike = json.dumps(dict((k, v) for k, v in request.items() if k != "id"),
                           sort_keys=True)
        if alike not in done:
            previous = _os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
            if request.get("use_v2_model_runner") is not None:
                _os.environ["VLLM_USE_V2_MODEL_RUNNER"] = request["use_v2_model_runner"]
            try:
                done[alike] = build_one(request)
            except Exception as exc:
                done[alike] = dict(failed("fleetcheck", exc))
            finally:
                if previous is None:
                    _os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
                else:
                    _os.environ["VLLM_USE_V2_MODEL_RUNNER"] = previous
        say(**dict(done[alike], build=request["id"]))


build_each(BUILDS)
'''


def build_requests(served, directories):
    """[request] for each server of a DFlash drafter in `directories` whose target is a
    directory, by the server's id ("pid:N", as drafter_run's questions): what the child
    needs to make that server's config (its runner as its own VLLM_USE_V2_MODEL_RUNNER
    says, else this install's default)."""
    out = []
    for server in served.get("servers", []):
        drafter = (server.get("drafter_model") or {}).get("dir")
        target = (server.get("target_model") or {}).get("dir")
        if str(server.get("method") or "").lower() != "dflash" or not drafter or \
                not target or drafter not in directories:
            continue
        tokens = server.get("num_speculative_tokens")
        out.append({"id": "pid:%s" % server.get("pid"), "drafter": drafter,
                    "target": target, "method": "dflash",
                    "num_speculative_tokens": tokens if isinstance(tokens, int) else None,
                    "max_model_len": server.get("max_model_len") if isinstance(
                        server.get("max_model_len"), int) else None,
                    "use_v2_model_runner": (server.get("env") or {}).get(
                        "VLLM_USE_V2_MODEL_RUNNER")})
    return out

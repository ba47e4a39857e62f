"""A server's own log as a runtime witness: where it lives (the process's stdout or
stderr when they are files, the file handlers of a logging config it names, the journal
when its stdout is a journal socket), read in bounds (the head, where start-up is, and the
tail, where the live metrics are), and its lines read by the install's own format
strings, never by messages kept here.

The format strings come from the install's code (`ast`): each is the `logger.*()` call
that prints one value, told by what it prints:
- the aux layer ids: the call printing a variable assigned from a function of the
  install that reads `target_layer_ids` (the conversion dflash-layer-offset judged);
- the engine's config: the call printing `vllm_config` (its SpeculativeConfig repr);
- the live acceptance: the call printing `mean_acceptance_length`;
- the V2 runner: the call guarded by `use_v2_model_runner`;
- fatal lines: the messages the drafter's module raises.
Only the parsed values and the lines that decided leave the host, secrets redacted."""

import bisect
import os
import re

from fleetcheck.probe.files import ProbeFileError, expand_globs, open_for, read_bytes
from fleetcheck.probe.servers import SECRET_WORDS

HEAD_BYTES = 1024 * 1024  # start-up: vLLM's first lines are within a few hundred KB
TAIL_BYTES = 1024 * 1024  # the live metrics, every VLLM_LOG_STATS_INTERVAL
MAX_LINE = 600
MAX_SPEC = 4096  # characters of a SpeculativeConfig(...) repr read
MAX_FATAL = 5
# what tells each line apart: the name of what it prints (or guards it), not its words
ENGINE_ARG = "vllm_config"
METRICS_ARG = "mean_acceptance_length"
RUNNER_GUARD = "use_v2_model_runner"
LOG_FILES = ("vllm/v1/engine/core.py", "vllm/v1/spec_decode/metrics.py",
             "vllm/v1/worker/*worker.py")
LOG_CALLS = ("info", "info_once", "warning", "warning_once", "debug", "error", "log_fn")
LOG_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(LOG_CALLS))  # a line that may hold such a call
CONVERSIONS = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[sdifrxgeEG%]")
TIME = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b")
REDACT = re.compile(r"""(['"]?[\w.-]*(?:%s)[\w.-]*['"]?\s*[:=]\s*)('[^']*'|"[^"]*"|[^\s,)}]+)"""
                    % "|".join(SECRET_WORDS), re.IGNORECASE)


def redacted(line):
    """A log line as it may leave the host: values of keys named like secrets hidden
    (`'api_key': 'sk-...'` in a `non-default args` line), cut to MAX_LINE."""
    if len(line) > MAX_LINE:  # cut first: the redaction's cost grows with the line
        line = line[:MAX_LINE] + "..."
    return REDACT.sub(lambda m: m.group(1) + "'***'", line)


def format_parts(fmt):
    """A printf format string as (literals, conversions): literals[i] comes before
    conversion i (its type letter), and one more literal ends the format."""
    literals, conversions, text, at = [], [], "", 0
    for match in CONVERSIONS.finditer(fmt):
        text += fmt[at:match.start()]
        if match.group(0) == "%%":
            text += "%"
        else:
            literals.append(text)
            conversions.append(match.group(0)[-1])
            text = ""
        at = match.end()
    literals.append(text + fmt[at:])
    return literals, conversions


NUMBERS = {"d": re.compile(r"-?\d+$"), "i": re.compile(r"-?\d+$"),
           "f": re.compile(r"[-+0-9.naife]+$")}
MAX_STARTS = 3  # occurrences of a format's first literal tried on one line


def match_format(literals, conversions, line):
    """The values a line printed by the format, or None. Each literal is found with
    str.find after the one before (a conversion takes the text up to the next literal;
    the last one, when nothing follows it, the rest of the line): linear in the line, so
    no format, whoever wrote it, can make a line cost more than a scan."""
    start = -1
    for _ in range(MAX_STARTS):
        start = line.find(literals[0], start + 1)
        if start < 0:
            return None
        values = match_after(literals, conversions, line, start + len(literals[0]))
        if values is not None:
            return values
    return None


def match_after(literals, conversions, line, at):
    values = []
    for index, conversion in enumerate(conversions):
        following = literals[index + 1]
        if not following:
            end = len(line) if index == len(conversions) - 1 else at
        else:
            end = line.find(following, at)
            if end < 0:
                return None
        value = line[at:end]
        number = NUMBERS.get(conversion) or (NUMBERS["f"] if conversion in "eEgG" else None)
        if number is not None and not number.match(value):
            return None
        values.append(value)
        at = end + len(following)
    return values


def constant_text(node, ast):
    """A message as a printf format: a str constant (implicit concatenation included),
    `+` of such parts, an f-string (its fields as %s), `"..." % args` (its format), else
    None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value.replace("%", "%%") if isinstance(v, ast.Constant) else "%s"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = constant_text(node.left, ast), constant_text(node.right, ast)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return constant_text(node.left, ast)
    return None


def needle(fmt):
    """The longest literal part of a format: a line without it cannot match."""
    return max(CONVERSIONS.split(fmt), key=len)


def arg_name(node, ast):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def lines_matching(text, pattern):
    """Sorted numbers (1-based) of the lines where `pattern` matches."""
    return sorted(set(text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)))


def spans_any(node, lines):
    """Whether the node's lines hold one of `lines` (nodes without lines: always)."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if first is None or last is None:
        return True
    at = bisect.bisect_left(lines, first)
    return at < len(lines) and lines[at] <= last


def logger_calls(tree, ast, lines):
    """(call, enclosing function, guards' source names) of every logger call; only the
    nodes spanning `lines` (where a logger call's name is in the text) are visited, so a
    large module costs its parse and a walk of the few functions that log."""
    found = []

    def visit(node, function, guards):
        body_guards = guards
        if isinstance(node, ast.If):
            body_guards = guards + [n.attr if isinstance(n, ast.Attribute) else
                                    getattr(n, "id", "") for n in ast.walk(node.test)]
        for child in ast.iter_child_nodes(node):
            if not spans_any(child, lines):
                continue
            inner_guards = body_guards if isinstance(node, ast.If) and child in node.body \
                else guards
            if isinstance(child, ast.Call) and isinstance(child.func, (ast.Attribute, ast.Name)) \
                    and arg_name(child.func, ast) in LOG_CALLS and child.args:
                found.append((child, function, inner_guards))
            visit(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                  else function, inner_guards)

    visit(tree, None, [])
    return found


def functions_reading(tree, key, text, ast):
    """Names of the functions whose code holds the string constant `key`: only those
    spanning a line where it is quoted are walked."""
    lines = lines_matching(text, re.compile("[\"']%s[\"']" % re.escape(key)))
    names = set()
    if not lines:
        return names

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt) or not spans_any(child, lines):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    reads_key(child, key, ast):
                names.add(child.name)
            visit(child)

    visit(tree)
    return names


def reads_key(function, key, ast):
    return any(isinstance(n, ast.Constant) and n.value == key for n in ast.walk(function))


def assigned_before(function, name, line, ast):
    """The value last assigned to `name` in `function` before `line`, or None."""
    best = None
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and node.lineno < line and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.value if best is not None else None


def templates_of(rel, text, key, ast):
    """{kind: [template()]} of one source file."""
    out = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return out
    converting = functions_reading(tree, key, text, ast) if key else set()
    for call, function, guards in logger_calls(tree, ast, lines_matching(text, LOG_CALL)):
        fmt = constant_text(call.args[0], ast)
        if fmt is None:
            continue
        names = [arg_name(a, ast) for a in call.args[1:]]
        kind = None
        if ENGINE_ARG in names:
            kind = "engine"
        elif METRICS_ARG in names:
            kind = "metrics"
        elif not names and RUNNER_GUARD in guards:
            kind = "runner_v2"
        elif function is not None and len(names) == 1 and names[0] and converting:
            value = assigned_before(function, names[0], call.lineno, ast)
            if isinstance(value, ast.Call) and arg_name(value.func, ast) in converting:
                kind = "aux_layers"
        if kind:
            out.setdefault(kind, []).append(template(rel, call.lineno, fmt, names))
    return out


def template(rel, line, fmt, args):
    """One format string of the install, with what finds its lines: its parts, split
    here (never taken as given), and its longest literal part."""
    literals, conversions = format_parts(fmt)
    return {"file": rel, "line": line, "format": fmt, "literals": literals,
            "conversions": conversions, "args": args, "needle": needle(fmt)}


def raised_messages(rel, text, ast):
    """The messages `raise X("...")` statements of the drafter's module carry."""
    out = []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            fmt = constant_text(node.exc.args[0], ast)
            if fmt and len(needle(fmt)) >= 20:  # a message, not a word
                out.append(template(rel, node.lineno, fmt, []))
    return out


def install_templates(code_root, plan, drafter_module):
    """The format strings this install prints the witnessed values with."""
    import ast  # only when a server has a log
    out = {}
    walks = {}
    key_files = []
    for signature in plan.get("signatures") or []:
        for finder in (signature.get("find") or {}).values():
            if finder.get("kind") == "key-offset" or (
                    finder.get("kind") == "run" and finder.get("question") == "offset"):
                key_files.append((finder.get("key") or "target_layer_ids",
                                  finder.get("files") or []))
    sources = [(None, list(LOG_FILES))] + key_files
    seen = set()
    for key, patterns in sources:
        for rel in expand_globs(code_root, patterns, walks):
            if (rel, key) in seen or not rel.endswith(".py"):
                continue
            seen.add((rel, key))
            try:
                data = read_bytes(os.path.join(code_root, rel))
            except ProbeFileError:
                continue
            if key and key.encode() not in data:
                continue
            for kind, found in templates_of(rel, data.decode("utf-8", "replace"), key,
                                            ast).items():
                for item in found:
                    if item not in out.setdefault(kind, []):
                        out[kind].append(item)
    if drafter_module:
        try:
            text = read_bytes(os.path.join(code_root, drafter_module)).decode("utf-8", "replace")
            out["fatal"] = raised_messages(drafter_module, text, ast)
        except ProbeFileError:
            pass
    return out


def log_places(pid, env, argv, owner):
    """[(source, path to open, path to show)] where this server's log may be, in the
    order they are tried (stdout and stderr are opened through /proc: a deleted or
    renamed file still holds what the server wrote)."""
    places, inodes = [], set()
    for fd in (1, 2):
        link = "/proc/%d/fd/%d" % (pid, fd)
        try:
            info = os.stat(link)
            target = os.readlink(link)
        except OSError:
            continue
        import stat
        if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) not in inodes:
            inodes.add((info.st_dev, info.st_ino))
            places.append(("fd %d (%s)" % (fd, target), link, target))
        elif fd == 1 and target.startswith("socket:") and journal_stream(pid):
            places.append(("journal _PID=%d" % pid, None, None))
    config = env.get("VLLM_LOGGING_CONFIG_PATH")
    for i, arg in enumerate(argv):
        if arg == "--log-config-file" and i + 1 < len(argv):
            config = config or argv[i + 1]
    if config:
        for handler, filename in logging_config_files(config, owner):
            places.append(("logging config %s, handler %s" % (config, handler), filename,
                           filename))
    return places


def journal_stream(pid):
    """Whether the journal holds this process's output: systemd says so in its
    environment (JOURNAL_STREAM), and journalctl is here to read it."""
    from fleetcheck.probe.install import which
    try:
        data = read_bytes("/proc/%d/environ" % pid, 1024 * 1024)
    except ProbeFileError:
        return False
    return b"JOURNAL_STREAM=" in data and which("journalctl") is not None


def logging_config_files(path, owner):
    """(handler, filename) of the file handlers of a logging.config dictConfig JSON."""
    import json
    try:
        config = json.loads(read_bytes(path, 1024 * 1024, owner).decode("utf-8", "replace"))
    except (ProbeFileError, ValueError):
        return []
    handlers = config.get("handlers") if isinstance(config, dict) else None
    if not isinstance(handlers, dict):
        return []
    return [(name, h["filename"]) for name, h in sorted(handlers.items())
            if isinstance(h, dict) and isinstance(h.get("filename"), str)]


def read_bounded(path, owner):
    """(head, tail or None, size): the first HEAD_BYTES, and the last TAIL_BYTES when the
    file is larger, read only where the server's owner could read it."""
    fd = open_for(path, owner)
    try:
        size = os.fstat(fd).st_size
        head = os.read(fd, HEAD_BYTES)
        tail = None
        if size > HEAD_BYTES:
            os.lseek(fd, max(HEAD_BYTES, size - TAIL_BYTES), 0)
            tail = os.read(fd, TAIL_BYTES)
        return head, tail, size
    finally:
        os.close(fd)


def read_journal(pid, deadline):
    import time
    from fleetcheck.probe.child import run_child
    from fleetcheck.probe.trust import RunAs
    left = min(5.0, deadline - time.monotonic() - 1)
    if left <= 0:
        return None
    out, _, code, _ = run_child(["journalctl", "_PID=%d" % pid, "-o", "cat", "--no-pager"],
                                left, dict(os.environ), RunAs())
    return out if code == 0 else None


def parse_lines(lines, templates):
    """What the lines say, by the install's templates: each value with the line that
    decided it (numbered as read)."""
    out = {"startups": 0, "fatal": []}
    # every format's longest literal, looked for first (str's own search, linear): most
    # lines of a busy log hold none
    needles = list(set(t["needle"] for items in templates.values() for t in items))
    for number, line in lines:
        if not any(n in line for n in needles):
            continue
        for kind, items in templates.items():
            for format_of in items:
                if format_of["needle"] not in line:
                    continue
                values = match_format(format_of["literals"], format_of["conversions"], line)
                if values is None:
                    continue
                shown = {"line": number, "text": line,  # redacted once kept, below
                         "format": "%s:%d" % (format_of["file"], format_of["line"])}
                if kind == "engine":
                    out["startups"] += 1
                    spec = re.search(r"SpeculativeConfig\(([^)]*)\)", line)
                    # a few hundred characters in vLLM's repr; bounded, and each key
                    # tried once per word (no quadratic retries inside a long word)
                    shown["spec"] = dict((k, v.strip("'\"")) for k, v in re.findall(
                        r"(?<!\w)(\w+)=('(?:[^'\\]|\\.)*'|[^,]+)", spec.group(1)[:MAX_SPEC])) \
                        if spec else None
                    out["engine"] = shown
                elif kind == "aux_layers":
                    shown["ids"] = [int(n) for n in re.findall(r"-?\d+", values[0])] \
                        if values else []
                    out.setdefault("aux_layers", shown)
                elif kind == "metrics":
                    shown["values"] = dict(zip([a or "?" for a in format_of["args"]],
                                               values))
                    stamp = TIME.search(line)
                    shown["time"] = stamp.group(1) if stamp else None
                    out["metrics"] = shown
                elif kind == "runner_v2":
                    out["runner_v2"] = shown
                elif kind == "fatal" and len(out["fatal"]) < MAX_FATAL:
                    out["fatal"].append(shown)
                break
    for kept in [out.get(k) for k in ("engine", "aux_layers", "metrics", "runner_v2")] + \
            out["fatal"]:
        if kept is not None:
            kept["text"] = redacted(kept["text"].strip())
    return out


def numbered(data, first):
    for offset, line in enumerate(data.decode("utf-8", "replace").splitlines()):
        yield first + offset, line


def read_place(pid, source, path, owner, deadline):
    """(head, tail or None, size) of one place, or None when it cannot be read (the
    reason added to `source`'s words by the caller)."""
    if path is None:
        data = read_journal(pid, deadline)
        if data is None:
            raise ProbeFileError("journalctl gave nothing")
        return data[:HEAD_BYTES], data[-TAIL_BYTES:] if len(data) > HEAD_BYTES else None, \
            len(data)
    return read_bounded(path, owner)


def log_facts(source, shown, head, tail, size, templates, tried):
    """What one read log says: its head (numbered from line 1) and, when only the ends
    were read, its tail (lines numbered None), parsed by the install's templates. Shared
    with the controller, which reads a container engine's log (fleetcheck/engine_logs.py)."""
    if tail is not None and not head.endswith(b"\n"):
        head = head[:head.rfind(b"\n") + 1]
    lines = list(numbered(head, 1))
    head_lines = len(lines)
    if tail is not None:
        tail = tail[tail.find(b"\n") + 1:]
        lines += [(None, text) for _, text in numbered(tail, 0)]
    out = {"source": source, "path": shown, "bytes": size, "lines_read": len(lines),
           "head_lines": head_lines, "cut": tail is not None, "tried": tried}
    out.update(parse_lines(lines, templates))
    return out


def server_log(pid, places, owner, templates, deadline):
    """The log facts of one server: the source read, how much, and what it says."""
    tried = []
    for source, path, shown in places:
        try:
            head, tail, size = read_place(pid, source, path, owner, deadline)
        except ProbeFileError as exc:
            tried.append("%s: %s" % (source, exc))
            continue
        return log_facts(source, shown, head, tail, size, templates, tried)
    return {"source": None, "tried": tried}


def container_stream(pid):
    """Whether this server writes where the container's first process does (the same
    pipe or terminal as /proc/1/fd/1): what the container engine keeps as its log."""
    try:
        mine, first = os.readlink("/proc/%d/fd/1" % pid), os.readlink("/proc/1/fd/1")
    except OSError:
        return False
    return mine == first and (not mine.startswith("/") or mine.startswith("/dev/pts/"))


def attach_logs(served, plan, code_root, drafter_module, deadline):
    """Each server's log facts (served["servers"][i]["log"]), and the install's templates
    (served["log_templates"]) once some server has a log to read. Where the plan says
    the container engine's log can be read (the probe runs in a container) and a server
    writes to the container's own stream, its log is marked `engine_stream` and the whole
    templates go back (served["log_formats"]) for the controller to read it by."""
    from fleetcheck.probe.config_file_args import with_config_file
    from fleetcheck.probe.servers import process_cwd, process_table, server_script
    from fleetcheck.probe.trust import owner_of
    argvs = dict(process_table() or [])
    engine_log = bool((plan.get("served") or {}).get("engine_log"))
    found = []
    for entry in served["servers"]:
        pid = entry["pid"]
        argv = argvs.get(pid) or []
        owner = owner_of(pid)
        script = server_script(argv) if argv else None
        if script is not None:
            argv = with_config_file(pid, argv, process_cwd(pid), script[0], owner)[0]
        places = log_places(pid, entry.get("env") or {}, argv, owner)
        found.append((entry, owner, places, engine_log and not places and
                      container_stream(pid)))
    if not any(places or stream for _, _, places, stream in found):
        for entry, _, _, _ in found:
            entry["log"] = {"source": None, "tried": []}
        return
    templates = install_templates(code_root, plan, drafter_module)
    served["log_templates"] = dict((kind, ["%s:%d" % (t["file"], t["line"]) for t in items])
                                   for kind, items in templates.items())
    for entry, owner, places, stream in found:
        entry["log"] = server_log(entry["pid"], places, owner, templates, deadline)
        if stream:
            entry["log"]["engine_stream"] = True
            served["log_formats"] = dict(
                (kind, [dict((k, t[k]) for k in ("file", "line", "format", "args"))
                        for t in items]) for kind, items in templates.items())

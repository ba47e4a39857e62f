"""install-* verdicts: is the install whole, and is it what its metadata says it is?

The incident's install timed out mid-way; operators also hand-patch site-packages and
forget. Each finding names the file, so the fix (reinstall, remove a stash, wait for a
build) is obvious from the report.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.version import bare_commit, misfit_text, no_install_reason, vcs_commit
from fleetcheck.checks.verdict import check_result
from fleetcheck.results import CheckResult, Evidence
from fleetcheck.text import byte_size, counted
from fleetcheck.versions import pep440
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Facts, Integrity, Process, Record, Server

MAX_EVIDENCE = 12
KNOWN_LOCAL_SUFFIX = re.compile(r"^(precompiled|cu\d+|cpu|rocm[\d.]*|xpu|tpu|hpu|neuron|"
                                r"torch[\d.]+|empty)$")
GPU_RUNTIME_LIB = re.compile(r"lib(c10|torch|cuda|cudart|nccl|cublas|cudnn|nvrtc|nvToolsExt|"
                             r"cupti|cusparse|cufft|curand|cusolver|nvJitLink|caffe2|shm)"
                             r"[\w.-]*\.so[\w.]*: cannot open shared object file")
# how the RECORD check's fail message names each kind of file, after "1 file" / "2 files"
RECORD_FINDINGS = {"missing": "missing", "size": "with a different size",
                   "hash": "with a different sha256", "unreadable": "unreadable"}

TITLES = {
    "install-record": "Files match the dist-info RECORD (sizes; sha256 of the checked files)",
    "install-leftovers": "No pip stash (~llm) or uv .tmp dir or file left by an interrupted install",
    "install-metadata": "One dist-info, package present, version and commit agree",
    "install-import": "Compiled modules load in the venv's interpreter",
    "install-in-progress": "No install or build still running against this venv",
    "install-running": "Running vLLM servers started after the checked install last changed",
}


def result(check_id: str, status: str, message: str,
           evidence: list[Evidence] | None = None, fix: str | None = None,
           **details: Any) -> CheckResult:
    """An install-* verdict: the one builder, with this family's titles and evidence cap."""
    return check_result(check_id, TITLES[check_id], status, message, fix=fix,
                        evidence=evidence or (), details=details, max_evidence=MAX_EVIDENCE)


def versions_agree(metadata: str, version_file: str) -> bool:
    """Equal as PEP 440 versions once the build labels wheels add to METADATA only
    (+precompiled, +cu129, ...) are set aside; texts that are not PEP 440 must be equal."""
    m, v = pep440(metadata), pep440(version_file)
    if m is None or v is None:
        return metadata == version_file

    def labels(version: Any) -> list[str]:
        return [p for p in (version.local or "").split(".") if p and
                not KNOWN_LOCAL_SUFFIX.match(p)]

    return pep440(m.public) == pep440(v.public) and labels(m) == labels(v)


def record_scope(record: Record) -> str:
    """What the RECORD check looked at, in words: every file RECORD gives a size and a hash
    for is checked for size, some (all, with --deep) by sha256 too; RECORD's other rows
    have nothing to check."""
    hashed = "all of them" if record.deep and record.hashed == record.checked else \
        "%d of them" % record.hashed
    text = "%s checked for size (every file RECORD gives a size and hash for), %s also by " \
        "sha256 (%s%s)" % (counted(record.checked, "file"), hashed,
                           byte_size(record.hashed_bytes), ", --deep" if record.deep else "")
    others = record.unverifiable_rows or 0
    if others:
        text += "; %s of RECORD %s no hash to check (RECORD itself, compiled bytecode, " \
            "rows uv healed)" % (counted(others, "other row"), "has" if others == 1 else "have")
    return text


def check_record(integrity: Integrity) -> CheckResult:
    cid = "install-record"
    editable = integrity.editable
    if editable is not None:
        problems = []
        if not editable.exists:
            problems.append(Evidence(editable.source, None, "source tree has no vllm/ package"))
        elif not editable.version_file:
            problems.append(Evidence(editable.source + "/vllm/_version.py", None, "missing"))
        if editable.exists and not editable.compiled:
            problems.append(Evidence(editable.source + "/vllm", None,
                                     "no compiled vllm/*.so: the build did not finish"))
        if problems:
            return result(cid, Status.FAIL,
                          "editable install from %s is incomplete (RECORD covers "
                          "only the finder, so the source tree was checked)" % editable.source,
                          problems)
        return result(cid, Status.PASS, "editable install from %s: RECORD covers only the finder; "
                      "source tree has _version.py and %s"
                      % (editable.source, counted(len(editable.compiled), "compiled module")),
                      [Evidence(editable.source + "/vllm/" + n, None, "present")
                       for n in editable.compiled[:3]])
    record = integrity.record
    if record is None:
        return result(cid, Status.FAIL, "no vllm dist-info, so no RECORD to verify against")
    if record.error:
        return result(cid, Status.FAIL, "RECORD cannot be read: %s" % record.error,
                      [Evidence(record.dist_info + "/RECORD", None, record.error)])
    evidence: list[Evidence] = []
    for item in record.missing.files:
        evidence.append(Evidence(item.file, None, "missing"))
    for mismatch in record.size.files:
        evidence.append(Evidence(mismatch.file, None, "size %d bytes, RECORD says %d"
                                 % (mismatch.actual, mismatch.expected)))
    for item in record.hash.files:
        evidence.append(Evidence(item.file, None, "sha256 differs from RECORD (edited?)"))
    for unreadable in record.unreadable.files:
        evidence.append(Evidence(unreadable.file, None, "unreadable: %s" % unreadable.error))
    counts = {"missing": record.missing.count, "size": record.size.count,
              "hash": record.hash.count, "unreadable": record.unreadable.count}
    numbers = dict(rows=record.rows, checked=record.checked, hashed=record.hashed,
                   hashed_bytes=record.hashed_bytes, deep=record.deep,
                   elapsed_s=record.elapsed_s, **counts)
    scope = record_scope(record)
    if any(counts.values()):
        said = ", ".join("%s %s" % (counted(n, "file"), RECORD_FINDINGS[k])
                         for k, n in counts.items() if n)
        return result(cid, Status.FAIL, "install does not match RECORD: %s. Reinstall vllm. "
                      "Scope: %s" % (said, scope), evidence, **numbers)
    return result(cid, Status.PASS, "every file matches RECORD: %s" % scope, **numbers)


def check_leftovers(facts: Facts) -> CheckResult:
    """pip's stash and uv's temporary directories and files at the top of site-packages,
    and uv's inside the package directories RECORD names (where uv writes, so where a
    killed `uv pip install` leaves them: vllm/parser/.tmpTNKz4p, a file uv 0.13 was
    writing; .tmpXXXXXX directories from older uv)."""
    install = facts.install
    site = install.site_packages or "site-packages"
    stashes = install.stash_dirs
    inside = facts.integrity.leftovers if facts.integrity is not None else None
    tmps = install.tmp_dirs + (inside.tmp_dirs if inside is not None else [])
    tmp_files = install.tmp_files + (inside.tmp_files if inside is not None else [])
    unlisted = inside.tmp_count - len(inside.tmp_dirs) - len(inside.tmp_files) \
        if inside is not None else 0
    looked = "its top level and the %s RECORD names files in" % counted(
        inside.dirs_listed, "directory", "directories") \
        if inside is not None else "its top level (RECORD unread: not the package directories)"
    if stashes or tmps or tmp_files:
        said = []
        if stashes:
            said.append("pip's stash of a replaced package (%s)" % ", ".join(stashes))
        more = " and %d more" % unlisted if unlisted else ""
        if tmps:
            said.append("uv's temporary directories (%s%s)" % (
                ", ".join(tmps), more if not tmp_files else ""))
        if tmp_files:
            said.append("uv's temporary files (%s%s)" % (", ".join(tmp_files), more))
        return result("install-leftovers", Status.FAIL,
                      "%s left in %s: an install was killed while writing vllm. Reinstall "
                      "vllm, then remove them." % (" and ".join(said), site),
                      [Evidence("%s/%s" % (site, s), None,
                                "left behind by an interrupted pip install") for s in stashes]
                      + [Evidence("%s/%s" % (site, t), None,
                                  "left behind by an interrupted uv install") for t in tmps]
                      + [Evidence("%s/%s" % (site, t), None,
                                  "a file an interrupted uv install was writing")
                         for t in tmp_files])
    return result("install-leftovers", Status.PASS,
                  "no pip stash (~llm) or uv .tmp dir or file in %s (%s)" % (site, looked))


def check_metadata(facts: Facts) -> CheckResult:
    install = facts.install
    dists = install.dist_infos
    version_file = facts.version_file
    problems: list[Evidence] = []
    if len(dists) > 1:
        for dist in dists:
            problems.append(Evidence(dist.path, None, "one of %d vllm dist-infos (version %s)"
                                     % (len(dists), dist.version or "unknown")))
    if dists and not install.package_dir and not install.editable_source:
        problems.append(Evidence(dists[0].path, None,
                                 "dist-info present but the vllm/ package directory is missing"))
    if install.package_dir and not dists:
        problems.append(Evidence(install.package_dir, None,
                                 "vllm/ present with no vllm dist-info (copied in, or the "
                                 "install stopped before writing metadata)"))
    for dist in dists:
        for error in dist.errors:
            problems.append(Evidence(dist.path, None, error))
    vpath = version_file.path
    lines = version_file.lines
    if vpath and not version_file.exists:
        problems.append(Evidence(vpath, None, "missing: version and commit unknown, suspect build"))
    elif version_file.error:
        problems.append(Evidence(vpath, None, "unreadable: %s" % version_file.error))
    elif vpath:
        problems += [Evidence(vpath, m.line, misfit_text(m)) for m in version_file.misfits]
        version = version_file.version
        if version is None:
            if not any(m.field == "version" for m in version_file.misfits):
                problems.append(Evidence(vpath, None, "assigns no __version__: suspect build"))
        elif version.strip().lower() in ("", "dev", "unknown"):
            problems.append(Evidence(vpath, lines.get("version"),
                                     "__version__ is %r: suspect build" % version))
        elif dists and dists[0].version and not versions_agree(dists[0].version, version):
            problems.append(Evidence(vpath, lines.get("version"),
                                     "__version__ %s but METADATA says %s"
                                     % (version, dists[0].version)))
    vcs = vcs_commit(dists[0]) if dists else None
    commit_id = version_file.commit_id
    commit = bare_commit(commit_id) if commit_id else None
    if isinstance(vcs, str) and commit is not None and not vcs.startswith(commit):
        # the field as the file writes it (g-prefixed): the evidence quotes _version.py
        problems.append(Evidence(vpath, lines.get("commit_id"), "__commit_id__ %s but "
                                 "direct_url.json says commit %s" % (commit_id, vcs)))
    if problems:
        return result("install-metadata", Status.FAIL,
                      "the install's metadata does not hold together (%s)"
                      % counted(len(problems), "finding"), problems)
    meta = dists[0].version if dists else None
    shims = install.shims
    return result("install-metadata", Status.PASS,
                  "one dist-info (%s); METADATA %s, _version.py %s, commit %s agree%s"
                  % (os.path.basename(dists[0].path) if dists else "-", meta or "-",
                     version_file.version or "-", commit or vcs or "-",
                     "; metadata only, owning no files: %s" % ", ".join(shims)
                     if shims else ""),
                  [Evidence(os.path.join(install.site_packages or "", n), None,
                            "metadata only (no RECORD): not an install") for n in shims])


def check_import(integrity: Integrity, enabled: bool) -> CheckResult:
    cid = "install-import"
    facts = integrity.imports
    if not enabled or facts is None:
        return result(cid, Status.SKIP, "import check disabled (--no-import-check, or the "
                      "playbook's integrity: import_check: false)")
    if facts.skipped:
        return result(cid, Status.SKIP, "the install's code was not run: %s" % facts.skipped)
    if facts.error:
        return result(cid, Status.FAIL, "the venv's interpreter could not load anything: %s"
                      % facts.error, [Evidence(facts.interpreter, None, facts.error)])
    if not facts.expected:
        return result(cid, Status.FAIL,
                      "RECORD lists no compiled vllm module: not a complete build")
    torch = facts.torch
    loaded = [m for m in facts.modules if m.ok]
    failed = [m for m in facts.modules if not m.ok]
    needs_absent_torch = [m for m in failed if not facts.torch_installed
                          and GPU_RUNTIME_LIB.search(m.error or "")]
    broken = [m for m in failed if m not in needs_absent_torch]
    evidence = [Evidence(m.module, None, m.error or "") for m in broken]
    numbers = dict(expected=len(facts.expected), loaded=len(loaded), failed=len(broken),
                   elapsed_s=facts.elapsed_s)
    if facts.crashed_in:
        return result(cid, Status.FAIL, "the interpreter died%s while loading %s"
                      % ("" if facts.returncode is None else " (exit %d)" % facts.returncode,
                         facts.crashed_in),
                      [Evidence(facts.crashed_in, None, facts.stderr_tail or "")]
                      + evidence, **numbers)
    if facts.timed_out:
        return result(cid, Status.WARN, "loading compiled modules did not finish%s (stopped; %d "
                      "of %d loaded)" % ("" if facts.timeout_s is None else
                                         " within %gs" % facts.timeout_s, len(loaded),
                                         len(facts.expected)), evidence, **numbers)
    if facts.torch_installed and not torch.ok:
        return result(cid, Status.FAIL, "torch is installed in this venv but does not import: %s"
                      % (torch.detail or "no error text"), evidence, **numbers)
    if broken:
        return result(cid, Status.FAIL,
                      "%d of %d compiled modules fail to load (ABI mismatch or a "
                      "damaged file)" % (len(broken), len(facts.expected)), evidence, **numbers)
    if needs_absent_torch:
        absent = len(needs_absent_torch)
        return result(cid, Status.SKIP, "torch is not installed in this venv, so %s that %s "
                      "libtorch/CUDA could not be loaded (%d loaded fine); install torch to "
                      "check %s" % (counted(absent, "compiled module"),
                                    "links" if absent == 1 else "link", len(loaded),
                                    "it" if absent == 1 else "them"),
                      [Evidence(m.module, None, m.error or "") for m in needs_absent_torch[:3]],
                      **numbers)
    with_torch = "torch is not installed, and none needed it" \
        if facts.torch_installed is False else "torch %s" % (torch.detail or "imports")
    unrunnable = facts.cpu_cannot_run or []
    if unrunnable:
        numbers["cpu_cannot_run"] = len(unrunnable)
    return result(cid, Status.PASS, "%s load%s (%s)%s" % (
        "the compiled module" if len(loaded) == 1 else "all %d compiled modules" % len(loaded),
        "s" if len(loaded) == 1 else "", with_torch,
        "; not loaded, as vLLM would not load them on this CPU: %s (killed by SIGILL: "
        "instructions this CPU lacks)" % ", ".join(unrunnable) if unrunnable else ""),
        [Evidence(m, None, "SIGILL: an ISA build for another CPU") for m in unrunnable],
        **numbers)


def check_in_progress(integrity: Integrity) -> CheckResult:
    cid = "install-in-progress"
    facts = integrity.in_progress
    if facts.error:
        return result(cid, Status.WARN, "could not look for running installs: %s" % facts.error)
    processes = facts.processes
    elsewhere = facts.elsewhere

    def evidence(items: list[Process]) -> list[Evidence]:
        return [Evidence(p.target or p.cwd, None, "pid %d: %s"
                         % (p.pid, p.cmdline)) for p in items]

    if processes:
        return result(cid, Status.FAIL, "%s still running against the checked install (its venv, "
                      "site-packages or source tree): a timed-out client can leave the build "
                      "running on the host; what is on disk may still change"
                      % counted(len(processes), "install/build process",
                                "install/build processes"), evidence(processes + elsewhere),
                      fix="check again once the install has finished")
    if elsewhere:
        return result(cid, Status.WARN,
                      "%s %s vllm elsewhere on this box (%s), not into the checked "
                      "install" % (
                          counted(len(elsewhere), "pip/uv/build process",
                                  "pip/uv/build processes"),
                          "installs" if len(elsewhere) == 1 else "install",
                          ", ".join(sorted({p.target or p.cwd or "?" for p in elsewhere}))),
                      evidence(elsewhere))
    return result(cid, Status.PASS, "no pip/uv/setup.py/cmake/ninja process touches this install")


def known(value: object) -> str:
    """A value a host may not have sent, as a message shows it."""
    return "unknown" if value is None else str(value)


def stamp(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def check_running(facts: Facts, integrity: Integrity) -> CheckResult:
    """A rollout that installs a new build but never restarts the server leaves the old
    code serving: compare each running server with the checked install."""
    cid = "install-running"
    seen = facts.servers
    servers = seen.servers
    if seen.error:
        return result(cid, Status.WARN, "could not look for running servers: %s" % seen.error)
    if not servers:
        return result(cid, Status.SKIP, "no vLLM server process runs on this host")
    install = facts.install
    site = install.site_packages
    checked_site = install.site_real if install.site_real is not None else site
    changed = integrity.changed_at
    changed_at = changed.mtime
    stale: list[tuple[Server, Evidence]] = []
    foreign: list[tuple[Server, Evidence]] = []
    fine: list[tuple[Server, Evidence]] = []
    for server in servers:
        line = "pid %d, started %s, interpreter %s, port %s: %s" % (
            server.pid, stamp(server.started_at), server.interpreter or "unknown",
            known(server.port), server.cmdline or "command line unknown")
        item = (server, Evidence(server.interpreter, None, line))
        if site and checked_site not in (server.real_site_dirs or server.site_dirs):
            foreign.append(item)
        elif changed_at is not None and server.started_at is not None and \
                server.started_at < changed_at:
            stale.append(item)
        else:
            fine.append(item)
    details = {"servers": [{"pid": s.pid, "started_at": s.started_at,
                            "interpreter": s.interpreter, "port": s.port,
                            "site_dirs": s.site_dirs} for s in servers],
               "install_changed_at": changed_at, "changed_file": changed.path,
               "serving_port": seen.serving_port}
    serving = seen.serving_port
    others = [item for item in foreign if item[0].port != serving]
    foreign = [item for item in foreign if item[0].port == serving]
    evidence = [e for _, e in stale + foreign + fine + others]
    also = "; servers of other installs, on other ports than vllm_url's %s (not judged): %s" % (
        known(serving), ", ".join("pid %d port %s (%s)" % (
            s.pid, known(s.port), s.interpreter or "interpreter unknown")
            for s, _ in others)) if others else ""
    if stale or foreign:
        parts = ["pid %d started %s, before the checked install last changed %s (%s): "
                 "restart it to serve the checked code" % (
                     s.pid, stamp(s.started_at), stamp(changed_at),
                     changed.path) for s, _ in stale]
        parts += ["pid %d on the vllm_url port %s runs another interpreter or site-packages "
                  "(%s, %s) than the one checked (%s): restart it to serve the checked code"
                  % (s.pid, known(serving), s.interpreter or "interpreter unknown",
                     ", ".join(s.site_dirs) or "site-packages unknown", site)
                  for s, _ in foreign]
        return result(cid, Status.FAIL, "; ".join(parts) + also, evidence, **details)
    if not fine:
        return result(cid, Status.SKIP, "no vLLM server of the checked install runs on this host"
                      + also, evidence, **details)
    return result(cid, Status.PASS,
                  "%s of the checked install started after it last changed (%s)%s"
                  % (counted(len(fine), "vLLM server"), stamp(changed_at), also), evidence,
                  **details)


JUDGES = {
    "install-record": lambda facts, import_enabled: check_record(facts.integrity),
    "install-leftovers": lambda facts, import_enabled: check_leftovers(facts),
    "install-metadata": lambda facts, import_enabled: check_metadata(facts),
    "install-import": lambda facts, import_enabled: check_import(facts.integrity, import_enabled),
    "install-in-progress": lambda facts, import_enabled: check_in_progress(facts.integrity),
    "install-running": lambda facts, import_enabled: check_running(facts, facts.integrity),
}


def judge_integrity_check(check_id: str, facts: Facts, import_enabled: bool) -> CheckResult:
    """One install-* verdict; the check plan has made sure the integrity facts are there.
    With no install at all, each says why instead."""
    install = facts.install
    if not install.dist_infos and not install.package_dir:
        return result(check_id, Status.ERROR, no_install_reason(facts))
    return JUDGES[check_id](facts, import_enabled)

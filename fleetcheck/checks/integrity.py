"""install-* verdicts: is the install whole, and is it what its metadata says it is?

The incident's install timed out mid-way; operators also hand-patch site-packages and
forget. Each finding names the file, so the fix (reinstall, remove a stash, wait for a
build) is obvious from the report.
"""

from __future__ import annotations

import re
from typing import Any

from fleetcheck.checks.version import no_install_reason
from fleetcheck.results import CheckResult, Evidence

MAX_EVIDENCE = 12
KNOWN_LOCAL_SUFFIX = re.compile(r"^(precompiled|cu\d+|cpu|rocm[\d.]*|xpu|tpu|hpu|neuron|"
                                r"torch[\d.]+|empty)$")
GPU_RUNTIME_LIB = re.compile(r"lib(c10|torch|cuda|cudart|nccl|cublas|cudnn|nvrtc|nvToolsExt|"
                             r"cupti|cusparse|cufft|curand|cusolver|nvJitLink|caffe2|shm)"
                             r"[\w.-]*\.so[\w.]*: cannot open shared object file")

TITLES = {
    "install-record": "Files match the dist-info RECORD (sizes; sha256 of the checked files)",
    "install-leftovers": "No pip stash (~llm) left by an interrupted install",
    "install-metadata": "One dist-info, package present, version and commit agree",
    "install-import": "Compiled modules load in the venv's interpreter",
    "install-in-progress": "No install or build still running against this venv",
}


def result(check_id: str, status: str, message: str,
           evidence: list[Evidence] | None = None, **details: Any) -> CheckResult:
    return CheckResult(id=check_id, title=TITLES[check_id], status=status, message=message,
                       evidence=(evidence or [])[:MAX_EVIDENCE], details=details)


def public_and_local(version: str) -> tuple[str, list[str]]:
    public, _, local = version.partition("+")
    return public, [part for part in re.split(r"[.]", local) if part] if local else []


def versions_agree(metadata: str, version_file: str) -> bool:
    """Equal once the build suffixes wheels add to METADATA only (+precompiled, +cu129, ...)
    are set aside."""
    m_public, m_local = public_and_local(metadata)
    v_public, v_local = public_and_local(version_file)
    strip = lambda parts: [p for p in parts if not KNOWN_LOCAL_SUFFIX.match(p)]
    return m_public == v_public and strip(m_local) == strip(v_local)


def check_record(facts: dict[str, Any], integrity: dict[str, Any]) -> CheckResult:
    cid = "install-record"
    editable = integrity.get("editable")
    if editable:
        problems = []
        if not editable["exists"]:
            problems.append(Evidence(editable["source"], None, "source tree has no vllm/ package"))
        elif not editable["version_file"]:
            problems.append(Evidence(editable["source"] + "/vllm/_version.py", None, "missing"))
        if editable["exists"] and not editable["compiled"]:
            problems.append(Evidence(editable["source"] + "/vllm", None,
                                     "no compiled vllm/*.so: the build did not finish"))
        if problems:
            return result(cid, "fail", "editable install from %s is incomplete (RECORD covers "
                          "only the finder, so the source tree was checked)" % editable["source"],
                          problems)
        return result(cid, "pass", "editable install from %s: RECORD covers only the finder; "
                      "source tree has _version.py and %d compiled module(s)"
                      % (editable["source"], len(editable["compiled"])),
                      [Evidence(editable["source"] + "/vllm/" + n, None, "present")
                       for n in editable["compiled"][:3]])
    record = integrity.get("record")
    if record is None:
        return result(cid, "fail", "no vllm dist-info, so no RECORD to verify against")
    if record.get("error"):
        return result(cid, "fail", "RECORD cannot be read: %s" % record["error"],
                      [Evidence(record["dist_info"] + "/RECORD", None, record["error"])])
    evidence: list[Evidence] = []
    for item in record["missing"]["files"]:
        evidence.append(Evidence(item["file"], None, "missing"))
    for item in record["size"]["files"]:
        evidence.append(Evidence(item["file"], None, "size %d bytes, RECORD says %d"
                                 % (item["actual"], item["expected"])))
    for item in record["hash"]["files"]:
        evidence.append(Evidence(item["file"], None, "sha256 differs from RECORD (edited?)"))
    for item in record["unreadable"]["files"]:
        evidence.append(Evidence(item["file"], None, "unreadable: %s" % item["error"]))
    counts = {k: record[k]["count"] for k in ("missing", "size", "hash", "unreadable")}
    numbers = dict(rows=record["rows"], checked=record["checked"], hashed=record["hashed"],
                   hashed_bytes=record["hashed_bytes"], deep=record["deep"],
                   elapsed_s=record.get("elapsed_s"), **counts)
    scope = "%d of %d RECORD rows checked for size, %d hashed (%.1f MiB)%s" % (
        record["checked"], record["rows"], record["hashed"], record["hashed_bytes"] / 2**20,
        ", deep" if record["deep"] else "")
    if any(counts.values()):
        said = ", ".join("%d %s" % (n, {"missing": "missing", "size": "with a different size",
                                        "hash": "with a different sha256",
                                        "unreadable": "unreadable"}[k])
                         for k, n in counts.items() if n)
        return result(cid, "fail", "install does not match RECORD: %s (%s). Reinstall vllm."
                      % (said, scope), evidence, **numbers)
    return result(cid, "pass", "every file matches RECORD: %s" % scope, [Evidence(
        record["dist_info"] + "/RECORD", None, scope)], **numbers)


def check_leftovers(facts: dict[str, Any]) -> CheckResult:
    install = facts.get("install") or {}
    stashes = install.get("stash_dirs") or []
    if stashes:
        return result("install-leftovers", "fail",
                      "pip's stash of a replaced package is still in site-packages: an install "
                      "was killed while replacing vllm. Reinstall vllm, then remove %s."
                      % ", ".join(stashes),
                      [Evidence("%s/%s" % (install.get("site_packages"), s), None,
                                "left behind by an interrupted pip install") for s in stashes])
    return result("install-leftovers", "pass", "no pip stash (~llm) in %s"
                  % install.get("site_packages"))


def check_metadata(facts: dict[str, Any]) -> CheckResult:
    install = facts.get("install") or {}
    dists = install.get("dist_infos") or []
    version_file = facts.get("version_file") or {}
    problems: list[Evidence] = []
    if len(dists) > 1:
        for dist in dists:
            problems.append(Evidence(dist["path"], None, "one of %d vllm dist-infos (version %s)"
                                     % (len(dists), dist.get("version"))))
    if dists and not install.get("package_dir") and not install.get("editable_source"):
        problems.append(Evidence(dists[0]["path"], None,
                                 "dist-info present but the vllm/ package directory is missing"))
    if install.get("package_dir") and not dists:
        problems.append(Evidence(install["package_dir"], None,
                                 "vllm/ present with no vllm dist-info (copied in, or the "
                                 "install stopped before writing metadata)"))
    for dist in dists:
        for error in dist.get("errors") or []:
            problems.append(Evidence(dist["path"], None, error))
    vpath = version_file.get("path")
    if vpath and not version_file.get("exists"):
        problems.append(Evidence(vpath, None, "missing: version and commit unknown, suspect build"))
    elif version_file.get("error"):
        problems.append(Evidence(vpath, None, "unreadable: %s" % version_file["error"]))
    elif vpath:
        version = version_file.get("version")
        if not isinstance(version, str) or version.strip().lower() in ("", "dev", "unknown"):
            problems.append(Evidence(vpath, None, "__version__ is %r: suspect build" % (version,)))
        elif dists and dists[0].get("version") and not versions_agree(dists[0]["version"], version):
            problems.append(Evidence(vpath, None, "__version__ %s but METADATA says %s"
                                     % (version, dists[0]["version"])))
    direct = (dists[0].get("direct_url") or {}) if dists else {}
    vcs_commit = (direct.get("vcs_info") or {}).get("commit_id") if isinstance(direct, dict) else None
    commit_id = version_file.get("commit_id")
    if isinstance(vcs_commit, str) and isinstance(commit_id, str) and commit_id:
        short = commit_id[1:] if commit_id.startswith("g") else commit_id
        if not vcs_commit.startswith(short):
            problems.append(Evidence(vpath, None, "__commit_id__ %s but direct_url.json says "
                                     "commit %s" % (commit_id, vcs_commit)))
    if problems:
        return result("install-metadata", "fail",
                      "the install's metadata does not hold together (%d finding(s))"
                      % len(problems), problems)
    meta = dists[0].get("version") if dists else None
    return result("install-metadata", "pass",
                  "one dist-info; METADATA %s, _version.py %s, commit %s agree"
                  % (meta, version_file.get("version"), commit_id or vcs_commit or "-"))


def check_import(integrity: dict[str, Any], enabled: bool) -> CheckResult:
    cid = "install-import"
    facts = integrity.get("import")
    if not enabled or facts is None:
        return result(cid, "skip", "import check disabled (--no-import-check)")
    if facts.get("error"):
        return result(cid, "fail", "the venv's interpreter could not load anything: %s"
                      % facts["error"], [Evidence(facts["interpreter"], None, facts["error"])])
    if not facts["expected"]:
        return result(cid, "fail", "RECORD lists no compiled vllm module: not a complete build")
    torch = facts.get("torch") or {}
    loaded = [m for m in facts["modules"] if m["ok"]]
    failed = [m for m in facts["modules"] if not m["ok"]]
    needs_absent_torch = [m for m in failed if not facts.get("torch_installed")
                          and GPU_RUNTIME_LIB.search(m["error"] or "")]
    broken = [m for m in failed if m not in needs_absent_torch]
    evidence = [Evidence(m["module"], None, m["error"] or "") for m in broken]
    numbers = dict(expected=len(facts["expected"]), loaded=len(loaded), failed=len(broken),
                   elapsed_s=facts.get("elapsed_s"))
    if facts.get("crashed_in"):
        return result(cid, "fail", "the interpreter died (exit %s) while loading %s"
                      % (facts.get("returncode"), facts["crashed_in"]),
                      [Evidence(facts["crashed_in"], None, facts.get("stderr_tail") or "")]
                      + evidence, **numbers)
    if facts.get("timed_out"):
        return result(cid, "warn", "loading compiled modules did not finish within %ss "
                      "(stopped; %d of %d loaded)" % (facts["timeout_s"], len(loaded),
                                                      len(facts["expected"])), evidence, **numbers)
    if facts.get("torch_installed") and not torch.get("ok"):
        return result(cid, "fail", "torch is installed in this venv but does not import: %s"
                      % torch.get("detail"), evidence, **numbers)
    if broken:
        return result(cid, "fail", "%d of %d compiled module(s) fail to load (ABI mismatch or a "
                      "damaged file)" % (len(broken), len(facts["expected"])), evidence, **numbers)
    if needs_absent_torch:
        return result(cid, "skip", "torch is not installed in this venv, so %d compiled module(s) "
                      "that link libtorch/CUDA could not be loaded (%d loaded fine); install "
                      "torch to check them" % (len(needs_absent_torch), len(loaded)),
                      [Evidence(m["module"], None, m["error"]) for m in needs_absent_torch[:3]],
                      **numbers)
    return result(cid, "pass", "all %d compiled module(s) load (torch %s)"
                  % (len(loaded), torch.get("detail")), **numbers)


def check_in_progress(integrity: dict[str, Any]) -> CheckResult:
    cid = "install-in-progress"
    facts = integrity.get("in_progress") or {}
    if facts.get("error"):
        return result(cid, "warn", "could not look for running installs: %s" % facts["error"])
    processes = facts.get("processes") or []
    if processes:
        return result(cid, "fail", "%d install/build process(es) still running against this venv "
                      "or a vllm tree: a timed-out client can leave the build running on the "
                      "host; what is on disk may still change" % len(processes),
                      [Evidence(p.get("cwd"), None, "pid %d: %s" % (p["pid"], p["cmdline"]))
                       for p in processes])
    return result(cid, "pass", "no pip/uv/setup.py/cmake/ninja process touches this venv")


def judge_integrity(facts: dict[str, Any], import_enabled: bool) -> list[CheckResult]:
    integrity = facts.get("integrity")
    install = facts.get("install") or {}
    if integrity is None:
        return []
    if not install.get("dist_infos") and not install.get("package_dir"):
        return [result(cid, "error", no_install_reason(facts)) for cid in TITLES]
    return [check_record(facts, integrity), check_leftovers(facts), check_metadata(facts),
            check_import(integrity, import_enabled), check_in_progress(integrity)]

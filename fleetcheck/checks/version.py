"""What vLLM a host has: version, commit (and where the commit came from), how installed.

Read from files the probe brought back; the version only informs, it never decides a fix.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from fleetcheck.results import VllmInfo

DEV_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})")


def primary_dist_info(facts: dict[str, Any]) -> dict[str, Any] | None:
    dists = (facts.get("install") or {}).get("dist_infos") or []
    return dists[0] if dists else None


def install_kind(dist: dict[str, Any] | None) -> str | None:
    """How vLLM got there, from PEP 610 direct_url.json (absent for index installs)."""
    if dist is None:
        return None
    direct = dist.get("direct_url")
    installer = dist.get("installer") or "unknown installer"
    if not isinstance(direct, dict):
        return "index (%s)" % installer
    if direct.get("dir_info", {}).get("editable"):
        return "editable (%s)" % installer
    if "vcs_info" in direct:
        return "vcs (%s)" % installer
    if "archive_info" in direct:
        return "archive (%s)" % installer
    if "dir_info" in direct:
        return "directory (%s)" % installer
    return "unknown (%s)" % installer


def commit_of(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    """The commit and its source: direct_url.json's full sha, else _version.py's
    __commit_id__, else the +g<sha> of a dev version."""
    dist = primary_dist_info(facts)
    direct = (dist or {}).get("direct_url")
    if isinstance(direct, dict):
        sha = (direct.get("vcs_info") or {}).get("commit_id")
        if isinstance(sha, str) and sha:
            return sha, "direct_url.json"
    version_file = facts.get("version_file") or {}
    commit_id = version_file.get("commit_id")
    if isinstance(commit_id, str) and commit_id:
        return (commit_id[1:] if re.match(r"^g[0-9a-f]{7,40}$", commit_id) else commit_id,
                "_version.py")
    for version in (version_file.get("version"), (dist or {}).get("version")):
        match = DEV_COMMIT.search(version or "")
        if match:
            return match.group(1), "version"
    return None, None


def vllm_info(facts: dict[str, Any]) -> VllmInfo:
    dist = primary_dist_info(facts)
    version_file = facts.get("version_file") or {}
    commit, source = commit_of(facts)
    version = version_file.get("version")
    return VllmInfo(version=version if isinstance(version, str) else None,
                    metadata_version=(dist or {}).get("version"),
                    commit=commit, commit_source=source, install=install_kind(dist),
                    site_packages=(facts.get("install") or {}).get("site_packages"),
                    python=(facts.get("install") or {}).get("interpreter") or
                    (facts.get("python") or {}).get("executable"),
                    record_sha256=facts.get("record_sha256"),
                    found_by=(facts.get("install") or {}).get("found_by"),
                    other_installs=(facts.get("install") or {}).get("other_installs"))


@lru_cache(maxsize=256)
def pep440(text: str | None) -> Any:
    """A packaging Version, or None where the text is not one (imported on first use:
    packaging costs ~20 ms of start-up that `fleetcheck --version` need not pay)."""
    from packaging.version import InvalidVersion, Version
    try:
        return Version(text) if isinstance(text, str) else None
    except InvalidVersion:
        return None


def version_suggests(version: str | None, fixed_in: str | None) -> str | None:
    """'fixed' / 'not fixed' by version alone (PEP 440 order: 0.33.0rc1 comes before
    0.33.0, a local label such as +cu129 is set aside), or None when the version says
    nothing: not PEP 440, or a dev build (0.1.devN+g...: built from a branch, its number
    tells nothing of what it holds)."""
    have, need = pep440(version), pep440(fixed_in)
    if have is None or need is None or have.is_devrelease:
        return None
    return "fixed" if pep440(have.public) >= need else "not fixed"


def no_install_reason(facts: dict[str, Any]) -> str:
    """Why no vllm was found, in the words of the probe's own observations."""
    install = facts.get("install") or {}
    reasons = list(facts.get("errors") or []) + list(install.get("errors") or [])
    looked = install.get("site_packages_candidates") or []
    if looked:
        where = "looked in %s" % ", ".join(looked)
    elif facts.get("venv"):
        where = "no site-packages under the venv"
    else:
        where = ("no venv given, and no site-packages of the interpreter, of a running vLLM "
                 "server or of the usual image venvs exists")
    return "no vllm install found (%s)" % "; ".join(reasons + [where])

"""What vLLM a host has: version, commit (and where the commit came from), how installed.

Read from files the probe brought back; the version only informs, it never decides a fix.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from fleetcheck.results import VllmInfo
from fleetcheck.versions import pep440

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import DistInfo, Facts, VersionMisfit

DEV_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})")
GIT_DESCRIBE_SHA = re.compile(r"^g([0-9a-f]{7,40})$")


def primary_dist_info(facts: Facts) -> DistInfo | None:
    dists = facts.install.dist_infos
    return dists[0] if dists else None


def install_kind(dist: DistInfo | None) -> str | None:
    """How vLLM got there, from PEP 610 direct_url.json (absent for index installs)."""
    if dist is None:
        return None
    direct = dist.direct_url
    installer = dist.installer or "unknown installer"
    if direct is None:
        return "index (%s)" % installer
    if direct.dir_info is not None and direct.dir_info.editable:
        return "editable (%s)" % installer
    if direct.vcs_info is not None:
        return "vcs (%s)" % installer
    if direct.archive_info is not None:
        return "archive (%s)" % installer
    if direct.dir_info is not None:
        return "directory (%s)" % installer
    return "unknown (%s)" % installer


def vcs_commit(dist: DistInfo | None) -> Any:
    """direct_url.json's vcs_info.commit_id, as the file holds it (None when absent)."""
    direct = dist.direct_url if dist is not None else None
    if direct is None or direct.vcs_info is None:
        return None
    return direct.vcs_info.commit_id


def bare_commit(commit_id: str) -> str:
    """A commit as git names it: the g that `git describe` puts before the sha (g0a1b2c3)
    taken off; any other text as it is. The one place a commit loses its g, so every check
    and the report show the same commit."""
    match = GIT_DESCRIBE_SHA.match(commit_id)
    return match.group(1) if match else commit_id


def commit_of(facts: Facts) -> tuple[str | None, str | None]:
    """The commit and its source: direct_url.json's full sha, else _version.py's
    __commit_id__, else the +g<sha> of a dev version."""
    dist = primary_dist_info(facts)
    sha = vcs_commit(dist)
    if isinstance(sha, str) and sha:
        return sha, "direct_url.json"
    commit_id = facts.version_file.commit_id
    if commit_id:
        return bare_commit(commit_id), "_version.py"
    for version in (facts.version_file.version, dist.version if dist else None):
        match = DEV_COMMIT.search(version) if version else None
        if match:
            return match.group(1), "version"
    return None, None


MAX_SOURCE_TEXT = 300


def vcs_source(dist: DistInfo | None) -> dict[str, str] | None:
    """Where a VCS install (a PR build) came from, as its direct_url.json says: the
    repository URL, the revision asked for (`refs/pull/40898/head`) and the commit it
    resolved to. Values from the host's file, kept short (renderers neutralize them)."""
    direct = dist.direct_url if dist is not None else None
    if direct is None or direct.vcs_info is None:
        return None
    vcs = direct.vcs_info
    fields = {"url": direct.url, "requested_revision": vcs.requested_revision,
              "commit": vcs.commit_id, "vcs": vcs.vcs}
    return {key: value[:MAX_SOURCE_TEXT] for key, value in fields.items()
            if isinstance(value, str) and value} or None


def vllm_info(facts: Facts) -> VllmInfo:
    dist = primary_dist_info(facts)
    install = facts.install
    commit, source = commit_of(facts)
    others = install.other_installs
    return VllmInfo(version=facts.version_file.version,
                    metadata_version=dist.version if dist else None,
                    commit=commit, commit_source=source, install=install_kind(dist),
                    site_packages=install.site_packages,
                    python=install.interpreter or facts.python.executable,
                    record_sha256=facts.record_sha256,
                    found_by=install.found_by, source=vcs_source(dist),
                    # as the probe sent them (sorted keys)
                    other_installs=None if others is None else [
                        {"dist_infos": o.dist_infos, "found_by": o.found_by,
                         "site_packages": o.site_packages} for o in others])


def version_suggests(version: str | None, fixed_in: str | None) -> str | None:
    """'fixed' / 'not fixed' by version alone (PEP 440 order: 0.33.0rc1 comes before
    0.33.0, a local label such as +cu129 is set aside), or None when the version says
    nothing: not PEP 440, or a dev build (0.1.devN+g...: built from a branch, its number
    tells nothing of what it holds)."""
    have, need = pep440(version), pep440(fixed_in)
    if have is None or need is None or have.is_devrelease:
        return None
    return "fixed" if pep440(have.public) >= need else "not fixed"


# what a build writes in each field of _version.py, and a misfit's type in words
WRITTEN_AS = {"version": "a version string", "commit_id": "a commit string",
              "version_tuple": "a tuple of integers and strings"}
TYPE_WORDS = {"list": "a list", "tuple": "a tuple", "int": "a number", "float": "a number",
              "complex": "a number", "bool": "true or false", "bytes": "bytes",
              "str": "a string", "ellipsis": "an ellipsis"}


def misfit_text(misfit: VersionMisfit) -> str:
    """'__version__ = [0, 33] is a list, not a version string: suspect build'."""
    if misfit.field == "version_tuple" and misfit.type in ("tuple", "list"):
        what = "holds items other than integers and strings"
    else:
        what = "is %s, not %s" % (TYPE_WORDS.get(misfit.type, "a " + misfit.type),
                                  WRITTEN_AS.get(misfit.field, "what a build writes there"))
    return "%s = %s %s: suspect build" % (misfit.name, misfit.value, what)


def no_install_reason(facts: Facts) -> str:
    """Why no vllm was found, in the words of the probe's own observations."""
    install = facts.install
    reasons = facts.errors + install.errors
    looked = install.site_packages_candidates
    if looked:
        where = "looked in %s" % ", ".join(looked)
    elif facts.venv:
        where = "no site-packages under the venv"
    else:
        where = ("no venv given, and no site-packages of the interpreter, of a running vLLM "
                 "server or of the usual image venvs exists")
    return "no vllm install found (%s)" % "; ".join(reasons + [where])

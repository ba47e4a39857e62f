"""Where vLLM is installed on the host and what its metadata says: site-packages found
from the venv's layout (never by asking a possibly broken interpreter), the vllm
dist-info(s), and vllm/_version.py parsed, never imported (that would import vllm).
Runs on every host, so it imports neither re nor json nor ast (~20 ms of start-up CPU
together on a slow host): the parsers they wrap are used directly."""

import _ast
import os
import sys

from fleetcheck.probe import jsonlite
from fleetcheck.probe.files import ProbeFileError, read_text


def site_packages_candidates(plan):
    """Site-packages directories to look in, found from the venv's layout, never by asking
    the venv's interpreter (a half-built venv may have a broken one)."""
    explicit = plan.get("site_packages")
    if explicit:
        return [explicit]
    venv = plan.get("venv")
    found = []
    if venv:
        for libdir in ("lib", "lib64"):
            base = os.path.join(venv, libdir)
            try:
                names = sorted(os.listdir(base))
            except OSError:
                continue
            for name in names:
                if name.startswith("python"):
                    for leaf in ("site-packages", "dist-packages"):
                        path = os.path.join(base, name, leaf)
                        if os.path.isdir(path) and path not in found:
                            found.append(path)
        return found
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
            if entry not in found:
                found.append(entry)
    return found


def parse_metadata_headers(text):
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            break
        if ":" in line and not line[0].isspace():
            key, _, value = line.partition(":")
            headers.setdefault(key.strip(), value.strip())
    return headers


def read_dist_info(path):
    info = {"path": path, "name": None, "version": None, "installer": None,
            "direct_url": None, "errors": []}
    try:
        headers = parse_metadata_headers(read_text(os.path.join(path, "METADATA")))
        info["name"] = headers.get("Name")
        info["version"] = headers.get("Version")
    except ProbeFileError as exc:
        info["errors"].append(str(exc))
    installer_path = os.path.join(path, "INSTALLER")
    if os.path.lexists(installer_path):
        try:
            info["installer"] = read_text(installer_path).strip()
        except ProbeFileError as exc:
            info["errors"].append(str(exc))
    direct_url_path = os.path.join(path, "direct_url.json")
    if os.path.lexists(direct_url_path):
        try:
            info["direct_url"] = jsonlite.loads(read_text(direct_url_path))
        except (ProbeFileError, ValueError) as exc:
            info["errors"].append("direct_url.json: %s" % exc)
    return info


# pip moves a package it replaces to an adjacent name: "~" + leading chars + the rest of
# the name ("~llm", "~-lm", "~llm-0.20.1.dist-info"); a killed install leaves it behind.
PIP_STASH = r"^~[-~.=%0-9]*(llm|lm)([-.].*)?$"


def is_pip_stash(name):
    """PIP_STASH, case-insensitive; re is imported only when a name starts with "~"."""
    if not name.startswith("~"):
        return False
    import re
    return re.match(PIP_STASH, name, re.IGNORECASE) is not None


def is_vllm_dist_info(name):
    """vllm-<version>.dist-info, in any case (the version holds no "-")."""
    lower = name.lower()
    version = lower[len("vllm-"):-len(".dist-info")]
    return lower.startswith("vllm-") and lower.endswith(".dist-info") and \
        len(lower) > len("vllm-.dist-info") and "-" not in version


VERSION_NAMES = {
    "__version__": "version", "version": "version",
    "__version_tuple__": "version_tuple", "version_tuple": "version_tuple",
    "__commit_id__": "commit_id", "commit_id": "commit_id",
}


def read_version_file(path):
    """Values of vllm/_version.py, parsed (importing it would import vllm)."""
    facts = {"path": path, "exists": os.path.lexists(path), "version": None,
             "version_tuple": None, "commit_id": None, "error": None}
    if not facts["exists"]:
        return facts
    try:
        tree = compile(read_text(path), path, "exec", _ast.PyCF_ONLY_AST)
    except (ProbeFileError, SyntaxError, ValueError) as exc:
        facts["error"] = str(exc)
        return facts
    for node in tree.body:
        if not isinstance(node, _ast.Assign):
            continue
        try:
            value = literal(node.value)
        except ValueError:
            continue
        for target in node.targets:
            if isinstance(target, _ast.Name) and target.id in VERSION_NAMES:
                field = VERSION_NAMES[target.id]
                if facts[field] is None:
                    facts[field] = list(value) if isinstance(value, tuple) else value
    return facts


def literal(node):
    """The value of a constant, or a tuple/list of them (what a _version.py assigns); the
    subset of ast.literal_eval it needs, since the ast module costs ~10 ms to import."""
    if isinstance(node, _ast.Constant):
        return node.value
    if isinstance(node, (_ast.Tuple, _ast.List)):
        items = [literal(item) for item in node.elts]
        return tuple(items) if isinstance(node, _ast.Tuple) else items
    if isinstance(node, _ast.UnaryOp) and isinstance(node.op, _ast.USub) and \
            isinstance(node.operand, _ast.Constant) and \
            isinstance(node.operand.value, (int, float)):
        return -node.operand.value
    raise ValueError("not a literal")


def locate_install(plan):
    candidates = site_packages_candidates(plan)
    facts = {"site_packages_candidates": candidates, "site_packages": None,
             "dist_infos": [], "package_dir": None}
    for site in candidates:
        try:
            names = os.listdir(site)
        except OSError as exc:
            facts.setdefault("errors", []).append("%s: %s" % (site, exc.strerror or exc))
            continue
        dists = sorted(n for n in names if is_vllm_dist_info(n))
        has_package = "vllm" in names
        if dists or has_package:
            facts["site_packages"] = site
            facts["dist_infos"] = [read_dist_info(os.path.join(site, d)) for d in dists]
            facts["package_dir"] = os.path.join(site, "vllm") if has_package else None
            facts["stash_dirs"] = sorted(n for n in names if is_pip_stash(n))
            break
    if facts["site_packages"] is None and candidates:
        facts["site_packages"] = candidates[0]
    facts["code_root"] = facts["site_packages"] if facts["package_dir"] else None
    source = editable_source(facts["dist_infos"])
    if source:
        facts["editable_source"] = source
        if os.path.isdir(os.path.join(source, "vllm")):
            facts["code_root"] = source
    return facts


def editable_source(dist_infos):
    """The source tree of an editable install (PEP 610 dir_info.editable), if any."""
    if not dist_infos:
        return None
    direct = dist_infos[0].get("direct_url")
    if not isinstance(direct, dict) or not (direct.get("dir_info") or {}).get("editable"):
        return None
    url = direct.get("url") or ""
    if not url.startswith("file://"):
        return None
    return file_url_path(url)


def file_url_path(url):
    """The local path of a file:// URL, percent-decoded as UTF-8 (what urllib's
    unquote(urlparse(url).path) gives, without importing urllib on every host)."""
    import re  # only editable installs get here
    rest = url[len("file://"):]
    if not rest.startswith("/"):  # file://host/path
        rest = "/" + rest.partition("/")[2]
    for mark in ("?", "#"):
        rest = rest.split(mark, 1)[0]
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                 rest.encode("utf-8"))
    return raw.decode("utf-8", "replace")



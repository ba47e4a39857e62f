"""The controller's side of shared analysis (see probe/shared_bytes.py): one lead host per
build, the controller's own analysis of the bytes the lead shipped, and the reply that
lets every other host of the build prove it holds those same bytes.

Trust: a lead can only ship bytes. The controller analyses them itself and shares the
result only if it equals the lead's own analysis; a follower's files must hash to the
shipped bytes or it analyses its own. A lead that hangs costs its build's waiting hosts
at most LEAD_WAIT_S once, then sharing ends for that build."""

from __future__ import annotations

import binascii
import hashlib
import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fleetcheck.faults import inject, internal_error
from fleetcheck.probe.files import MissingFile, ProbeFileError
from fleetcheck.probe.shared_bytes import listing_digest
from fleetcheck.probe.signatures import run_signature
from fleetcheck.probe.source import SourceFile
from fleetcheck.connectors.base import Deadline, TransportError
from fleetcheck.results import HostError

if TYPE_CHECKING:
    from fleetcheck.analysis_cache import AnalysisCache
    from fleetcheck.facts import Facts, Signatures

QUESTION = b"fleetcheck-ask "
LEAD_WAIT_S = 5.0
MAX_UNPACKED_BYTES = 64 << 20
MAX_PATH_CHARS = 4096
BUILD_KEY = re.compile(r"^[0-9a-f]{64}$")
ALONE = b'{"role": "alone"}\n'


class ShipmentError(Exception):
    """The lead's shipment cannot be the basis of a shared analysis."""


@dataclass
class Build:
    lead: str
    done: threading.Event = field(default_factory=threading.Event)
    # the controller's analysis, once shared: decoded (every follower gets this one
    # object: frozen classes, but their lists and maps are shared too, so no check may
    # change them) and as JSON text (for the cache)
    analysis: Signatures | None = None
    analysis_json: str | None = None
    reply: bytes | None = None  # what the build's other hosts are asked to verify
    cached: bool = False  # the analysis came from the controller's cache: no lead
    failure: str | None = None  # why the controller could not share the lead's analysis


def parse_question(text: bytes) -> tuple[str, str] | None:
    """(RECORD sha256, code root) from a host's question, or None when malformed."""
    try:
        question = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(question, dict):
        return None
    build, root = question.get("build"), question.get("code_root")
    if not isinstance(build, str) or not BUILD_KEY.match(build) or \
            not isinstance(root, str) or not root or len(root) > MAX_PATH_CHARS:
        return None
    return build, root


def safe_relative(path: Any) -> bool:
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\0" in path:
        return False
    parts = path.split("/")
    return not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def unpack(shipped: Any) -> tuple[dict[str, bytes], dict[str, list[str]], list[str]]:
    """Files, listings and absent files from a shipment (see probe/shared_bytes.py: shipment),
    refusing anything but plain relative paths."""
    import zlib  # only a lead's answer needs it
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(binascii.a2b_base64(shipped), MAX_UNPACKED_BYTES)
        if inflater.unconsumed_tail:
            raise ShipmentError("shipment unpacks to more than %d MiB" % (MAX_UNPACKED_BYTES >> 20))
        header_line, _, body = raw.partition(b"\n")
        header = json.loads(header_line.decode("utf-8"))
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise ShipmentError("unreadable shipment: %s" % exc)
    names = header.get("files") if isinstance(header, dict) else None
    walks = header.get("walks") if isinstance(header, dict) else None
    absent = header.get("absent", []) if isinstance(header, dict) else None
    if not isinstance(names, list) or not isinstance(walks, dict) or \
            not isinstance(absent, list) or not all(safe_relative(a) for a in absent):
        raise ShipmentError("shipment without files and listings")
    files: dict[str, bytes] = {}
    offset = 0
    for item in names:
        if not (isinstance(item, list) and len(item) == 2 and safe_relative(item[0]) and
                isinstance(item[1], int) and 0 <= item[1] <= len(body) - offset):
            raise ShipmentError("shipment names an unsafe path or a wrong size")
        files[item[0]] = body[offset:offset + item[1]]
        offset += item[1]
    if offset != len(body):
        raise ShipmentError("shipment holds bytes no file accounts for")
    for base, listed in walks.items():
        if (base and not safe_relative(base)) or not isinstance(listed, list) or \
                not all(safe_relative(n) and n.startswith(base + "/" if base else "")
                        for n in listed):
            raise ShipmentError("shipment listing %s names an unsafe path" % base)
    if set(absent) & set(files):
        raise ShipmentError("shipment names a file both shipped and absent")
    return files, walks, absent


def analyse_shipment(shipped: Any, signatures: list[dict[str, Any]],
                     build: str) -> tuple[dict[str, Any], bytes]:
    """The controller's own analysis of the shipped bytes, and the verify reply: sha256 of
    every shipped file, digest of every listing the analysis used, and the files a needle
    was found in. The analysis reads from memory: its file cache and directory listings
    start out holding the shipment, and its root is an empty directory, so a file or
    listing the lead did not ship is an error, and no shipped byte touches the disk."""
    files, walks, absent = unpack(shipped)
    cache: dict[str, Any] = {rel: SourceFile(rel, data) for rel, data in files.items()}
    missing = {rel: MissingFile(rel) for rel in absent}
    cache.update(missing)
    seen: dict[str, list[str]] = {base: sorted(names) for base, names in walks.items()}
    with tempfile.TemporaryDirectory(prefix="fleetcheck-build-") as root:
        facts = {s["id"]: run_signature(root, s, cache, seen)
                 for s in json.loads(json.dumps(signatures))}  # as the probe gets them
    hashes = {}
    for rel, entry in cache.items():
        if missing.get(rel) is entry:
            continue
        if isinstance(entry, ProbeFileError):
            raise ShipmentError("the analysis reads %s, which the lead did not ship" % rel)
        hashes[rel] = hashlib.sha256(entry.data).hexdigest()
    reply = {"role": "verify", "build": build, "files": hashes, "absent": sorted(missing),
             "walks": {base: listing_digest(names) for base, names in seen.items()},
             "examined": sorted(rel for rel, e in cache.items()
                                if getattr(e, "examined", False))}
    return facts, json.dumps(reply).encode("utf-8") + b"\n"


class SharedAnalysis:
    """Per run: which host leads each build, and each build's shared analysis."""

    def __init__(self, signatures: list[dict[str, Any]], cache: AnalysisCache | None = None):
        self.signatures = signatures
        self.cache = cache
        self._lock = threading.Lock()
        self._builds: dict[tuple[str, str], Build] = {}
        self._asked: dict[str, tuple[str, str]] = {}
        self._bugs: dict[str, list[HostError]] = {}

    def record_bug(self, host: str, exc: BaseException, where: str) -> None:
        """A fleetcheck bug while sharing for this host: kept for its results (the host
        analyses its own files instead), never swallowed."""
        with self._lock:
            self._bugs.setdefault(host, []).append(internal_error(exc, where))

    def internal_errors(self, host: str) -> list[HostError]:
        """The bugs recorded for this host, once."""
        with self._lock:
            return self._bugs.pop(host, [])

    def answer(self, host: str, line: bytes, deadline: Deadline,
               cancel: threading.Event | None = None) -> bytes | None:
        """The reply to a host's question (None when the line is not one): lead, verify
        (after waiting for the build's lead), or alone."""
        if not line.startswith(QUESTION):
            return None
        key = parse_question(line[len(QUESTION):])
        if key is None:
            return ALONE
        with self._lock:
            self._asked[host] = key
            build = self._builds.get(key)
            if build is None and self.cache is not None:
                build = self.from_cache(key)
            if build is None or (build.lead == host and not build.done.is_set()):
                self._builds[key] = Build(lead=host)
                return b'{"role": "lead"}\n'
        end = time.monotonic() + min(LEAD_WAIT_S, max(0.0, deadline.end - time.monotonic() - 5))
        while not build.done.wait(0.05):
            if time.monotonic() >= end or (cancel is not None and cancel.is_set()):
                build.done.set()  # sharing ends for this build: no one waits again
                break
        return build.reply or ALONE

    def complete(self, host: str, facts: Facts) -> tuple[Facts, str | None]:
        """After a host's answer: a lead's shipment is analysed; a follower that verified
        gets the build's analysis. Returns the facts to judge (without the shipment) and
        what to say about the analysis in the results."""
        shipped = facts.shared_read
        if shipped is not None:
            facts = replace(facts, shared_read=None)
        with self._lock:
            key = self._asked.get(host)
            build = self._builds.get(key) if key else None
        if build is not None and build.lead == host and not build.done.is_set():
            self._learn(build, key[0], shipped, facts.signatures)
            if build.failure:
                return facts, ("fix analysis run on this host; its build's analysis is not "
                               "shared: %s" % build.failure)
            return facts, None
        info = facts.shared_analysis
        if facts.signatures is None:
            counts = (info.files, info.listings)
            if build is None or build.analysis is None or build.reply is None or \
                    None in counts:
                raise TransportError("protocol", "probe sent no analysis and its build has "
                                                 "none to share")
            facts = replace(facts, signatures=build.analysis)
            if build.cached:
                return facts, ("fix analysis from the controller's cache of this build: %d "
                               "files and %d directory listings verified identical on this "
                               "host" % counts)
            return facts, ("fix analysis shared with %s: %d files and %d directory listings "
                           "verified identical on this host" % ((build.lead,) + counts))
        if info.mismatch:
            return facts, "fix analysis run on this host: %s" % info.mismatch[:300]
        if build is not None and build.lead != host and build.failure:
            return facts, ("fix analysis run on this host: its build's analysis could not be "
                           "shared (%s)" % build.failure)
        return facts, None

    def abandon(self, host: str) -> None:
        """A host failed: if it led a build, the next host of that build leads instead."""
        with self._lock:
            key = self._asked.get(host)
            build = self._builds.get(key) if key else None
            if build is None or build.lead != host or build.done.is_set():
                return
            del self._builds[key]
        build.done.set()  # its waiters analyse their own files

    def from_cache(self, key: tuple[str, str]) -> Build | None:
        """A build whose analysis an earlier run learned: its hosts verify at once."""
        found = self.cache.get(key[0]) if self.cache is not None else None
        if found is None:
            return None
        from fleetcheck.facts import Signatures
        from fleetcheck.facts_decoder import FactsError, decode
        try:
            analysis = decode(Signatures, json.loads(found[0]))
        except (ValueError, FactsError):  # an entry this fleetcheck would not write: a miss
            return None
        build = Build(lead="the controller's cache", analysis=analysis, analysis_json=found[0],
                      reply=found[1], cached=True)
        build.done.set()
        self._builds[key] = build
        return build

    def _learn(self, build: Build, key: str, shipped: str | None,
               lead_analysis: Signatures | None) -> None:
        """Share the controller's analysis of the shipment if it equals the lead's own
        (decoded alike: every field a check reads is the same); otherwise (nothing
        shipped, a refused shipment, a disagreeing lead) the build is not shared and its
        other hosts analyse their own files."""
        from fleetcheck.facts import Signatures
        from fleetcheck.facts_decoder import decode
        try:
            if shipped:
                inject("shared-analysis", build.lead)  # the test-only fault hook
                signatures, reply = analyse_shipment(shipped, self.signatures, key)
                text = json.dumps(signatures, sort_keys=True)
                analysis = decode(Signatures, json.loads(text))  # as if it had crossed the wire
                if analysis == lead_analysis:
                    build.analysis, build.analysis_json, build.reply = analysis, text, reply
                    if self.cache is not None:
                        self.cache.put(key, text, reply)
        except ShipmentError as exc:  # what the lead shipped cannot be trusted or read
            build.failure = "the lead's shipment was refused: %s" % exc
        except Exception as exc:  # a fleetcheck bug (or bytes the lead did not analyse)
            self.record_bug(build.lead, exc, "analysing the bytes this host shipped for its "
                                             "build")
            build.failure = "internal error on the controller while analysing what %s " \
                            "shipped" % build.lead
        finally:
            build.done.set()

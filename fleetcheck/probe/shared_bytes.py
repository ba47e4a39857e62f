"""One analysis per build, proved on every host: hosts whose vllm dist-info has the same
RECORD installed the same files, so the fix analysis need run once per build. The first
host of a build (the lead) analyses as usual and also ships the bytes it read, and those
its executor ran (each host still runs its own); the controller analyses those bytes
itself. Every other host of the build then proves it
holds the same bytes (sha256 of each file the analysis read, digest of each directory
listing it walked) instead of lexing them again. A host that differs anywhere analyses
its own files. Nothing a host says about another host is trusted: a lead can only ship
bytes, and a follower's own files must hash to exactly those bytes."""

import binascii
import hashlib
import os
import zlib

from fleetcheck.probe import jsonlite
from fleetcheck.probe.files import MissingFile, ProbeFileError, read_bytes, walk_files

# compressed; the controller refuses answers over 8 MiB, and a bigger read set is
# analysed on each host rather than shipped
MAX_SHIPPED_BYTES = 6 * 1024 * 1024


def build_key(dist_info):
    """sha256 of the dist-info's RECORD, or None when it cannot be read."""
    try:
        return hashlib.sha256(read_bytes(os.path.join(dist_info, "RECORD"))).hexdigest()
    except ProbeFileError:
        return None


def listing_digest(names):
    return hashlib.sha256("\n".join(names).encode("utf-8", "surrogateescape")).hexdigest()


def shipment(cache, walks):
    """The files an analysis read and the listings it walked, for the controller:
    base64(zlib(one JSON line naming the files and their sizes, then their bytes)).
    Files the analysis looked for and did not find (a helper's module tried as
    `a/b.py`, then `a/b/__init__.py`) ship as absent. None when a read failed (an
    unreadable file is this host's own state, not the build's) or when the read set is
    too big to ship."""
    names = []
    blobs = []
    absent = []
    for rel, entry in cache.items():
        if isinstance(entry, MissingFile):
            absent.append(rel)
            continue
        if isinstance(entry, ProbeFileError):
            return None
        names.append([rel, len(entry.data)])
        blobs.append(entry.data)
    header = jsonlite.dumps({"files": names, "walks": walks,
                             "absent": absent}).encode("utf-8") + b"\n"
    packed = zlib.compress(header + b"".join(blobs), 1)
    if len(packed) > MAX_SHIPPED_BYTES:
        return None
    return binascii.b2a_base64(packed, newline=False).decode("ascii")


def verify(root, expected):
    """(sha256 per file, None) when every listing and file the build's analysis read is
    the same here; (None, reason) at the first difference."""
    for base, digest in sorted(expected["walks"].items()):
        if listing_digest(sorted(walk_files(root, base))) != digest:
            return None, "the files under %s are not the build's" % base
    for rel in expected.get("absent") or []:
        if os.path.lexists(os.path.join(root, rel)):
            return None, "%s exists here, not in the build" % rel
    hashes = {}
    for rel, want in sorted(expected["files"].items()):
        try:
            data = read_bytes(os.path.join(root, rel))
        except ProbeFileError as exc:
            return None, str(exc)
        digest = hashlib.sha256(data)
        if digest.hexdigest() != want:
            return None, "%s differs from the build's" % rel
        hashes[rel] = digest.digest()
    return hashes, None

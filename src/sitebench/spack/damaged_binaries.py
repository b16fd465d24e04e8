"""Damaged binaries in the machine's cache, found before Spack is asked for them and named
on the console.

Spack refuses a tarball whose sha256 is not its manifest's and builds from source instead,
saying only "No binary for ... found" in a build log (its reason only with ``--debug``).
Before the cached roots are installed, the blob of every cached spec about to be installed
is checked against its manifest (size, then sha256: blobs are named by their digest); a
damaged one is named with what was done: moved aside beside itself (``.damaged``, kept for
inspection) where the cache is writable, so that Spack builds the spec from source and
pushes a whole one; left in place where it is not.
"""

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sitebench.spack import buildcache

SUFFIX = ".spec.manifest.json"
CHUNK = 1 << 20


@dataclass
class Damaged:
    name: str
    digest: str  # the spec's DAG hash
    manifest: Path
    blob: Path
    why: str


def _manifest_data(text):
    """The JSON of a spec manifest, signed (PGP clear-signed) or not."""
    if text.startswith("-----BEGIN PGP SIGNED MESSAGE-----"):
        text = text.split("\n\n", 1)[1].split("-----BEGIN PGP SIGNATURE-----", 1)[0]
    return json.loads(text)


def _install_entry(manifest):
    """(checksum, length) of the spec's tarball as its manifest names it, or None."""
    try:
        data = _manifest_data(manifest.read_text())
        entry = next(d for d in data["data"] if ".install." in d.get("mediaType", ""))
        return entry["checksum"], entry.get("contentLength")
    except (OSError, ValueError, KeyError, StopIteration, TypeError, IndexError):
        return None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def find(cache_dir, hashes):
    """The :class:`Damaged` binaries among the specs of ``hashes`` held in ``cache_dir``."""
    found = []
    for manifest in sorted((Path(cache_dir) / buildcache.SPECS).glob(f"*/*{SUFFIX}")):
        digest = manifest.name.removesuffix(SUFFIX).rpartition("-")[2]
        if digest not in hashes:
            continue
        name = manifest.parent.name
        entry = _install_entry(manifest)
        if entry is None:
            found.append(Damaged(name, digest, manifest, manifest, "its manifest cannot be read"))
            continue
        checksum, length = entry
        blob = Path(cache_dir) / "blobs" / "sha256" / checksum[:2] / checksum
        if not blob.is_file():
            why = "its tarball is missing"
        elif length is not None and blob.stat().st_size != length:
            why = f"its tarball has {blob.stat().st_size} bytes where its manifest says {length}"
        elif _sha256(blob) != checksum:
            why = "its tarball's sha256 is not the one its manifest names"
        else:
            continue
        found.append(Damaged(name, digest, manifest, blob, why))
    return found


def _aside(path, stamp):
    """``path`` renamed beside itself as damaged; the new path, or None if it is gone."""
    if not path.is_file():
        return None
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    path.rename(aside)
    return aside


def set_aside(damaged, writable):
    """Move each damaged spec's manifest and tarball aside where the cache is ``writable``
    (the cache then holds no binary of it: Spack builds it and pushes a whole one, and the
    next run has nothing to say); say on stderr what was found and done. Returns the hashes
    Spack must not be offered from the cache."""
    stamp = int(time.time())
    for bad in damaged:
        what = f"{bad.name}/{bad.digest[:7]}"
        done = "left in place (the cache is read-only)"
        if writable:
            try:
                moved = [p for p in {bad.blob, bad.manifest} if _aside(p, stamp)]
                done = (
                    f"moved aside ({', '.join(sorted(p.name for p in moved))} + .damaged-{stamp})"
                )
            except OSError as err:
                done = f"left in place ({err.strerror})"
        print(
            f"sitebench: warning: the binary cache holds a damaged binary of {what}: {bad.why} "
            f"({bad.blob}); {done}; Spack builds it from source"
            + (" and pushes a whole one" if writable else ""),
            file=sys.stderr,
        )
    return {bad.digest for bad in damaged}

"""What this site keeps on disk of other sites' runs, chosen by the site, and what it costs.

A run of another site materialised under ``results/<site>/<run>/`` (pulled whole by older
versions, or written on demand) is its figures and provenance (``report.json``,
``provenance/``, ``perflogs/``: what the store indexes and a reader audits, never dropped)
plus its bulk (``output/`` and anything else, most of a run's files and bytes). The bulk
stays in the exchange's git objects, so once it is older than ``keep_days`` (``results:``
in site.yaml, or ``./sitebench exchange prune --days N``) it is dropped from disk and
:func:`refill` writes it back byte for byte from those objects.

Never dropped: a run of this site (the exchange's ``sitebench.site``, or any site whose
signing key is on this machine), a run the code's checkout tracks, a run the exchange's
accepted history does not hold, and a run whose files differ from that history (a run
dropped here must come back exactly as it was).
"""

import hashlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.results import exchange, limits, quarantine, trust, verify
from sitebench.results.rundirs import run_dirs, site_dirs

#: The top-level entries of a run that are its figures and provenance: never dropped.
KEPT = ("report.json", "provenance", "perflogs")
PRUNING = "pruning-"


def own_sites(ex):
    """This results directory's own sites: the exchange's site and every site whose
    private signing key is here."""
    own = {ex.setting("site")} - {None}
    keys = trust.keys_dir()
    if keys.is_dir():
        own |= {p.name for p in keys.iterdir() if p.is_file() and not p.suffix}
    return own


def accepted_runs(ex):
    """{site: {run}} of the other sites' runs accepted here."""
    return {site: set(runs) for site, runs in ex.accepted_runs().items()}


def tree_runs(ex):
    """{site: {run}} of the exchange's accepted history, this site's own runs included
    (trees only are read)."""
    accepted, prefix = ex.rev(exchange.ACCEPTED), ex.setting("prefix", "")
    if not accepted:
        return {}
    top = f"{accepted}:{prefix}"
    sites = ex.git("ls-tree", "-d", "--name-only", "-z", top, check=False).stdout
    found = {}
    for site in filter(None, sites.split("\0")):
        if verify.SITE_NAME.fullmatch(site):
            runs = ex.git("ls-tree", "-d", "--name-only", "-z", f"{top}{site}").stdout
            found[site] = {r for r in runs.split("\0") if verify.RUN_NAME.fullmatch(r)}
    return found


def bulk_of(run_dir):
    """The top-level entries of a materialised run that are bulk (not figures or provenance)."""
    try:
        return sorted(p for p in run_dir.iterdir() if p.name not in KEPT)
    except OSError:
        return []


def du_bytes(path):
    """Disk use of ``path`` as ``du -s -B1`` counts it: allocated blocks of every entry,
    the directories' own included, a hard-linked file once; and its file count."""
    entries = [str(path)]
    for dirpath, dirnames, filenames in os.walk(path):
        entries += [os.path.join(dirpath, name) for name in dirnames + filenames]
    seen, blocks, files = set(), 0, 0
    for entry in entries:
        st = os.lstat(entry)
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            blocks += st.st_blocks
            files += not stat.S_ISDIR(st.st_mode)
    return blocks * 512, files


def packed_bytes(ex):
    """Bytes of the exchange's objects: ``git count-objects -v``'s size-pack plus its loose
    size (KiB there)."""
    counts = {}
    for line in ex.git("count-objects", "-v").stdout.splitlines():
        key, _, value = line.partition(":")
        counts[key.strip()] = value.strip()
    return (int(counts.get("size-pack", 0)) + int(counts.get("size", 0))) * 1024


def site_packed_bytes(ex, site):
    """Bytes on disk of the blobs of ``site``'s runs in the exchange (``%(objectsize:disk)``,
    a delta counted at its delta's size; trees and commits are not a site's)."""
    accepted, prefix = ex.rev(exchange.ACCEPTED), ex.setting("prefix", "")
    if not accepted:
        return 0
    listing = ex.git("ls-tree", "-r", "-z", accepted, "--", f"{prefix}{site}/").stdout
    blobs = {e.partition("\t")[0].split()[2] for e in listing.split("\0") if e}
    if not blobs:
        return 0
    out = ex.git(
        *limits.NO_FETCH,
        "cat-file",
        "--batch-check=%(objectsize:disk)",
        stdin="".join(f"{b}\n" for b in blobs),
    ).stdout
    return sum(int(n) for n in out.split() if n.isdigit())


@dataclass
class SiteStatus:
    site: str
    own: bool
    runs: int  # in the exchange's accepted history
    on_disk: int  # run directories under results/<site>/
    with_bulk: int  # of those, holding their bulk
    disk_bytes: int
    disk_files: int
    packed_bytes: int
    oldest_bulk: tuple = None  # (mtime, run) of the oldest run whose bulk is on disk
    refused: int = 0
    limits: dict = field(default_factory=dict)


def status(ex):
    """[SiteStatus] of every site this results directory holds or the exchange names."""
    results = ex.results_root
    settings = limits.configured(ex.git_dir, ex.setting("site"))
    held = tree_runs(ex)
    own = own_sites(ex)
    refused = {}
    for _, _, site, _ in quarantine.log_rows(ex.git_dir):
        refused[site or "?"] = refused.get(site or "?", 0) + 1
    names = sorted(set(held) | {p.name for p in site_dirs(results)})
    rows = []
    for site in names:
        dirs = run_dirs(site, results) if verify.SITE_NAME.fullmatch(site) else []
        with_bulk = [d for d in dirs if bulk_of(d)]
        oldest = min(((d.stat().st_mtime, d.name) for d in with_bulk), default=None)
        disk, files = du_bytes(results / site) if (results / site).is_dir() else (0, 0)
        rows.append(
            SiteStatus(
                site=site,
                own=site in own,
                runs=len(held.get(site, ())),
                on_disk=len(dirs),
                with_bulk=len(with_bulk),
                disk_bytes=disk,
                disk_files=files,
                packed_bytes=site_packed_bytes(ex, site) if site in held else 0,
                oldest_bulk=oldest,
                refused=refused.pop(site, 0),
                limits=limits.in_force(settings, site),
            )
        )
    for site, count in sorted(refused.items()):  # refusals naming no site held here
        rows.append(SiteStatus(site, False, 0, 0, 0, 0, 0, 0, None, count, {}))
    return rows


@dataclass
class Pruned:
    dropped: list = field(default_factory=list)  # (site, run, bytes, files)
    kept: list = field(default_factory=list)  # (site, run, why)
    refs_dropped: int = 0
    packed_before: int = 0
    packed_after: int = 0
    seconds: float = 0.0


def _blob_id(path):
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _same_as_history(ex, site, run, entries):
    """Why the bulk ``entries`` of a run cannot be written back as they are ("" when every
    file there is in the accepted run's tree with these bytes)."""
    tree, _ = ex.accepted_runs(site)[site][run]
    tree = {rel: blob for rel, _, blob in ex.tree_files(tree)}
    for entry in entries:
        walk = [entry] if not entry.is_dir() or entry.is_symlink() else entry.rglob("*")
        for path in walk:
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                return f"{path.name} is not a regular file"
            if path.is_dir():
                continue
            rel = path.relative_to(entry.parent).as_posix()
            if tree.get(rel) != _blob_id(path):
                return f"{rel} is not in the exchange's history with these bytes"
    return ""


def prune(ex, keep_days, now=None, quarantine_days=None, quarantine_refs=None):
    """Drop the bulk of other sites' runs materialised more than ``keep_days`` days ago,
    then the quarantine refs beyond their age and count, and the objects no ref reaches."""
    started = time.monotonic()
    now = time.time() if now is None else now
    done = Pruned(packed_before=packed_bytes(ex))
    results = ex.results_root
    own = own_sites(ex)
    held = accepted_runs(ex)
    trash = ex.git_dir / f"{PRUNING}{os.getpid()}"
    for leftover in ex.git_dir.glob(f"{PRUNING}*"):  # a prune killed while deleting
        shutil.rmtree(leftover, ignore_errors=True)
    for site_dir in site_dirs(results):
        site = site_dir.name
        if site in own or site not in held:
            continue
        tracked = exchange._code_tracked_runs(results, site)
        for run_dir in run_dirs(site, results):
            entries = bulk_of(run_dir)
            if not entries or now - run_dir.stat().st_mtime < keep_days * 86400:
                continue
            if run_dir.name not in held[site] or run_dir.name in tracked:
                why = (
                    "tracked by the code's checkout"
                    if run_dir.name in tracked
                    else "not in the exchange"
                )
                done.kept.append((site, run_dir.name, why))
                continue
            why = _same_as_history(ex, site, run_dir.name, entries)
            if why:
                done.kept.append((site, run_dir.name, why))
                continue
            size = sum(
                du_bytes(e)[0] if e.is_dir() else e.lstat().st_blocks * 512 for e in entries
            )
            files = sum(du_bytes(e)[1] if e.is_dir() else 1 for e in entries)
            # Renamed out of the run first: the run loses its bulk in one step per entry.
            trash.mkdir(exist_ok=True)
            for entry in entries:
                entry.rename(trash / f"{site}-{run_dir.name}-{entry.name}")
            done.dropped.append((site, run_dir.name, size, files))
    shutil.rmtree(trash, ignore_errors=True)
    settings = limits.configured(ex.git_dir, ex.setting("site"))
    days = quarantine_days or settings.get("quarantine_days", quarantine.DEFAULT_DAYS)
    refs = quarantine_refs or settings.get("quarantine_refs", quarantine.DEFAULT_REFS)
    done.refs_dropped = quarantine.expire(ex.git_dir, days, now) + quarantine.cap(ex.git_dir, refs)
    if done.refs_dropped:
        quarantine.gc(ex.git_dir)
    done.packed_after = packed_bytes(ex)
    done.seconds = time.monotonic() - started
    return done


def refill(ex, site, run):
    """Write back the bulk of ``site/run`` that prune dropped: the run is written whole again
    as ``./sitebench show`` writes it (verified, from the accepted tree), the copy here moved
    aside meanwhile and put back if that fails. The top-level entries written ([names])."""
    run_dir = ex.results_root / site / run
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise SitebenchError(
            f"{run_dir} is not a run directory here",
            f"./sitebench show {site}/{run} writes it whole",
        )
    accepted = ex.accepted_runs(site).get(site, {})
    if run not in accepted:
        raise SitebenchError(
            f"{site}/{run} is not a run accepted here from the exchange",
            "pull first, or name another run (./sitebench exchange status)",
        )
    names = {rel.split("/", 1)[0] for rel, _, _ in ex.tree_files(accepted[run][0])}
    missing = sorted(names - {p.name for p in run_dir.iterdir()})
    if not missing:
        return []
    aside = Path(tempfile.mkdtemp(prefix=f".incoming-refill-{run}-", dir=run_dir.parent))
    run_dir.rename(aside / run)
    try:
        ex.materialise(site, run, exchange._rules(ex))
    except BaseException:
        (aside / run).rename(run_dir)
        aside.rmdir()
        raise
    shutil.rmtree(aside)
    return missing

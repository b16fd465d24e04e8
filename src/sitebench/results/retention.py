"""What this site keeps on disk of other sites' runs, chosen by the site, and what it costs.

A run of another site materialised under ``results/<site>/<run>/`` (written on demand by
``./sitebench show``, or pulled whole by a version before the partial copy) is a copy of its
accepted tree: the store reads its figures and provenance from the exchange's git objects,
and ``show`` writes it again byte for byte. So once it is older than ``keep_days``
(``results:`` in site.yaml, or ``./sitebench exchange prune --days N``) the copy goes whole,
after every file of it was hashed (``git hash-object``) and found in the accepted tree with
these bytes, and the tree's figures and provenance were found in the copy (the store reads
them from there at its next refresh).

Back-fill: a copy made by a version before the runs log (every accepted run written as files,
no ``sitebench-runs/``) has its accepted runs logged from the accepted history first
(:func:`backfill_log`), so the same prune brings such a site to the new footprint.

Never dropped: a run of this site (the exchange's ``sitebench.site``, or any site whose
signing key is on this machine), a run the code's checkout tracks, a run the exchange's
accepted history does not hold, and a run whose files differ from that history (a run
dropped here must come back exactly as it was): each kept one is named, with why.
"""

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results import exchange, limits, quarantine, rejudge, trust, verify
from sitebench.results.rundirs import run_dirs, site_dirs

#: The top-level entries of a run that are its figures and provenance: never dropped.
KEPT = ("figures.json", "report.json", "provenance", "perflogs")
PRUNING = "pruning-"


def own_sites(ex):
    """This results directory's own sites: the exchange's site and every site whose
    private signing key is here."""
    own = {ex.setting("site")} - {None}
    keys = trust.keys_dir()
    if keys.is_dir():
        own |= {p.name for p in keys.iterdir() if p.is_file() and not p.suffix}
    return own


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


def local_blob_bytes(ex):
    """{blob: bytes on disk} of the blobs the exchange copy holds (``%(objectsize:disk)``, a
    delta counted at its delta's size). Listed once from the copy's own objects: asking for
    a blob by name in a partial copy makes git fetch it when it is missing (another site's
    bulk), and with fetching denied the whole command fails."""
    out = ex.git(
        *limits.NO_FETCH,
        "cat-file",
        "--batch-all-objects",
        "--unordered",
        "--batch-check=%(objecttype) %(objectname) %(objectsize:disk)",
    ).stdout
    sizes = {}
    for line in out.splitlines():
        kind, name, size = line.split()
        if kind == "blob":
            sizes[name] = int(size)
    return sizes


def site_packed_bytes(ex, site, local=None):
    """Bytes on disk of the blobs of ``site``'s runs in the exchange (``local``: from
    :func:`local_blob_bytes`; a blob this copy does not hold counts 0); trees and commits
    are not a site's."""
    accepted, prefix = ex.rev(exchange.ACCEPTED), ex.setting("prefix", "")
    if not accepted:
        return 0
    local = local_blob_bytes(ex) if local is None else local
    listing = ex.git("ls-tree", "-r", "-z", accepted, "--", f"{prefix}{site}/").stdout
    blobs = {e.partition("\t")[0].split()[2] for e in listing.split("\0") if e}
    return sum(local.get(blob, 0) for blob in blobs)


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
    taken_since = rejudge.accepted_before(ex)  # accepted when judged again: not refused
    for _, commit, site, _ in quarantine.log_rows(ex.git_dir):
        if commit not in taken_since:
            refused[site or "?"] = refused.get(site or "?", 0) + 1
    names = sorted(set(held) | {p.name for p in site_dirs(results)})
    local = local_blob_bytes(ex) if held else {}
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
                packed_bytes=site_packed_bytes(ex, site, local) if site in held else 0,
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
    backfilled: list = field(default_factory=list)  # (site, run) logged from the history
    refs_dropped: int = 0
    packed_before: int = 0
    packed_after: int = 0
    seconds: float = 0.0


def _same_as_history(ex, run_dir, tree):
    """Why the copy ``run_dir`` of an accepted run cannot go ("" when every file there is in
    the run's accepted ``tree`` with these bytes, hashed by ``git hash-object``, and the
    tree's figures and provenance are in the exchange copy for the store to read)."""
    listed = {rel: blob for rel, _, blob in ex.tree_files(tree)}
    files = []
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            return f"{path.relative_to(run_dir).as_posix()} is not a regular file"
        if "\n" in path.name:  # git hash-object reads one path a line
            return f"{path.relative_to(run_dir).as_posix()!r} has a newline in its name"
        if path.is_file():
            files.append(path)
    if files:
        try:
            hashed = ex.git(
                "hash-object",
                "--no-filters",
                "--stdin-paths",
                stdin="".join(f"{p}\n" for p in files),
                check=False,
            ).stdout.split()
        except UnicodeError:
            hashed = []
        if len(hashed) != len(files):
            return "git hash-object could not hash every file of it (a name not UTF-8?)"
        for path, blob in zip(files, hashed):
            rel = path.relative_to(run_dir).as_posix()
            if listed.get(rel) != blob:
                return f"{rel} is not in the exchange's history with these bytes"
    missing = ex._missing(tree)
    taken = exchange.index_paths(listed)
    lacking = [rel for rel, blob in listed.items() if blob in missing and rel.startswith(taken)]
    if lacking:
        return f"{lacking[0]} is not in the exchange copy here (its figures would be lost)"
    return ""


def backfill_log(ex):
    """Log the other sites' runs of the accepted history that the runs log lacks (a copy
    made before the log, whose pulls wrote every run as files): each with its tree in the
    commit that added it, refused commits left out. [(site, run)] logged."""
    accepted, prefix = ex.rev(exchange.ACCEPTED), ex.setting("prefix", "")
    if not accepted:
        return []
    logged = ex.accepted_runs()
    own = own_sites(ex)
    refused = ex._quarantined_commits()
    out = ex.git(
        "-c",
        "core.quotePath=false",
        "log",
        "--no-renames",
        "--diff-filter=A",
        "--name-only",
        "--format=commit %H",
        accepted,
        "--",
        prefix or ".",
    ).stdout
    taken, seen, commit = [], set(), None
    for line in out.splitlines():
        if line.startswith("commit "):
            commit = line.split()[1]
            continue
        parts = line[len(prefix) :].split("/") if line.startswith(prefix) else []
        if len(parts) < 3 or commit in refused:
            continue
        site, run = parts[0], parts[1]
        if (site, run) in seen or site in own or run in logged.get(site, {}):
            continue
        if not (verify.SITE_NAME.fullmatch(site) and verify.RUN_NAME.fullmatch(run)):
            continue
        seen.add((site, run))
        taken.append((site, run, commit))
    # Each run's tree as the commit that added it holds it, all in one git call.
    named = "".join(f"{commit}:{prefix}{site}/{run}\n" for site, run, commit in taken)
    trees = ex.git("cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=named)
    taken = [
        (site, run, line.split()[0], commit)
        for (site, run, commit), line in zip(taken, trees.stdout.splitlines())
        if line.endswith(" tree")
    ]
    if taken:
        ex._log_runs(taken)
    return [(site, run) for site, run, _, _ in taken]


def prune(ex, keep_days, now=None, quarantine_days=None, quarantine_refs=None):
    """Drop the bulk of other sites' runs materialised more than ``keep_days`` days ago,
    then the quarantine refs beyond their age and count, and the objects no ref reaches."""
    started = time.monotonic()
    now = time.time() if now is None else now
    done = Pruned(packed_before=packed_bytes(ex))
    results = ex.results_root
    own = own_sites(ex)
    done.backfilled = backfill_log(ex)
    held = ex.accepted_runs()
    trash = ex.git_dir / f"{PRUNING}{os.getpid()}"
    for leftover in ex.git_dir.glob(f"{PRUNING}*"):  # a prune killed while deleting
        shutil.rmtree(leftover, ignore_errors=True)
    for site_dir in site_dirs(results):
        site = site_dir.name
        if site in own or site not in held:
            continue
        tracked = exchange._code_tracked_runs(results, site)
        for run_dir in run_dirs(site, results):
            if run_dir.is_symlink() or now - run_dir.lstat().st_mtime < keep_days * 86400:
                continue
            if run_dir.name not in held[site] or run_dir.name in tracked:
                why = (
                    "tracked by the code's checkout"
                    if run_dir.name in tracked
                    else "not in the exchange"
                )
                done.kept.append((site, run_dir.name, why))
                continue
            why = _same_as_history(ex, run_dir, held[site][run_dir.name][0])
            if why:
                done.kept.append((site, run_dir.name, why))
                continue
            size, files = du_bytes(run_dir)
            # Renamed out of results/ first: the copy goes in one step, never half.
            trash.mkdir(exist_ok=True)
            run_dir.rename(trash / f"{site}-{run_dir.name}")
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


def _accepted_files(ex, site, run):
    return ex.tree_files(ex.accepted_runs(site)[site][run][0])


def refill(ex, site, run):
    """Write back the bulk of ``site/run`` that prune dropped: the run is written whole again
    as ``./sitebench show`` writes it (verified, from the accepted tree), the copy here moved
    aside meanwhile and put back if that fails. The top-level entries written ([names])."""
    run_dir = ex.results_root / site / run
    if not run_dir.is_symlink() and not run_dir.exists():
        # Dropped whole by prune: written again as show writes it.
        ex.materialise(check_name("site", site), run, exchange._rules(ex))
        return sorted({rel.split("/", 1)[0] for rel, _, _ in _accepted_files(ex, site, run)})
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise SitebenchError(
            f"{run_dir} is not a run directory here",
            f"move it aside, then ./sitebench show {site}/{run} writes it whole",
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

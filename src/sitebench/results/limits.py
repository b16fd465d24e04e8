"""Bounds on what one site adds to this site's copy of the results exchange: commits, runs,
files and bytes per night (any 24 hours, by this site's clock when it accepts them) and in
total (``site-configs/<site>/site.yaml``, ``results: limits:``; the defaults and keys in
:mod:`sitebench.sites.exchange_limits`).

Only commits that passed every other rule are counted, against the site whose signed runs
they add: a site can spend only its own allowance, never another's (a forged or unsigned
commit is refused before it is counted). A commit that would take a site over a bound is
refused with the bound's name and quarantined like any refusal; the commits of the other
sites around it still arrive. What was accepted is kept in ``.exchange/sitebench-usage.json``
(per site: totals, and the last 24 hours commit by commit), written after the pull moved
``refs/sitebench/accepted``.
"""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from sitebench.common import paths
from sitebench.results import verify
from sitebench.sites import exchange_limits, site_settings

USAGE_FILE = "sitebench-usage.json"
NIGHT_S = 24 * 3600
#: What is counted, in this order everywhere (usage lists, limit keys).
KINDS = ("commits", "runs", "files", "bytes")
#: Sizes are read from what is here: a blob the partial copy never fetched (another site's
#: bulk) is never fetched to be sized, and costs this site no bytes.
NO_FETCH = ("-c", "protocol.allow=never")


def configured(git_dir, site):
    """The ``results:`` settings of the site this exchange belongs to ({} without one)."""
    if site and (paths.site_config_dir(site) / "site.yaml").is_file():
        return site_settings.load(site).get("results") or {}
    return {}


def in_force(settings, site):
    """{limit key: value} applying to runs of ``site``."""
    return exchange_limits.resolve(settings.get("limits"), site)


def changes_by_commit(git_dir, commits):
    """{commit: [(new blob, path)]} of what each commit changed against its parent, from one
    ``git diff-tree --stdin`` (:func:`verify.changes_of`)."""
    found = verify.changes_of(verify.Git(git_dir, config=[NO_FETCH[1]]), list(commits))
    return {c: [(blob, path) for _, _, blob, path in entries] for c, entries in found.items()}


def _sizes(git_dir, blobs):
    """{blob: bytes} from one ``cat-file --batch-check``."""
    blobs = sorted({b for b in blobs if b and b != verify.ZERO})
    if not blobs:
        return {}
    out = subprocess.run(
        [
            "git",
            *NO_FETCH,
            "--git-dir",
            str(git_dir),
            "cat-file",
            "--batch-check=%(objectname) %(objectsize)",
        ],
        input="".join(f"{b}\n" for b in blobs),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def additions(git_dir, verdicts, prefix, sized_only=(), read=None):
    """{commit: {site: [1, runs, files, bytes]}} of the accepted verdicts that add runs;
    bytes are those this copy fetched (``sized_only``: the paths a partial copy fetches).
    ``read``: the range's changes the pull read already (:func:`verify.read_range`)."""
    commits = [v.commit for v in verdicts if v.ok and v.runs]
    if read is not None and all(c in read for c in commits):
        changes = {c: [(blob, path) for _, _, blob, path in read[c]] for c in commits}
    else:
        changes = changes_by_commit(git_dir, commits)
    sizes = _sizes(
        git_dir,
        [
            blob
            for entries in changes.values()
            for blob, _ in verify.sized_changes(entries, prefix, sized_only)
        ],
    )
    found = {}
    for verdict in verdicts:
        if verdict.commit not in changes:
            continue
        per_site = {}
        for site, run in verdict.runs:
            per_site.setdefault(site, [1, 0, 0, 0])[1] += 1
        skip = len(prefix)
        for blob, path in changes[verdict.commit]:
            site = path[skip:].partition("/")[0]
            if site in per_site:
                per_site[site][2] += 1
                per_site[site][3] += sizes.get(blob, 0)
        found[verdict.commit] = per_site
    return found


class Usage:
    """What each site added here: totals and the last 24 hours, commit by commit."""

    def __init__(self, git_dir, data):
        self.path = Path(git_dir) / USAGE_FILE
        self.sites = data

    @classmethod
    def load(cls, git_dir, prefix="", accepted=None):
        """The ledger; made once from the accepted history when there is none yet (an
        exchange from before the bounds), so its totals count what is already here."""
        path = Path(git_dir) / USAGE_FILE
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict) and isinstance(data.get("sites"), dict):
                return cls(git_dir, data["sites"])
        except (OSError, ValueError):
            pass
        return cls(git_dir, _from_history(git_dir, prefix, accepted))

    def total(self, site):
        return list(self.sites.get(site, {}).get("total", [0, 0, 0, 0]))

    def night(self, site, now):
        counts = [0, 0, 0, 0]
        for entry in self.sites.get(site, {}).get("recent", []):
            if now - entry[0] < NIGHT_S:
                counts = [a + b for a, b in zip(counts, entry[1:])]
        return counts

    def add(self, site, now, counts):
        entry = self.sites.setdefault(site, {"total": [0, 0, 0, 0], "recent": []})
        entry["total"] = [a + b for a, b in zip(entry["total"], counts)]
        entry["recent"] = [e for e in entry["recent"] if now - e[0] < NIGHT_S]
        entry["recent"].append([now, *counts])

    def save(self):
        fd, tmp = tempfile.mkstemp(prefix=".usage-", dir=self.path.parent)
        with os.fdopen(fd, "w") as handle:
            json.dump({"sites": self.sites}, handle, sort_keys=True)
        os.replace(tmp, self.path)


def _from_history(git_dir, prefix, accepted):
    """{site: {total, recent: []}} of an accepted history: runs, files and bytes from its
    tree, commits from its log (one pass each, done once)."""
    if not accepted:
        return {}
    sites = {}
    listing = None
    # Sizes where every blob is here; a partial copy (bulk never fetched) counts files only.
    for sized in (["-l"], []):
        proc = subprocess.run(
            ["git", *NO_FETCH, "--git-dir", str(git_dir), "ls-tree", "-r", *sized, "-z"]
            + [accepted, *([prefix] if prefix else [])],
            capture_output=True,
        )
        if proc.returncode == 0:
            listing = proc.stdout.decode("utf-8", errors="surrogateescape")
            break
    if listing is None:
        return {}
    runs = {}
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        parts = path[len(prefix) :].split("/")
        if len(parts) < 3 or not verify.SITE_NAME.fullmatch(parts[0]):
            continue
        total = sites.setdefault(parts[0], {"total": [0, 0, 0, 0], "recent": []})["total"]
        runs.setdefault(parts[0], set()).add(parts[1])
        size = meta.split()[-1]
        total[2] += 1
        total[3] += int(size) if size.isdigit() else 0
    for site, names in runs.items():
        sites[site]["total"][1] = len(names)
    log = subprocess.run(
        ["git", "--git-dir", str(git_dir), "log", "--format=%x01", "--name-only", accepted],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        check=True,
    ).stdout
    for commit in log.split("\x01")[1:]:
        touched = {p[len(prefix) :].split("/", 1)[0] for p in commit.split("\n") if p.strip()}
        for site in touched & set(sites):
            sites[site]["total"][0] += 1
    return sites


def _over(site, counts, night, total, limits):
    """The bound ``counts`` would take ``site`` over, named; "" when none."""
    for i, kind in enumerate(KINDS):
        for span, used in (("per_night", night[i]), ("total", total[i])):
            key = f"{kind}_{span}"
            if used + counts[i] > limits[key]:
                when = "in the last 24 hours" if span == "per_night" else "in total"
                return (
                    f"over the limit {key} of {site} ({limits[key]}): this commit adds "
                    f"{counts[i]} {kind} to the {used} accepted {when} (results: limits: in "
                    "this site's site.yaml sets it)"
                )
    return ""


def screen(git_dir, verdicts, prefix, settings, now=None, sized_only=(), changes=None):
    """(verdicts, usage): the accepted verdicts that would take their site over a bound
    turned into refusals, in order; ``usage`` holds the others and is saved by the caller
    once they are accepted. ``changes``: the range's, read once by the pull."""
    now = time.time() if now is None else now
    accepted = None
    proc = subprocess.run(
        [
            "git",
            "--git-dir",
            str(git_dir),
            "rev-parse",
            "-q",
            "--verify",
            "refs/sitebench/accepted",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        accepted = proc.stdout.strip()
    usage = Usage.load(git_dir, prefix, accepted)
    added = additions(git_dir, verdicts, prefix, sized_only, changes)
    screened = []
    for verdict in verdicts:
        per_site = added.get(verdict.commit)
        if not per_site:
            screened.append(verdict)
            continue
        reason = ""
        for site, counts in sorted(per_site.items()):
            reason = _over(
                site, counts, usage.night(site, now), usage.total(site), in_force(settings, site)
            )
            if reason:
                break
        if reason:
            screened.append(verify.Verdict(verdict.commit, reason))
            continue
        for site, counts in per_site.items():
            usage.add(site, now, counts)
        screened.append(verdict)
    return screened, usage

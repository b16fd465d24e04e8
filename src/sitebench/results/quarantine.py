"""Refused commits, kept for inspection and then let go.

Each refused commit gets a line in ``.exchange/sitebench-quarantine.tsv`` (time, commit,
site, reason: the record, kept) and a ref ``refs/sitebench/quarantine/<commit>`` that holds
its objects for inspection. The refs are bounded: never more than ``quarantine_refs``
(site.yaml ``results:``, default 100; the oldest go first, at every pull) and none older than
``quarantine_days`` (default 30, at ``./sitebench exchange prune``, which then lets git's own
``gc --prune=now`` drop the objects no ref reaches any more). Refs and log lines are written
in one ``update-ref --stdin`` and one append per pull, whatever the number of commits.
"""

import calendar
import os
import subprocess
import time

from sitebench.results import limits, verify

PREFIX = "refs/sitebench/quarantine/"
LOG = "sitebench-quarantine.tsv"
DEFAULT_REFS = 100
DEFAULT_DAYS = 30
NO_SITE = "(no run)"


def _git(git_dir, *args, stdin=None):
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def refs(git_dir):
    """{commit: ref} of the quarantine refs (one ``for-each-ref``)."""
    out = _git(git_dir, "for-each-ref", "--format=%(refname)", PREFIX)
    # A rewritten tip's ref is named rewrite-<commit> (refused as a history, not a commit).
    return {ref[len(PREFIX) :].removeprefix("rewrite-"): ref for ref in out.split()}


def sites_of(git_dir, commits, prefix):
    """{commit: site} named by the paths each commit adds, for the warning only (a forged
    path names the site it forged; the reason says who signed); NO_SITE without a run."""
    changes = limits.changes_by_commit(git_dir, commits)
    named = {}
    for commit in commits:
        found = sorted(
            {
                path[len(prefix) :].split("/", 1)[0]
                for _, path in changes.get(commit, [])
                if path.startswith(prefix) and "/" in path[len(prefix) :]
            }
        )
        found = [site for site in found if verify.SITE_NAME.fullmatch(site)]
        named[commit] = ",".join(found[:3]) + (",..." if len(found) > 3 else "") or NO_SITE
    return named


def keep(git_dir, verdicts, prefix, max_refs=DEFAULT_REFS):
    """Quarantine the refused ``verdicts``: [(site, commit, reason)] of each, in order. A
    commit refused before (a rewrite met again) is not logged twice."""
    if not verdicts:
        return []
    held = refs(git_dir)
    named = sites_of(git_dir, [v.commit for v in verdicts], prefix)
    fresh = [v for v in verdicts if v.commit not in held]
    if fresh:
        # Refs only for the newest that the cap keeps: each ref is a file git locks.
        _git(
            git_dir,
            "update-ref",
            "--stdin",
            stdin="".join(f"update {PREFIX}{v.commit} {v.commit}\n" for v in fresh[-max_refs:]),
        )
        append_log(git_dir, [(v.commit, named[v.commit], v.reason) for v in fresh])
        cap(git_dir, max_refs)
    return [(named[v.commit], v.commit, v.reason) for v in verdicts]


def append_log(git_dir, rows, name=LOG):
    """Append [(commit, site, reason)] to the log ``name`` of ``git_dir``, stamped now
    (UTC), synced: the quarantine's, or another of its form (results.rejudge)."""
    if not rows:
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(f"{git_dir}/{name}", "a", encoding="utf-8") as log:
        log.writelines(f"{stamp}\t{commit}\t{site}\t{reason}\n" for commit, site, reason in rows)
        log.flush()
        os.fsync(log.fileno())


def log_rows(git_dir, name=LOG):
    """[(time, commit, site, reason)] of every line of the log ``name``, oldest first
    (lines written before the site column read with site "")."""
    try:
        text = open(f"{git_dir}/{name}", encoding="utf-8").read()
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 4:
            rows.append((parts[0], parts[1], parts[2], "\t".join(parts[3:])))
        elif len(parts) == 3:
            rows.append((parts[0], parts[1], "", parts[2]))
    return rows


def _drop(git_dir, names):
    if names:
        _git(git_dir, "update-ref", "--stdin", stdin="".join(f"delete {r}\n" for r in names))
    return len(names)


def cap(git_dir, max_refs):
    """Delete the oldest quarantine refs beyond ``max_refs``; how many went."""
    held = refs(git_dir)
    if len(held) <= max_refs:
        return 0
    order = {row[1]: i for i, row in enumerate(log_rows(git_dir))}
    # Refs the log does not name (a deleted branch's) are the newest: kept longest.
    oldest = sorted(held, key=lambda commit: order.get(commit, len(order)))
    return _drop(git_dir, [held[c] for c in oldest[: len(held) - max_refs]])


def expire(git_dir, days, now=None):
    """Delete the quarantine refs of commits refused more than ``days`` days ago."""
    now = time.time() if now is None else now
    held = refs(git_dir)
    old = set()
    for when, commit, _, _ in log_rows(git_dir):
        try:
            stamp = calendar.timegm(time.strptime(when, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            continue
        if commit in held and now - stamp > days * 86400:
            old.add(held[commit])
    return _drop(git_dir, sorted(old))


def gc(git_dir):
    """git's own gc, dropping now every object no ref reaches (the refused commits whose refs
    went, unless a later accepted commit still holds them)."""
    _git(git_dir, "gc", "--quiet", "--prune=now")

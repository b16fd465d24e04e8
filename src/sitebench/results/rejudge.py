"""Refused commits judged again under this site's trust list as it is today.

A pull gives every commit refused before :data:`~sitebench.results.verify.REFUSED_BEFORE`
without a second look. When the refusal came from this site's own list (a site's key not
added yet, a registry line set aside), ``./sitebench exchange quarantine --rejudge`` lets the
admin, once the list is fixed, have those commits verified again exactly as a pull verifies
them: :func:`~sitebench.results.verify.check_range` from the last commit accepted before
them, the same rules, limits and signature checks, blobs read from the copy, nothing
executed. What passes has its runs taken as a pull takes them (the runs log, which the store
reads at its next refresh), never over a run accepted here; its quarantine ref becomes a
``refs/sitebench/rejudged/`` ref (its objects stay reachable) and a line in
``.exchange/sitebench-rejudged.tsv`` records it. What still fails stays quarantined, a new
reason logged when it changed.
"""

import re
from dataclasses import dataclass, field

from sitebench.common.errors import SitebenchError
from sitebench.results import exchange, limits, quarantine, registry, trust, verify

REJUDGED = "refs/sitebench/rejudged/"
LOG = "sitebench-rejudged.tsv"
#: Quarantine log lines that name no refused commit: judged again never.
NOT_A_COMMIT = ("baseline let go",)


@dataclass
class Rejudged:
    """What :func:`rejudge` did: ``accepted`` [(commit, site, [runs taken])], ``refused``
    [(commit, site, reason)] of the commits that stay quarantined, ``before`` the commits
    accepted by an earlier re-judgement (nothing to do)."""

    accepted: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    before: list = field(default_factory=list)
    set_aside: list = field(default_factory=list)


def accepted_before(ex):
    """{commit: (time, site, what)} of the commits a re-judgement accepted here."""
    found = {}
    for when, commit, site, what in quarantine.log_rows(ex.git_dir, LOG):
        found.setdefault(commit, (when, site, what))
    return found


def waiting(ex):
    """The commits refused here that a re-judgement could take (not accepted since, not a
    rewrite)."""
    before = accepted_before(ex)
    return [
        commit
        for commit, (_, reason) in _latest_rows(ex).items()
        if commit not in before and not reason.startswith(NOT_A_COMMIT + (verify.REWRITE,))
    ]


def _latest_rows(ex):
    """{commit: (site, reason)} of the quarantine log, the newest line of each commit."""
    rows = {}
    for _, commit, site, reason in quarantine.log_rows(ex.git_dir):
        if re.fullmatch(r"[0-9a-f]{40}", commit):
            rows[commit] = (site, reason)
    return rows


def _resolve(ids, rows):
    """The full commit ids asked for (abbreviated as ``exchange quarantine`` prints them)."""
    found = []
    for asked in ids:
        name = asked.strip().lower()
        hits = (
            [c for c in rows if c.startswith(name)]
            if re.fullmatch(r"[0-9a-f]{7,40}", name)
            else []
        )
        if len(hits) != 1:
            why = "matches several refused commits" if hits else "is not a commit refused here"
            raise SitebenchError(
                f"{asked!r} {why}",
                "give a commit as ./sitebench exchange quarantine lists it (at least 7 hex "
                "digits); without a commit every refused one is judged again",
            )
        reason = rows[hits[0]][1]
        if reason.startswith(NOT_A_COMMIT):
            raise SitebenchError(
                f"{asked!r} was not refused as a commit ({reason})",
                "nothing to judge again: ./sitebench pull --expect COMMIT re-pins a baseline",
            )
        if hits[0] not in found:
            found.append(hits[0])
    return found


def rejudge(results_root=None, commits=()):
    """Judge again ``commits`` (every commit quarantined here when empty); a
    :class:`Rejudged`."""
    ex = exchange.Exchange(results_root or exchange.paths.results_dir())
    if not ex.exists:
        raise SitebenchError(
            f"{ex.results_root} is not connected to a results repository",
            "./sitebench pull --remote URL connects it (results/README.md)",
        )
    with ex.locked():
        done = Rejudged()
        rows = _latest_rows(ex)
        before = accepted_before(ex)
        wanted = _resolve(commits, rows) if commits else list(rows)
        done.before = [c for c in wanted if c in before]
        targets = [
            c for c in wanted if c not in before and not rows[c][1].startswith(NOT_A_COMMIT)
        ]
        if not targets:
            return done
        # A registry line set aside against the list as it was is taken first (what the
        # next pull would do): the commits are then judged with the keys it gives.
        done.set_aside = registry.retry_aside(ex)
        prefix = ex.setting("prefix", "")
        still = {c for c in ex._quarantined_commits() if c not in before}
        verdicts, sized = _verdicts(ex, targets, still, rows, prefix)
        settings = limits.configured(ex.git_dir, ex.setting("site"))
        screened, usage = limits.screen(ex.git_dir, verdicts, prefix, settings, sized_only=sized)
        # In the pull's order: the runs, the accepted ref, the usage; then the records, so a
        # re-judgement killed on the way is done again whole (nothing is taken twice).
        taken = ex.take_runs(screened, prefix)
        moved = _advance(ex, [v.commit for v in screened if v.ok])
        usage.save()
        _record(ex, screened, rows, taken, done)
        if moved:
            # As a pull takes the registry it accepted; what stays set aside is said anew.
            registry.sync(ex, exchange.ACCEPTED)
            done.set_aside = registry.aside_lines(ex)
        return done


def _verdicts(ex, targets, still, rows, prefix):
    """[Verdict] of each target, in the order given: a history rewrite or a commit whose
    objects are gone here is refused as such; the others are verified by ``check_range``
    from the nearest ancestor accepted here, the quarantined commits between given
    REFUSED_BEFORE (a pull judged them against that same commit)."""
    pending, verdicts, sized = [], {}, set()
    for commit in targets:
        reason = rows[commit][1]
        if reason.startswith(verify.REWRITE):
            verdicts[commit] = verify.Verdict(commit, reason)
        elif ex.git("cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode:
            verdicts[commit] = verify.Verdict(
                commit,
                "its objects are no longer here (quarantine refs are kept quarantine_days "
                "and quarantine_refs; ./sitebench exchange prune let them go)",
            )
        else:
            pending.append(commit)
    groups = {}
    for commit in pending:
        groups.setdefault(_base(ex, commit, still), []).append(commit)
    for base, group in groups.items():
        left = list(group)
        while left:
            tip = left[0]
            for commit in left[1:]:
                if _is_ancestor(ex, tip, commit):
                    tip = commit
            judged, paths = _check(ex, base, tip, still - set(left), prefix)
            sized |= paths
            for verdict in judged:
                if verdict.commit in left:
                    verdicts[verdict.commit] = verdict
            rest = [c for c in left if c not in verdicts]
            if len(rest) == len(left):  # never: the tip itself is always judged
                raise SitebenchError(f"{tip[:12]} could not be judged again", "pull, then retry")
            left = rest
    # Sized by the limits as the pull sizes them: the files fetched (all, from a remote
    # that ignored the blob filter).
    return [verdicts[c] for c in targets], () if ex.whole else frozenset(sized)


def _advance(ex, accepted):
    """Move the accepted ref to the newest commit now accepted after it, as the pull would
    have: publish builds on that tree (with what the re-judged commits added), and the
    next pull judges from there. Whether it moved."""
    tip = ex.rev(exchange.ACCEPTED)
    newest = None
    for commit in accepted:
        if tip is None or (commit != tip and _is_ancestor(ex, tip, commit)):
            if newest is None or _is_ancestor(ex, newest, commit):
                newest = commit
    if newest is None:
        return False
    # Only if the ref is still where it was read (one update-ref, as the pull's).
    ex.git("update-ref", exchange.ACCEPTED, newest, *([tip] if tip else []))
    return True


def _is_ancestor(ex, old, new):
    return ex.git("merge-base", "--is-ancestor", old, new, check=False).returncode == 0


def _base(ex, commit, still):
    """The nearest first-parent ancestor of ``commit`` not refused here: the commit a pull
    judged it against (None: from the root)."""
    out = ex.git(*exchange.NO_LAZY_FETCH, "rev-list", "--first-parent", f"{commit}^", check=False)
    for ancestor in out.stdout.split():
        if ancestor not in still:
            return ancestor
    return None


def _check(ex, base, tip, refused, prefix):
    """check_range of ``base..tip`` as a pull runs it: the rules of today's trust list, the
    files a pull sizes (the index files, fetched if this copy lacks them)."""
    rules = trust.rules(prefix=prefix)
    git = verify.Git(ex.git_dir, config=[exchange.NO_LAZY_FETCH[1]])
    read = verify.read_range(git, base, tip)
    wanted = ex.index_blobs(tip, base, prefix, read[1])
    try:
        ex.fetch_index_blobs(wanted)
    except exchange.GitFailed:
        pass  # a blob not served: its commit is refused ("its content is missing")
    paths = frozenset(path for path, _ in wanted)
    rules.sized_only = () if ex.whole else paths
    return verify.check_range(git, base, tip, rules, frozenset(refused), read), paths


def _record(ex, verdicts, rows, taken, done):
    """Refs and logs: an accepted commit's quarantine ref becomes its rejudged ref (one
    ``update-ref --stdin``), a line each in the rejudged log; a still refused commit's new
    reason is logged in the quarantine log."""
    runs = {}
    for verdict in verdicts:
        for site, run in verdict.runs if verdict.ok else ():
            if run in taken.get(site, ()):
                runs.setdefault(verdict.commit, []).append(f"{site}/{run}")
    held = quarantine.refs(ex.git_dir)
    moves, accepted_lines, refused_lines = [], [], []
    for verdict in verdicts:
        site, reason = rows[verdict.commit]
        if verdict.ok:
            # The sites of the runs it adds (the log names the paths it changed against its
            # parent, a left-out commit's removals included).
            site = ",".join(sorted({name for name, _ in verdict.runs})) or site
            taken_here = sorted(runs.get(verdict.commit, []))
            done.accepted.append((verdict.commit, site, taken_here))
            moves.append(f"update {REJUDGED}{verdict.commit} {verdict.commit}\n")
            if verdict.commit in held and not held[verdict.commit].endswith(
                f"rewrite-{verdict.commit}"
            ):
                moves.append(f"delete {held[verdict.commit]}\n")
            what = f"accepted, {len(taken_here)} run(s) taken"
            accepted_lines.append((verdict.commit, site or "-", what))
        else:
            done.refused.append((verdict.commit, site, verdict.reason))
            if verdict.reason != reason:
                refused_lines.append((verdict.commit, site, verdict.reason))
    if moves:
        ex.git("update-ref", "--stdin", stdin="".join(moves))
    quarantine.append_log(ex.git_dir, accepted_lines, LOG)
    quarantine.append_log(ex.git_dir, refused_lines)

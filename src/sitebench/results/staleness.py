"""Sites that stopped publishing: the newest run of a site is older than N days.

Read from the run directories' names (``<UTC start>-<random>``), so it costs a directory
listing per site and no index; ``compare`` and ``report`` name them."""

import datetime as dt
import time

from sitebench.results.exchange import accepted_run_names, accepted_sites
from sitebench.results.rundirs import run_dirs, site_dirs

DEFAULT_DAYS = 3


def _started(name):
    try:
        return dt.datetime.strptime(name.split("-", 1)[0], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=dt.timezone.utc
        )
    except ValueError:
        return None


def newest_runs(results_root=None):
    """{site: UTC start of its newest run} of every site with a run."""
    newest = {}
    sites = {p.name for p in site_dirs(results_root)} | set(accepted_sites(results_root))
    for site in sorted(sites):
        names = {p.name for p in run_dirs(site, results_root)}
        names |= accepted_run_names(site, results_root)
        times = [t for t in (_started(name) for name in names) if t]
        if times:
            newest[site] = max(times)
    return newest


def stale_sites(results_root=None, days=DEFAULT_DAYS, now=None, sites=None):
    """[(site, newest run's UTC start)] of the sites (all, or ``sites``) whose newest run
    started more than ``days`` days before ``now`` (default: now), oldest first."""
    now = now or dt.datetime.fromtimestamp(time.time(), dt.timezone.utc)
    limit = now - dt.timedelta(days=days)
    found = [
        (site, when)
        for site, when in newest_runs(results_root).items()
        if when < limit and (sites is None or site in sites)
    ]
    return sorted(found, key=lambda item: item[1])


def describe(site, when, now=None):
    """'site X: newest run 2026-11-22 11:14 UTC, 2 days old (did it stop publishing?)'."""
    now = now or dt.datetime.fromtimestamp(time.time(), dt.timezone.utc)
    age = (now - when).total_seconds() / 86400
    return (
        f"site {site!r}: its newest run started {when:%Y-%m-%d %H:%M} UTC, {age:.0f} days ago "
        "(did it stop running or publishing? ./sitebench pull brings what was published)"
    )

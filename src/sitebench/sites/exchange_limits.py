"""What one other site may add to this site's copy of the results exchange, per night and in
total: ``results: limits:`` of ``site-configs/<site>/site.yaml``, every key optional.

    results:
      limits:
        runs_per_night: 100        # in any 24 hours, by this site's clock when it accepts them
        bytes_per_night: 512MiB    # sizes: a whole number of bytes or with KiB/MiB/GiB
        sites:                     # other values for named sites (a centre with a big suite)
          bigcentre: {runs_per_night: 40, bytes_per_night: 1GiB}
      keep_days: 30                # retention of other sites' materialised bulk (optional)
      quarantine_days: 30          # refused commits kept for inspection, then dropped
      quarantine_refs: 100         # and never more than this many

The defaults come from a real run of the quick suite (2026-11-27, both toolchains: 521
files, 3.3 MB) and a night of one to a few runs, with room for a site's backlog (two weeks
of a few runs a night, or a first publish of its earlier runs: 16 in one commit was refused
at 12): a night allows 100 runs, 60,000 files and 512 MiB (on the partial copy a run costs
another site 86 KiB packed for a 346-file run of 2026-11-25, 111 KiB projected for
today's 521-file run: perf/results/exchange-20261128T000911Z.json); the totals allow about
5 years of 5 runs a night.
"""

import re

#: key -> default. ``*_per_night`` counts what was accepted in the last 24 hours.
DEFAULTS = {
    "commits_per_night": 24,
    "runs_per_night": 100,
    "files_per_night": 60_000,
    "bytes_per_night": 512 * 2**20,
    "commits_total": 20_000,
    "runs_total": 10_000,
    "files_total": 6_000_000,
    "bytes_total": 64 * 2**30,
}
SIZE_KEYS = {"bytes_per_night", "bytes_total"}
_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB|TiB)?\s*")
_UNITS = {None: 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
EXAMPLE = "e.g. limits: {runs_per_night: 12, bytes_per_night: 192MiB}"


def parse_size(value):
    """Bytes of ``value`` (a whole number, or text like ``192MiB``); None when it is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match:
            return int(match.group(1)) * _UNITS[match.group(2)]
    return None


def _values_problems(rel, where, values):
    found = []
    if not isinstance(values, dict):
        return [(where, f"{rel}: {where} is {values!r}, expected a mapping", EXAMPLE)]
    for key, value in values.items():
        name = f"{where}.{key}"
        if key not in DEFAULTS:
            found.append(
                (name, f"{rel}: {where}: unknown key {key!r}", f"keys: {', '.join(DEFAULTS)}")
            )
            continue
        number = parse_size(value) if key in SIZE_KEYS else value
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            what = (
                "a size (bytes, or e.g. 192MiB)" if key in SIZE_KEYS else "a positive whole number"
            )
            found.append((name, f"{rel}: {name} is {value!r}, expected {what}", EXAMPLE))
    return found


def problems(rel, limits):
    """[(key, problem, fix)] of a ``results: limits:`` mapping."""
    if not isinstance(limits, dict):
        return [
            ("results.limits", f"{rel}: results.limits is {limits!r}, expected a mapping", EXAMPLE)
        ]
    own = {k: v for k, v in limits.items() if k != "sites"}
    found = _values_problems(rel, "results.limits", own)
    sites = limits.get("sites", {})
    if not isinstance(sites, dict):
        return found + [
            (
                "results.limits.sites",
                f"{rel}: results.limits.sites is {sites!r}, expected a mapping of site names",
                "e.g. sites: {bigcentre: {runs_per_night: 40}}",
            )
        ]
    for site, values in sites.items():
        found += _values_problems(rel, f"results.limits.sites.{site}", values)
    return found


def resolve(limits, site):
    """{key: value} in force for runs of ``site`` under a validated ``limits`` mapping."""
    limits = limits or {}
    chosen = dict(DEFAULTS)
    for layer in (limits, (limits.get("sites") or {}).get(site) or {}):
        for key, value in layer.items():
            if key in DEFAULTS:
                chosen[key] = parse_size(value) if key in SIZE_KEYS else value
    return chosen

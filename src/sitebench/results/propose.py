"""References from history: propose ``references.yaml`` entries from a site's last runs.

Each check names the variables its references are indexed by (its
``reference_keys``, logged in every run's report); the proposal indexes each
check by ``$processor.arch`` (the run's ``cpu_arch``) and those keys.

Rule (noise-aware, stated): over the last N runs of the site, for each
check, parameter set and figure, the value is the median; the run-to-run
noise is sigma = 1.4826 x MAD / median (as in ``compare``), and the
tolerance on the losing side is max(SIGMAS x sigma, MIN_TOLERANCE). The
winning side stays open (null): a faster run never fails. Which side loses
follows the unit: times and latencies (s, ms, us) lose upwards, every other
figure (rates, bandwidths, Mop/s...) loses downwards. Figures in bytes or
counts (where a peak was, how many errors) and figures whose median is 0 get
no reference: they describe the run, and sanity decides on errors.

The values come from the results store (:mod:`sitebench.results.store`): one DuckDB query over
the Parquet index, so years of nightly runs take no longer than a few.
"""

import difflib
import json
import math

import yaml

from sitebench.results import store
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic

MIN_RUNS = 3
SIGMAS = 3.0
MIN_TOLERANCE = 0.05
MAD_TO_SIGMA = 1.4826
LOWER_IS_BETTER_UNITS = {"s", "ms", "us", "ns"}
#: Descriptive figures (where a peak was, how many errors): recorded, not held to a value.
UNJUDGED_UNITS = {"B", "count"}


def _round(value):
    """Three significant digits: more would pretend a precision the noise does not have."""
    if value == 0:
        return 0
    digits = 2 - int(math.floor(math.log10(abs(value))))
    rounded = round(value, digits)
    return int(rounded) if digits <= 0 else rounded


def collect(site, last, root=None, warn=None, progress=None):
    """The site's last ``last`` run names and the :func:`history` rows over them."""
    con = store.open_store([site], root, warn, progress)
    return history(con, site, last)


def history(con, site, last):
    """Per (check, arch, keys, key values, figure) over the site's last ``last`` runs:
    unit, median, MAD, count and whether the keys are the check's current index."""
    runs = [
        name
        for (name,) in con.execute(
            "SELECT run FROM runs WHERE site = ? ORDER BY run DESC LIMIT ?", [site, last]
        ).fetchall()
    ][::-1]
    rows = con.execute(
        """
        WITH recent AS (
            SELECT * FROM figures
            WHERE site = ? AND run IN (SELECT unnest(?::VARCHAR[]))
              AND figure <> 'job_wall' AND isfinite(value)
        ), newest AS (
            -- The index each check declares in the newest run that has it.
            SELECT "check", arg_max(ref_keys, run) AS keys FROM recent
            WHERE ref_keys IS NOT NULL GROUP BY ALL
        )
        SELECT "check", arch, ref_keys, ref_index, figure, any_value(unit) AS unit,
            median(value) AS median, mad(value) AS mad, count(*) AS n,
            ref_keys = newest.keys AS current_index
        FROM recent JOIN newest USING ("check")
        WHERE arch IS NOT NULL
        GROUP BY "check", arch, ref_keys, ref_index, figure, newest.keys
        ORDER BY "check", arch, ref_keys, ref_index, figure
        """,
        [site, runs],
    ).fetchall()
    return runs, rows


def propose(site, last=5, root=None, warn=None, min_tolerance=MIN_TOLERANCE):
    """The proposed references mapping, the notes on what was left out, and the runs used."""
    runs, rows = collect(site, last, root, warn)
    if len(runs) < MIN_RUNS:
        raise SitebenchError(
            f"site {site!r} has {len(runs)} stored run(s); references need at least "
            f"{MIN_RUNS} to measure the noise",
            f"run the suite again (./sitebench run --site {site}) until there are {MIN_RUNS}",
        )
    proposal, notes = build(rows, min_tolerance)
    return proposal, notes, runs


def build(rows, min_tolerance=MIN_TOLERANCE):
    """The references mapping from :func:`history` rows, and notes on what was left out."""
    proposal, notes = {}, []
    for check, arch, keys_json, index_json, figure, unit, median, mad, n, current in rows:
        keys, index = json.loads(keys_json), json.loads(index_json)
        label = f"{check} {dict(zip(keys, index))} {figure}"
        if not current:
            # The check's index changed: older runs cannot say which entry they belong to.
            notes.append(f"{label}: from runs indexed by {keys}, since changed; left out")
            continue
        if n < MIN_RUNS:
            notes.append(f"{label}: {n} value(s), need {MIN_RUNS}; left out")
            continue
        if unit in UNJUDGED_UNITS:
            notes.append(f"{label}: unit {unit} describes the run; left out")
            continue
        if median == 0:
            notes.append(f"{label}: median 0, left to the check's sanity")
            continue
        noise = MAD_TO_SIGMA * mad / abs(median)
        tolerance = round(max(SIGMAS * noise, min_tolerance), 2)
        lower, upper = (None, tolerance) if unit in LOWER_IS_BETTER_UNITS else (-tolerance, None)
        block = proposal.setdefault(check, {"$index": ["$processor.arch", *keys]})
        node = block.setdefault(arch, {})
        for key in index:
            node = node.setdefault(key, {})
        node[figure] = [_round(median), lower, upper, unit]
    return proposal, notes


def render(site, proposal, runs, min_tolerance=MIN_TOLERANCE):
    header = (
        f"# References of site {site!r}, proposed by `sitebench references {site}` from its\n"
        f"# last {len(runs)} runs ({runs[0]} .. {runs[-1]}).\n"
        f"# Value = median; the losing side's tolerance = max({SIGMAS:g} x noise, "
        f"{min_tolerance:g}),\n# noise = 1.4826 x MAD / median; the winning side is open. "
        f"Review before committing.\n"
    )
    return header + yaml.safe_dump(proposal, sort_keys=False, default_flow_style=None, width=99)


def merged(current_text, proposal):
    """The current file's checks, with the proposed checks replacing theirs."""
    current = yaml.safe_load(current_text) or {} if current_text else {}
    if not isinstance(current, dict):
        raise SitebenchError("the current references file is not a mapping", "fix or empty it")
    return {**{k: v for k, v in current.items() if k not in proposal}, **proposal}


def diff(path, new_text):
    old = path.read_text() if path.is_file() else ""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"{path} (current)",
            tofile=f"{path} (proposed)",
        )
    )


def apply(site, path, last=5, write=False, root=None, warn=None, min_tolerance=MIN_TOLERANCE):
    """Diff (and with ``write``, the new file) of ``path`` against the proposal."""
    if not 0 <= min_tolerance < 1:
        raise SitebenchError(
            f"minimum tolerance {min_tolerance} is not a fraction",
            "give a number from 0 to 1, e.g. 0.05 for 5 %",
        )
    proposal, notes, runs = propose(site, last, root, warn, min_tolerance)
    if not proposal:
        raise SitebenchError(
            f"no figure of site {site!r} could be proposed",
            "; ".join(notes) or "its runs hold no figures of checks with reference_keys",
        )
    current = path.read_text() if path.is_file() else ""
    text = render(site, merged(current, proposal), runs, min_tolerance)
    change = diff(path, text)
    if write and change:
        write_atomic(path, text)
    return change, notes

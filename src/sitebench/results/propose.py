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

Only like with like: each toolchain apart (a check measured in several is indexed by
``toolchain``: MPICH's latency is not Open MPI's); where the site's figures are per host
(``local``; the store's ``host``), only the runs of the host of the site's newest run are
used, and the proposal records that host's fingerprint as ``$host``
(:mod:`sitebench.sites.host`): the references then apply on that host only. Where one
reference entry was measured at several problem sizes (the store's
``problem``: HPL's N, NPB's class...), only the size of its newest run is used; the others
are named in the notes. Figures measured while other work took the machine's CPU (the store's
``disturbed``) are left out unless ``include_disturbed``: they are not the machine's alone,
and would move the median; the notes say how many.

The values come from the results store (:mod:`sitebench.results.store`): one DuckDB query over
the Parquet index, so years of nightly runs take no longer than a few.
"""

import difflib
import json
import math
import sys

import yaml

from sitebench.results import store
from sitebench.results.figures import shown_problem
from sitebench.results import exchange_runs, figures, runfiles
from sitebench.results.rundirs import TOPOLOGY, run_dirs
from sitebench.sites import host
from sitebench.common import paths
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


def newest_host(con, site):
    """The host id of the site's newest run where its figures are per host, else None."""
    return con.execute(
        "SELECT arg_max(host, run) FROM figures WHERE site = ? AND host IS NOT NULL", [site]
    ).fetchone()[0]


def count_disturbed(con, site, runs):
    """How many figures of ``runs`` (judged ones: finite, not the job's wall time) were
    measured while other work took the machine's CPU."""
    return con.execute(
        "SELECT count(*) FROM figures WHERE site = ? AND run IN (SELECT unnest(?::VARCHAR[])) "
        "AND figure <> 'job_wall' AND isfinite(value) AND disturbed",
        [site, list(runs)],
    ).fetchone()[0]


def disturbed_left_out(count):
    """The one line the drift check and the references say of what they left out."""
    return f"{count} disturbed figure(s) left out (--include-disturbed keeps them)"


def history(con, site, last, host_id=None, include_disturbed=False):
    """Per (check, arch, toolchain, keys, key values, figure) over the site's last ``last``
    runs (of host ``host_id`` only, when given): unit, median, MAD, count, whether the keys
    are the check's current index, and the problem sizes left out. Disturbed figures are
    left out unless ``include_disturbed``."""
    where_host = (
        "AND run IN (SELECT run FROM figures WHERE site = ? AND host = ?)" if host_id else ""
    )
    runs = [
        name
        for (name,) in con.execute(
            f"SELECT run FROM runs WHERE site = ? {where_host} ORDER BY run DESC LIMIT ?",
            [site] + ([site, host_id] if host_id else []) + [last],
        ).fetchall()
    ][::-1]
    rows = con.execute(
        """
        WITH chosen AS (
            SELECT * FROM figures
            WHERE site = ? AND run IN (SELECT unnest(?::VARCHAR[]))
              AND figure <> 'job_wall' AND isfinite(value) AND (? OR disturbed IS NOT TRUE)
        ), sizes AS (
            -- One problem size per entry: that of its newest run.
            SELECT "check", arch, environ, ref_keys, ref_index, figure,
                arg_max(problem, run) AS size, list(DISTINCT problem) AS all_sizes
            FROM chosen GROUP BY ALL
        ), recent AS (
            SELECT chosen.* FROM chosen JOIN sizes
                ON chosen."check" = sizes."check" AND chosen.arch = sizes.arch
                AND chosen.environ IS NOT DISTINCT FROM sizes.environ
                AND chosen.ref_keys = sizes.ref_keys AND chosen.ref_index = sizes.ref_index
                AND chosen.figure = sizes.figure
            WHERE chosen.problem IS NOT DISTINCT FROM sizes.size
        ), newest AS (
            -- The index each check declares in the newest run that has it.
            SELECT "check", arg_max(ref_keys, run) AS keys FROM recent
            WHERE ref_keys IS NOT NULL GROUP BY ALL
        )
        SELECT recent."check", recent.arch, recent.environ, recent.ref_keys, recent.ref_index,
            recent.figure, any_value(unit) AS unit,
            median(value) AS median, mad(value) AS mad, count(*) AS n,
            recent.ref_keys = newest.keys AS current_index,
            any_value(size) AS size, any_value(all_sizes) AS all_sizes
        FROM recent JOIN newest USING ("check") JOIN sizes
            ON recent."check" = sizes."check" AND recent.arch = sizes.arch
            AND recent.environ IS NOT DISTINCT FROM sizes.environ
            AND recent.ref_keys = sizes.ref_keys AND recent.ref_index = sizes.ref_index
            AND recent.figure = sizes.figure
        WHERE recent.arch IS NOT NULL
        GROUP BY ALL
        ORDER BY ALL
        """,
        [site, runs, include_disturbed],
    ).fetchall()
    return runs, rows


def _warn_stderr(message):
    print(f"warning: {message}", file=sys.stderr)


def propose(
    site, last=5, root=None, warn=None, min_tolerance=MIN_TOLERANCE, include_disturbed=False
):
    """The proposed references mapping, the notes on what was left out, and the runs used.

    Where the site's figures are per host, the mapping starts with ``$host``: the fingerprint
    of the host of the runs used (none when that host is unknown). Runs the store skips
    (unreadable, hostile) are named through ``warn`` (default: on stderr)."""
    con = store.open_store([site], root, warn or _warn_stderr)
    host_id = newest_host(con, site)
    runs, rows = history(con, site, last, host_id, include_disturbed)
    if len(runs) < MIN_RUNS:
        raise SitebenchError(
            f"site {site!r} has {len(runs)} stored run(s); references need at least "
            f"{MIN_RUNS} to measure the noise",
            f"run the suite again (./sitebench run --site {site}) until there are {MIN_RUNS}",
        )
    proposal, notes = build(rows, min_tolerance)
    disturbed = 0 if include_disturbed else count_disturbed(con, site, runs)
    if disturbed:
        notes.append(disturbed_left_out(disturbed))
    if host_id and proposal:
        fp = run_host(con, site, runs[-1], root)
        if fp.get("id") == host.UNKNOWN:
            notes.append(
                f"the runs {runs[0]} .. {runs[-1]} record no host: the references name none "
                "and apply on no host"
            )
        else:
            proposal = {host.REFERENCES_KEY: fp, **proposal}
        others = con.execute(
            "SELECT count(DISTINCT run) FROM figures WHERE site = ? AND host <> ?",
            [site, host_id],
        ).fetchone()[0]
        if others:
            notes.append(
                f"{others} run(s) of other hosts left out: references apply to "
                f"{host.describe(fp)} only"
            )
    return proposal, notes, runs


def run_host(con, site, run, root=None):
    """The host fingerprint of one stored run (recorded, derived or unknown)."""
    prov, origin = con.execute(
        "SELECT provenance, origin FROM runs WHERE site = ? AND run = ?", [site, run]
    ).fetchone()
    path = next((p for p in run_dirs(site, root) if p.name == run), None)
    try:  # read as the store reads it: never through a link, never outside the run
        topology = runfiles.read_json(path, TOPOLOGY) if path else None
    except runfiles.UnsafeFile:
        topology = None
    if path is None and isinstance(origin, str) and origin.startswith("exchange "):
        _, commit, tree = origin.split()  # another site's run, read from git as indexed
        [(_entry, loaded)] = exchange_runs.load(
            root or paths.results_dir(), [(site, run, tree, commit)]
        )
        topology = None if isinstance(loaded, Exception) else loaded.topology
    return figures.run_host(json.loads(prov or "{}"), topology)


def _index_keys(check, keys, toolchains):
    """The check's reference keys, after ``toolchain`` where it was measured in several."""
    return ["toolchain", *keys] if len(toolchains[check]) > 1 else keys


def build(rows, min_tolerance=MIN_TOLERANCE):
    """The references mapping from :func:`history` rows, and notes on what was left out.

    A check measured in more than one toolchain (the store's ``environ``: the MPI checks of a
    site with MPICH and Open MPI) is indexed by ``toolchain`` after the CPU, so each
    toolchain is held to its own figures; a check measured in one keeps the plain index."""
    toolchains = {}
    for check, _, environ, *_ in rows:
        toolchains.setdefault(check, set()).add(environ)
    proposal, notes = {}, []
    for row in rows:
        check, arch, environ, keys_json, index_json, figure, unit, median, mad, n, current = row[
            :11
        ]
        size, sizes = row[11:]  # the problem size used and all sizes seen
        keys, index = json.loads(keys_json), json.loads(index_json)
        if len(toolchains[check]) > 1:
            index = [environ, *index]
        label = f"{check} {dict(zip(_index_keys(check, keys, toolchains), index))} {figure}"
        for other in sizes or []:
            if other != size:
                notes.append(f"{label}: runs of problem size {shown_problem(other)!r} left out")
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
        block = proposal.setdefault(
            check, {"$index": ["$processor.arch", *_index_keys(check, keys, toolchains)]}
        )
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
    both = {**{k: v for k, v in current.items() if k not in proposal}, **proposal}
    # The host the references were made on comes first, where a reader looks.
    first = {k: both.pop(k) for k in [host.REFERENCES_KEY] if k in both}
    return {**first, **both}


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


def apply(
    site,
    path,
    last=5,
    write=False,
    root=None,
    warn=None,
    min_tolerance=MIN_TOLERANCE,
    include_disturbed=False,
):
    """Diff (and with ``write``, the new file) of ``path`` against the proposal."""
    if not 0 <= min_tolerance < 1:
        raise SitebenchError(
            f"minimum tolerance {min_tolerance} is not a fraction",
            "give a number from 0 to 1, e.g. 0.05 for 5 %",
        )
    proposal, notes, runs = propose(site, last, root, warn, min_tolerance, include_disturbed)
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

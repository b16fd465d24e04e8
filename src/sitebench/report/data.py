"""The report's data: figures and runs from the results store, plus what only the runs' own
files hold (thread and rank counts of old runs, HPL builds, OSU curves).

This is the report's only reader of results; it never writes there (the store's index lives
outside results/). Unreadable runs and sites are reported through ``warn`` and skipped.

Medians never mix problem sizes (the store's ``problem``: HPL's N, NPB's class, STREAM's
array size...): each site's figures are shown at the problem size of its newest run of that
check and parameters; figures of other sizes are left out and named among the skipped, with
the size shown instead.

As the drift check and the references do, the report keeps apart what is not the machine's
alone and what is not the same machine: figures measured while other work took the CPU
(the store's ``disturbed``) are left out and counted unless ``include_disturbed``; where a
site's figures are per host (the store's ``host``), each site and partition shows its newest
run's host only, the others' figures left out, counted and the host named
(:func:`same_host`). Every median, curve and table is made from what is kept.
"""

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from sitebench.common import paths

from sitebench.results import exchange_runs, runfiles, site_warnings, store
from sitebench.results.figures import shown_problem
from sitebench.results.propose import disturbed_left_out
from sitebench.common.errors import SitebenchError
from sitebench.common.progress import progress_bar
from sitebench.results.rundirs import BadRun, links, load_run
from sitebench.sites.host import UNKNOWN as UNKNOWN_HOST

from .builds import hpl_build_label
from .cases import cases_of_run
from .curves import CURVE_COLUMNS, curve_rows

SPECS = "provenance/specs.json"
#: What every chart row carries of its run (besides site, run and arch), for tooltips.
RUN_DETAILS = ["site_label", "date", "hostname", "emulated", "href"]
CASE_KEYS = ["site", "run", "partition", "environ", "check", "params"]
DETAIL_COLUMNS = CASE_KEYS + ["case_threads", "case_ranks", "build", "concrete_spec"]
CURVES = ["site", "run", *CURVE_COLUMNS]


@dataclass
class ReportData:
    results_root: Path
    generated: datetime
    sites: list  # the sites read
    runs: pd.DataFrame  # one row per run, provenance fields unpacked
    figures: pd.DataFrame  # one row per figure value, with run details and counts
    curves: pd.DataFrame  # OSU latency/bandwidth per message size
    skipped: list = field(default_factory=list)  # "site/run: why" of what was left out
    hosts: dict = field(default_factory=dict)  # {site: [host ids whose figures are shown]}
    include_disturbed: bool = False


def _warn_stderr(message):
    print(f"warning: {message}; skipped", file=sys.stderr)


def run_anchor(site, run):
    """The HTML id of a run's row in the provenance table."""
    return f"run-{site}-{run}"


def _refresh(root, index, sites, note, progress):
    """Index the chosen sites; return those that could be read."""
    present = set(store.sites(root))
    for link in links(root):  # a linked site directory could point anywhere
        if sites is None or link.name in sites:
            note(f"{link.name}: a symbolic link, never followed")
    wanted = sorted(present) if sites is None else list(dict.fromkeys(sites))
    chosen = []
    for site in wanted:
        if site not in present:
            note(f"{site}: no such site directory in {root}")
            continue
        try:
            store.refresh(site, root, index, warn=note, progress=progress)
        except (SitebenchError, OSError, ValueError) as err:
            # A foreign folder (bad name, unreadable): not a site, but say so.
            note(f"{site}: {str(err).splitlines()[0]}")
            continue
        chosen.append(site)
    return chosen


def _query(con, sql):
    return con.sql(sql).to_arrow_table().to_pandas()


def _unpack_runs(runs):
    """Provenance fields as columns, times as text a reader understands."""
    prov = [json.loads(text) if isinstance(text, str) else {} for text in runs["provenance"]]
    runs = runs.copy()
    runs["provenance"] = prov
    runs["emulated"] = runs["emulated"].astype(bool)  # the store's, from the provenance
    runs["date"] = [_when(t) for t in runs["started"]]
    runs["site_label"] = [f"{s} (emulated)" if e else s for s, e in zip(runs.site, runs.emulated)]
    runs["href"] = ["#" + run_anchor(s, r) for s, r in zip(runs.site, runs.run)]
    return runs


def disturbed_cases(con):
    """{(site, run): ["check params", ...]} of the cases other work disturbed (the store's
    ``disturbed``), for the provenance table."""
    found = {}
    for site, run, check, params in con.execute(
        'SELECT DISTINCT site, run, "check", params FROM figures WHERE disturbed ORDER BY ALL'
    ).fetchall():
        found.setdefault((site, run), []).append(f"{check} {params or ''}".strip())
    return found


def _when(stamp):
    if stamp is None or pd.isna(stamp):
        return "unknown date"
    return pd.Timestamp(stamp).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")


def _case_details(root, runs, note, progress):
    """Per case: fallback counts and HPL build; OSU curves. Read from each run's files;
    a run that cannot be read (or whose report holds what no ReFrame writes) is noted and
    left out, the others kept."""
    details, curves, unreadable = [], [], set()
    from_git = _from_exchange(root, runs)
    for site, run in progress_bar(list(zip(runs.site, runs.run)), "reading runs", progress):
        try:
            loaded = from_git.get((site, run))
            if isinstance(loaded, Exception):
                raise loaded
            found, found_curves = _run_details(Path(root, site, run), note, loaded)
        except Exception as err:  # one run's data, whatever it holds, never stops the report
            why = str(err) if isinstance(err, BadRun) else f"{type(err).__name__}: {err}"
            note(f"{site}/{run}: {why}")
            unreadable.add((site, run))
            continue
        details += [_encodable(row) for row in found]
        curves += [_encodable(row) for row in found_curves]
    return (
        pd.DataFrame(details, columns=DETAIL_COLUMNS),
        pd.DataFrame(curves, columns=CURVES),
        unreadable,
    )


def _from_exchange(root, runs):
    """{(site, run): Run or why not} of the runs indexed from the exchange and not written
    out here: read from git. Their outputs stay in git, so their OSU curves and HPL build
    are not shown until ``./sitebench show SITE/RUN`` writes the run out."""
    entries = []
    for site, run, origin in zip(runs.site, runs.run, runs.origin):
        if isinstance(origin, str) and origin.startswith("exchange "):
            if not Path(root, site, run).is_dir():
                _, commit, tree = origin.split()
                entries.append((site, run, tree, commit))
    return (
        {(e[0], e[1]): loaded for e, loaded in exchange_runs.load(root, entries)}
        if entries
        else {}
    )


def _specs_text(path, note):
    """The run's ``provenance/specs.json`` as text, None where absent or not a plain file."""
    try:
        return runfiles.read_text(path, SPECS)
    except runfiles.MissingFile:
        return None
    except runfiles.UnsafeFile as err:
        note(f"{path.parent.name}/{path.name}: {err}; not read")
        return None


def _encodable(row):
    """A row Arrow and pandas can hold, as the store's own cleaning makes its rows: a lone
    surrogate (JSON allows "\\ud800": a hostile report's name) becomes "?", a value of the
    wrong type (a partition given as a mapping or a list) becomes null."""
    return {key: _scalar(value) for key, value in row.items()}


def _scalar(value):
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value
    return None if isinstance(value, (dict, list, tuple, set)) else value


def _has_surrogate(text):
    return any("\ud800" <= char <= "\udfff" for char in text)


def _run_details(path, note, loaded=None):
    loaded = loaded or load_run(path)
    site, run = loaded.site, loaded.name
    specs_text = _specs_text(path, note) if path.is_dir() else None
    details, curves = [], []
    for case in cases_of_run(loaded):
        if case.folder_problem:
            note(f"{site}/{run}: {case.check} {case.params}: {case.folder_problem}")
        build = None
        if case.check == "HplCheck":
            build = hpl_build_label(case.concrete_spec, specs_text)
        details.append(
            {
                "site": site,
                "run": run,
                "partition": case.partition,
                "environ": case.environ,
                "check": case.check,
                "params": case.params,
                "case_threads": case.threads,
                "case_ranks": case.ranks,
                "build": build,
                "concrete_spec": case.concrete_spec,
            }
        )
        rows = curve_rows(case, lambda why: note(f"{site}/{run}: {why}"))
        curves.extend({"site": site, "run": run, **row} for row in rows)
    return details, curves


def _count(*candidates):
    """The first positive whole number: the check's own count, a numeric parameter (not
    "all"), else what the job asked for."""
    for value in candidates:
        try:
            if value is not None and not pd.isna(value) and int(value) > 0:
                return int(value)
        except (TypeError, ValueError):
            continue
    return None


def _enrich(figures, details, runs):
    figures = figures.merge(details, on=CASE_KEYS, how="left")
    # An inner join: figures of a run left out are left out too.
    figures = figures.merge(runs[["site", "run", *RUN_DETAILS]], on=["site", "run"])
    variables = [json.loads(v) if isinstance(v, str) else {} for v in figures["case_vars"]]
    # case_vars holds the case's parameters (threads=all) and the check's own counts.
    figures["threads"] = [
        _count(v.get("num_threads"), v.get("threads"), f)
        for v, f in zip(variables, figures.case_threads)
    ]
    figures["ranks"] = [
        _count(v.get("num_ranks"), v.get("ranks"), f)
        for v, f in zip(variables, figures.case_ranks)
    ]
    figures["benchmark"] = [str(v.get("benchmark") or "") for v in variables]
    for name in ("threads", "ranks"):
        figures[name] = figures[name].astype("Int64")
    return figures


def newest_problem(figures):
    """(the figures at each site's newest problem size per check, parameters and figure,
    one note per site, check and problem size left out)."""
    if figures.empty:
        return figures, []
    keys = ["site", "check", "params", "figure"]
    problem = figures["problem"].fillna("")
    newest = (
        figures.assign(problem=problem)
        .sort_values("run")
        .groupby(keys, sort=False)["problem"]
        .last()
        .rename("newest")
    )
    merged = figures.assign(problem=problem).join(newest, on=keys)
    keep = merged["problem"] == merged["newest"]
    notes = []
    for (site, check, size, shown), group in merged[~keep].groupby(
        ["site", "check", "problem", "newest"], sort=True
    ):
        notes.append(
            f"{site}: {len(group)} {check} figures of problem size "
            f"{shown_problem(size) or '(none)'} left out: the report shows the newest size, "
            f"{shown_problem(shown) or '(none)'}"
        )
    return figures[keep.to_numpy()], notes


def without_disturbed(figures):
    """(the figures other work did not disturb, one note per site saying how many were left
    out); the job's own wall time counts as no figure, as in the drift check."""
    disturbed = figures["disturbed"].fillna(False).astype(bool)
    notes = []
    judged = disturbed & (figures["figure"] != "job_wall")
    for site, count in figures[judged].groupby("site").size().items():
        notes.append(f"{site}: {disturbed_left_out(count)}")
    return figures[~disturbed.to_numpy()], notes


def same_host(figures):
    """(the figures of each site's and partition's newest host, one note per site and
    partition whose other hosts' figures were left out, {site: [hosts shown]}).

    Sites whose figures carry no host (not per host) are kept whole. A figure of the unknown
    host (a run that recorded none and gives none to derive) is never pooled with another
    run: where the newest run's host is unknown, only that run is shown."""
    if figures.empty:
        return figures, [], {}
    keys = ["site", "partition"]
    frame = figures.assign(partition=figures["partition"].fillna(""))
    per_host = frame["host"].notna()
    newest = frame[per_host].sort_values("run").groupby(keys, sort=True)[["host", "run"]].last()
    merged = frame.join(newest.rename(columns={"host": "shown", "run": "newest"}), on=keys)
    unknown = merged["shown"] == UNKNOWN_HOST
    keep = (
        merged["shown"].isna()
        | ((merged["host"] == merged["shown"]) & ~unknown)
        | (unknown & (merged["run"] == merged["newest"]))
    )
    notes = []
    for (site, partition), group in merged[~keep].groupby(keys, sort=True):
        shown = newest.loc[(site, partition), "host"]
        others = sorted(set(group["host"].fillna(UNKNOWN_HOST)))
        where = f"{site} ({partition})" if partition else site
        notes.append(
            f"{where}: {len(group)} figure(s) of runs on {len(others)} other host(s) "
            f"({', '.join(others)}) left out: the report shows host {shown}, its newest "
            "run's (sites/host.py: a host is its CPU model, sockets, cores, CPUs, memory)"
        )
    hosts = {site: sorted(set(group["shown"])) for site, group in merged[per_host].groupby("site")}
    return figures[keep.to_numpy()], notes, hosts


def load(
    sites=None, results_root=None, store_dir=None, progress=False, warn=None,
    include_disturbed=False,
):  # fmt: skip
    """Everything the report plots, as :class:`ReportData`; figures measured beside other
    work are left out (and counted) unless ``include_disturbed``."""
    root = Path(results_root or paths.results_dir()).resolve()
    index = Path(store_dir) if store_dir else store.store_dir(root)
    # The page lists every run left out; stderr says one line per site, with a count.
    said = site_warnings.BySite(warn or _warn_stderr)
    skipped = []

    def note(message):
        message = store.one_line(message).removeprefix("skipped ")  # said once, one line
        if message not in skipped:
            skipped.append(message)
            said(message)

    note.every_run = True

    chosen = _refresh(root, index, sites, note, progress)
    # Every run ever found changed after it was indexed, not only those found just now.
    for site, run, _when, why in store.altered(chosen, store=index):
        note(store.altered_message(site, run, why))
    for _site, _run, why in store.flagged(chosen, store=index):
        note(why)  # indexed with values of the wrong type as null: named every time
    con = store.connect(index, sites=chosen)
    runs = _unpack_runs(_query(con, "SELECT * FROM runs ORDER BY site, started, run"))
    disturbed = disturbed_cases(con)
    runs["disturbed"] = [disturbed.get((s, r), []) for s, r in zip(runs.site, runs.run)]
    figures, left_out = newest_problem(_query(con, "SELECT * FROM figures"))
    figures, other_hosts, hosts = same_host(figures)
    left_out += other_hosts
    if not include_disturbed:
        figures, disturbed_notes = without_disturbed(figures)
        left_out += disturbed_notes
    for message in left_out:
        note(message)
    details, curves, unreadable = _case_details(root, runs, note, progress)
    # Unreadable since it was indexed (results/ should never change, but say so and skip it).
    keep = [(s, r) not in unreadable for s, r in zip(runs.site, runs.run)]
    runs = runs[pd.Series(keep, index=runs.index, dtype=bool)]
    figures = _enrich(figures, details, runs)
    curves = curves.merge(runs[["site", "run", "arch", *RUN_DETAILS]], on=["site", "run"])
    # A curve is drawn from its case's output: only for the cases whose figures are kept.
    kept = figures[CASE_KEYS].drop_duplicates()
    curves = curves.merge(kept.fillna(""), on=CASE_KEYS).reset_index(drop=True)
    said.flush()
    return ReportData(
        results_root=root,
        generated=datetime.now(timezone.utc),
        sites=chosen,
        runs=runs,
        figures=figures,
        curves=curves,
        skipped=skipped,
        hosts=hosts,
        include_disturbed=include_disturbed,
    )

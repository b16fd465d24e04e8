"""Runs of other sites whose figures ``./sitebench show`` refused, set aside here.

A pull takes another site's ``figures.json``, not its ``report.json`` (bulk); ``show``
fetches the report and audits the figures against it (:func:`figures_file.audit_bytes`).
A run whose report does not back its figures is listed in
``.exchange/sitebench-figures-refused.tsv`` (site, run, tree, why): the store drops its
figures and never indexes it again, and compare, regressions and report say so, one line
per site. The run stays accepted in the exchange (it was signed by its site): only its
figures are not believed here.
"""

from sitebench.common.files import read_runs_table, write_runs_table

FILE = "sitebench-figures-refused.tsv"


def listed(ex):
    """{site: {run: (tree, why)}} of the runs set aside here."""
    return read_runs_table(ex.git_dir / FILE, 4)


def record(ex, site, run, tree, why):
    """Set ``site``/``run`` (accepted with ``tree``) aside for ``why`` (kept: a run is
    listed once, the list rewritten whole and atomically)."""
    rows = [
        (s, r, t, w)
        for s, runs in sorted(listed(ex).items())
        for r, (t, w) in sorted(runs.items())
        if (s, r) != (site, run)
    ]
    flat = " ".join(str(why).split())  # one field: no tab, no newline of another site's
    rows.append((site, run, tree, flat))
    write_runs_table(ex.git_dir / FILE, rows)


def message(site, runs):
    """The one line naming a site's runs set aside ({run: (tree, why)})."""
    first = sorted(runs)[0]
    return (
        f"{len(runs)} run(s) of {site} set aside, out of compare, regressions and report: "
        f"show refused their figures (their report does not back them; {site}/{first}: "
        f"{runs[first][1]}): {', '.join(sorted(runs)[:3])}" + (", ..." if len(runs) > 3 else "")
    )

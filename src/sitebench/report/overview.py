"""The report's text around the charts: the header (when, which sites and runs, what was
skipped and why, caveats) and the provenance table, one row per run with an anchor that
the charts' points link to.
"""

from html import escape

import pandas as pd

from sitebench.results.staleness import DEFAULT_DAYS, describe, stale_sites

from .data import run_anchor


def _get(mapping, *keys):
    for key in keys:
        mapping = mapping.get(key) if isinstance(mapping, dict) else None
    return mapping


def _version(prov, key):
    """``1.1.0 2e907202bc``: a tool's version and commit (shortened) from the provenance."""
    version, commit = _get(prov, key, "version"), _get(prov, key, "commit")
    return " ".join(str(v) for v in (version, commit and str(commit)[:10]) if v) or "?"


def header(data, chart_count, stale_days=None):
    """Title, generation time, the sites and runs read, skipped runs, caveats (emulated sites,
    sites whose newest run is older than ``stale_days``)."""
    runs = data.runs
    lines = [
        "<h1>sitebench report</h1>",
        f"<p>Generated {escape(data.generated.strftime('%Y-%m-%d %H:%M:%S UTC'))} from "
        f"<code>{escape(str(data.results_root))}</code>: {len(runs)} runs of "
        f"{len(data.sites)} site(s), {chart_count} charts. Hover a point for its run; click "
        "it for the run's provenance (Spack, sitebench and ReFrame versions) "
        '<a href="#provenance">at the end</a>.</p>',
    ]
    if data.sites:
        rows = []
        for site in data.sites:
            mine = runs[runs.site == site]
            first = mine["date"].iloc[0] if len(mine) else "-"
            last = mine["date"].iloc[-1] if len(mine) else "-"
            cpus = ", ".join(sorted({str(a) for a in mine["arch"].dropna()})) or "?"
            hosts = ", ".join(sorted({str(h) for h in mine["hostname"].dropna()})) or "?"
            shown = ", ".join(data.hosts.get(site, [])) or "not per host"
            rows.append(
                f"<tr><td>{escape(site)}</td><td>{len(mine)}</td><td>{escape(first)}</td>"
                f"<td>{escape(last)}</td><td>{escape(cpus)}</td><td>{escape(hosts)}</td>"
                f"<td>{escape(shown)}</td></tr>"
            )
        lines.append(
            "<table><tr><th>site</th><th>runs</th><th>first</th><th>last</th><th>CPU</th>"
            "<th>hostnames</th><th>figures of host</th></tr>"
            f"{''.join(rows)}</table>"
        )
    else:
        lines.append('<p class="sb-empty">No site with readable runs.</p>')
    emulated = sorted(set(runs[runs.emulated].site)) if len(runs) else []
    if emulated:
        lines.append(
            f'<p class="sb-note">Caveat: {escape(", ".join(emulated))} '
            f"{'is' if len(emulated) == 1 else 'are'} emulated (its provenance says so): its "
            "timings mean nothing for speed, only that the benchmarks run.</p>"
        )
    marked = int(sum(bool(cases) for cases in runs["disturbed"])) if len(runs) else 0
    if marked and data.include_disturbed:
        lines.append(
            f'<p class="sb-note">Caveat: {marked} run(s) have cases measured while other work '
            "took the machine's CPU (disturbed; named in the provenance table): their points are "
            "not the machine's alone, and are kept (--include-disturbed).</p>"
        )
    elif marked:
        lines.append(
            f'<p class="sb-note">{marked} run(s) have cases measured while other work took the '
            "machine's CPU (disturbed; named in the provenance table): their figures are left "
            "out of every chart, curve and table (counted below; --include-disturbed keeps "
            "them).</p>"
        )
    days = DEFAULT_DAYS if stale_days is None else stale_days
    for site, when in stale_sites(data.results_root, days, data.generated, set(data.sites)):
        lines.append(
            f'<p class="sb-note">Caveat: {escape(describe(site, when, data.generated))}</p>'
        )
    if data.skipped:
        items = "".join(f"<li><code>{escape(s)}</code></li>" for s in data.skipped)
        lines.append(
            '<div id="sb-skipped"><p class="sb-note">Skipped, unreadable or altered '
            f"(nothing was changed in results/):</p><ul>{items}</ul></div>"
        )
    return "\n".join(lines)


def provenance_table(runs):
    """Every run: when, where, with which Spack, sitebench and ReFrame; one anchor each."""
    head = (
        "site run started finished CPU host source Spack builtin-repo sitebench ReFrame "
        "scheduler cases failed disturbed emulated"
    ).split()
    rows = []
    for run in runs.itertuples(index=False):
        prov = run.provenance if isinstance(run.provenance, dict) else {}
        sitebench = _version(prov, "sitebench")
        if _get(prov, "sitebench", "local_changes"):
            sitebench += " + local changes"
        scheduler = _get(prov, "scheduler", "name") or "local"
        if _get(prov, "scheduler", "version"):
            scheduler += f" {_get(prov, 'scheduler', 'version')}"
        cells = [
            escape(run.site),
            f'<a href="#{escape(run_anchor(run.site, run.run))}">{escape(run.run)}</a>',
            escape(run.date),
            escape(_finished(run.finished)),
            escape(str(run.arch or "?")),
            escape(str(run.hostname or "?")),
            escape(str(run.source or "?")),
            escape(_version(prov, "spack")),
            escape(_version(prov, "spack_builtin_repo")),
            escape(sitebench),
            escape(str(prov.get("reframe_version") or "?")),
            escape(scheduler),
            escape(_number(run.cases)),
            escape(_number(run.failures)),
            escape(", ".join(run.disturbed) or "no"),
            "yes" if run.emulated else "no",
        ]
        anchor = escape(run_anchor(run.site, run.run))
        rows.append(f'<tr id="{anchor}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header_row = "".join(f"<th>{h}</th>" for h in head)
    return (
        '<section id="provenance"><h2>Provenance of every run</h2>'
        "<p>One row per run (commits shortened to 10 characters; the full provenance is in "
        "<code>results/&lt;site&gt;/&lt;run&gt;/provenance/</code>).</p>"
        f"<table><tr>{header_row}</tr>{''.join(rows)}</table></section>"
    )


def _finished(stamp):
    if stamp is None or pd.isna(stamp):
        return "?"
    return pd.Timestamp(stamp).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")


def _number(value):
    return "?" if value is None or pd.isna(value) else str(int(value))

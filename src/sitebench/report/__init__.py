"""A static HTML report of the results: one self-contained file, no server, offline.

:func:`build` reads the results through the store (:mod:`.data`), draws one section per
benchmark with Altair/Vega-Lite (:mod:`.sections`, :mod:`.charts`), adds the header and the
provenance of every run (:mod:`.overview`) and writes one HTML file with all JavaScript
inlined (:mod:`.page`), atomically. It never writes under results/; unreadable runs are
reported (on stderr and in the page) and skipped.
"""

import html
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError

from . import data as report_data
from .overview import header, provenance_table
from .page import Block, assemble
from .sections import build_sections


@dataclass
class Report:
    html: str
    chart_ids: list  # the chart containers on the page, in order
    skipped: list  # "site/run: why" of each run left out
    runs: int


def _block(section):
    text = f"<p>{html.escape(section.text)}</p>"
    for note in section.notes:
        kind = "sb-empty" if section.empty else "sb-note"
        text += f'<p class="{kind}">{html.escape(note)}</p>'
    if section.table is not None:
        text += _table_html(section.table)
    return Block(section.anchor, section.title, text, [c.to_dict() for c in section.charts])


def _table_html(table):
    """A DataFrame as a plain HTML table, numbers to 4 significant digits."""

    def cell(value):
        if isinstance(value, float):
            return "" if value != value else f"{value:.4g}"
        return html.escape("" if value is None else str(value))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
        for row in table.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def make(
    sites=None, results_root=None, store_dir=None, progress=False, warn=None, stale_days=None,
    include_disturbed=False,
):  # fmt: skip
    """The report as a :class:`Report` (nothing written but the store's index)."""
    found = report_data.load(sites, results_root, store_dir, progress, warn, include_disturbed)
    blocks = [_block(s) for s in build_sections(found)]
    count = sum(len(b.specs) for b in blocks)
    page, ids = assemble(
        "sitebench report", header(found, count, stale_days), blocks, provenance_table(found.runs)
    )
    return Report(html=page, chart_ids=ids, skipped=found.skipped, runs=len(found.runs))


def _outside_results(out_path, results_root):
    out = Path(out_path).resolve()
    root = Path(results_root or paths.results_dir()).resolve()
    if out == root or root in out.parents:
        raise SitebenchError(
            f"will not write the report into {root}: results/ holds runs only",
            "choose an --out outside results/",
        )
    return out


def write(report, out_path, results_root=None):
    """Write the page to ``out_path`` atomically (a temporary file beside it, then a rename)."""
    out = _outside_results(out_path, results_root)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(report.html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def build(
    out_path, sites=None, results_root=None, store_dir=None, progress=True, stale_days=None,
    include_disturbed=False,
):  # fmt: skip
    """Write the report of ``sites`` (default: all) to ``out_path``; return its path.

    ``results_root``: the results directory (default: the project's results/);
    ``store_dir``: the store's index for it (default: :func:`sitebench.results.store.store_dir`);
    ``progress``: a progress bar on stderr while reading runs (only on a terminal);
    ``stale_days``: name the sites whose newest run is older (default 3 days);
    ``include_disturbed``: keep the figures measured while other work took the CPU.
    """
    _outside_results(out_path, results_root)
    show = bool(progress) and sys.stderr.isatty()
    report = make(
        sites, results_root, store_dir, progress=show, stale_days=stale_days,
        include_disturbed=include_disturbed,
    )  # fmt: skip
    return write(report, out_path, results_root)

"""One Altair (Vega-Lite) chart builder per kind of figure in the report.

Every builder takes the rows to plot (already selected) and returns a chart, or ``None`` when
there is nothing to plot. Conventions shared by all: colour is the site (the same colour in
every chart), lines and bars are medians across runs, faint points are the single runs, and
a point's tooltip names its run, date, CPU and host; clicking it jumps to the run's
provenance row. Clicking a site in the legend highlights it. Where the rows come from more
than one partition or toolchain (the ReFrame environment: ``gcc-mpich``, ``gcc-openmpi``),
each has its own line or bar, named in a legend by partition and toolchain, with the MPI for
the MPI benchmarks (``gcc-mpich (MPICH)``, :mod:`.toolchains`).
"""

import math

import altair as alt
import pandas as pd

from .toolchains import series_labels

#: Size of one panel (a facet cell), in pixels.
WIDTH, HEIGHT = 230, 190

#: Vega expression: a power-of-two byte count as "16 B", "4 KiB", "16 MiB".
BYTES = (
    "datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : "
    "datum.value >= 1024 ? datum.value / 1024 + ' KiB' : datum.value + ' B'"
)

RUN_TOOLTIP = [
    alt.Tooltip("site_label:N", title="site"),
    alt.Tooltip("run:N", title="run"),
    alt.Tooltip("date:N", title="date"),
    alt.Tooltip("arch:N", title="CPU"),
    alt.Tooltip("hostname:N", title="host"),
    alt.Tooltip("partition:N", title="partition"),
    alt.Tooltip("environ:N", title="toolchain"),
]


def records(df):
    """Rows as JSON-safe dicts (no NaN, no numpy or pandas scalars)."""
    out = []
    for row in df.to_dict("records"):
        clean = {}
        for key, value in row.items():
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                clean[key] = None
            elif value is pd.NA or value is pd.NaT:
                clean[key] = None
            elif hasattr(value, "item"):
                clean[key] = value.item()
            else:
                clean[key] = value
        out.append(clean)
    return out


def _data(df, columns):
    df = df.copy()
    df["shown"] = [_shown(v, u) for v, u in zip(df["value"], df["unit"])]
    return alt.Data(values=records(df[[c for c in columns + ["shown"] if c in df]]))


def _shown(value, unit):
    return f"{value:.4g} {unit}" if value is not None and not pd.isna(value) else "n/a"


def site_colour(labels):
    """The site colour scale; one domain for all charts keeps a site's colour."""
    return alt.Color("site_label:N", title="site", scale=alt.Scale(domain=list(labels)))


def _legend_pick():
    return alt.selection_point(fields=["site_label"], bind="legend", name="site_pick")


def _series(df, mpi=False):
    """(rows with ``series``, its legend title): a line per partition and toolchain, named by
    what differs (the toolchain with its MPI when ``mpi``); title None when one series."""
    df = df.copy()
    labels, title = series_labels(df["partition"], df["environ"], mpi)
    df["series"] = labels if labels is not None else ""
    return df, title


def _axis_values(values):
    return sorted({int(v) for v in values if v is not None and not pd.isna(v)})


def scaling(
    df,
    labels,
    *,
    x,
    x_title,
    y_title,
    title,
    facet=None,
    facet_title=None,
    facet_sort=None,
    log_y=False,
    ideal=None,
    columns=None,
    independent_y=False,
    mpi=False,
):
    """Medians vs a count (threads, ranks) as lines, runs as faint points; one panel per
    ``facet`` value. ``ideal``: a horizontal reference line (e.g. efficiency 1);
    ``independent_y``: each panel its own y scale (benchmarks of different sizes); ``mpi``:
    an MPI benchmark, whose lines per toolchain name the MPI."""
    df = df[df[x].notna() & df["value"].notna()]
    if df.empty:
        return None
    df, dashed = _series(df, mpi)
    fields = ["site", "site_label", "run", "date", "arch", "hostname", "partition", "environ"]
    fields += ["series"]
    fields += [x, "value", "unit", "params", "href"] + ([facet] if facet else [])
    x_enc = alt.X(
        f"{x}:Q",
        title=x_title,
        scale=alt.Scale(type="log", base=2, nice=False),
        axis=alt.Axis(values=_axis_values(df[x]), format="d"),
    )
    y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    colour = site_colour(labels)
    pick = _legend_pick()
    fade = alt.condition(pick, alt.value(1.0), alt.value(0.12))
    line = alt.Chart().mark_line(point=True, strokeWidth=2)
    line = line.encode(
        x=x_enc,
        y=alt.Y("median(value):Q", title=y_title, scale=y_scale),
        color=colour,
        opacity=fade,
        tooltip=[
            alt.Tooltip("site_label:N", title="site"),
            *([alt.Tooltip("series:N", title=dashed)] if dashed else []),
            alt.Tooltip(f"{x}:Q", title=x_title),
            alt.Tooltip("median(value):Q", title=f"median ({y_title})", format=".4g"),
            alt.Tooltip("count(value):Q", title="runs"),
        ],
        **({"strokeDash": alt.StrokeDash("series:N", title=dashed)} if dashed else {}),
    )
    points = alt.Chart().mark_circle(size=45)
    points = points.encode(
        x=x_enc,
        y=alt.Y("value:Q", scale=y_scale),
        color=colour,
        opacity=alt.condition(pick, alt.value(0.35), alt.value(0.05)),
        href="href:N",
        tooltip=RUN_TOOLTIP + [alt.Tooltip("shown:N", title=y_title)],
    ).add_params(pick)
    layers = [points, line]
    if ideal is not None:
        rule = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray")
        layers.append(rule.encode(y=alt.datum(ideal)))
    chart = alt.layer(*layers, data=_data(df, fields)).properties(width=WIDTH, height=HEIGHT)
    if facet:
        kind = alt.Facet(f"{facet}:N", title=facet_title, sort=facet_sort)
        chart = chart.facet(facet=kind, columns=columns or 4)
        if independent_y:
            chart = chart.resolve_scale(y="independent")
    return chart.properties(title=title)


def message_sizes(df, labels, *, y_title, title):
    """OSU curves: a value per message size (log-log), one panel per mapping, a dash per
    transport (and per toolchain, named with its MPI, where the rows have several: the same
    transport of two MPIs side by side); medians across runs as lines, runs as faint points."""
    df = df[df["value"].notna()]
    if df.empty:
        return None
    df, by = _series(df, mpi=True)
    df["curve"] = df["transport"].astype(str) + (" · " + df["series"] if by else "")
    curve_title = f"transport · {by}" if by else "transport"
    fields = ["site", "site_label", "run", "date", "arch", "hostname", "partition", "environ"]
    fields += ["mapping", "transport", "curve", "size", "value", "unit", "href"]
    x_enc = alt.X(
        "size:Q",
        title="message size",
        scale=alt.Scale(type="log", base=2),
        axis=alt.Axis(values=[4**i for i in range(13)], labelExpr=BYTES),
    )
    y_enc = alt.Y("median(value):Q", title=y_title, scale=alt.Scale(type="log"))
    colour = site_colour(labels)
    pick = _legend_pick()
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=18), strokeWidth=2)
    line = line.encode(
        x=x_enc,
        y=y_enc,
        color=colour,
        strokeDash=alt.StrokeDash("curve:N", title=curve_title),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
        tooltip=[
            alt.Tooltip("site_label:N", title="site"),
            alt.Tooltip("curve:N", title=curve_title),
            alt.Tooltip("size:Q", title="bytes", format=","),
            alt.Tooltip("median(value):Q", title=f"median ({y_title})", format=".4g"),
            alt.Tooltip("count(value):Q", title="runs"),
        ],
    )
    points = alt.Chart().mark_circle(size=16)
    points = points.encode(
        x=x_enc,
        y=alt.Y("value:Q", scale=alt.Scale(type="log")),
        color=colour,
        opacity=alt.condition(pick, alt.value(0.3), alt.value(0.04)),
        href="href:N",
        tooltip=RUN_TOOLTIP
        + [
            alt.Tooltip("transport:N"),
            alt.Tooltip("size:Q", title="bytes", format=","),
            alt.Tooltip("shown:N", title=y_title),
        ],
    ).add_params(pick)
    chart = alt.layer(points, line, data=_data(df, fields))
    chart = chart.properties(width=WIDTH + 110, height=HEIGHT + 30)
    chart = chart.facet(facet=alt.Facet("mapping:N", title="mapping"), columns=3)
    return chart.properties(title=title)


def builds(df, labels, *, x_title, title):
    """HPL: one bar (median) per site and build flags (and toolchain, named with its MPI,
    where the rows have several), the runs as points on it."""
    df = df[df["value"].notna()].copy()
    if df.empty:
        return None
    df["build"] = df["build"].fillna("unknown build")
    flags = sorted(df["build"].unique())
    subtitle = (
        f"All runs used one optimisation level: {flags[0]}."
        if len(flags) == 1
        else f"{len(flags)} optimisation levels."
    )
    df, by = _series(df, mpi=True)
    if by:
        df["build"] = df["build"] + " | " + df["series"]
        subtitle += f" A bar per {by}."
    kinds = sorted(df["build"].unique())
    fields = ["site", "site_label", "run", "date", "arch", "hostname", "partition", "environ"]
    fields += ["build", "concrete_spec", "value", "unit", "href"]
    colour = site_colour(labels)
    pick = _legend_pick()
    y_title = "build flags, BLAS" + (f" | {by}" if by else "")
    # A bar per toolchain: its name on a second line of the label.
    axis = alt.Axis(labelExpr="split(datum.label, ' | ')") if by else alt.Axis()
    y_enc = alt.Y("build:N", title=y_title, sort=kinds, axis=axis)
    offset = alt.YOffset("site_label:N", scale=alt.Scale(domain=list(labels)))
    bars = alt.Chart().mark_bar(opacity=0.75, height={"band": 0.9})
    bars = bars.encode(
        x=alt.X("median(value):Q", title=x_title),
        y=y_enc,
        yOffset=offset,
        color=colour,
        opacity=alt.condition(pick, alt.value(0.8), alt.value(0.1)),
        tooltip=[
            alt.Tooltip("site_label:N", title="site"),
            alt.Tooltip("build:N"),
            alt.Tooltip("median(value):Q", title=f"median ({x_title})", format=".4g"),
            alt.Tooltip("count(value):Q", title="runs"),
        ],
    ).add_params(pick)
    points = alt.Chart().mark_tick(color="black", opacity=0.6, thickness=2)
    points = points.encode(
        x="value:Q",
        y=y_enc,
        yOffset=offset,
        href="href:N",
        tooltip=RUN_TOOLTIP
        + [alt.Tooltip("concrete_spec:N", title="spec"), alt.Tooltip("shown:N", title=x_title)],
    )
    chart = alt.layer(bars, points, data=_data(df, fields))
    step = max(40, 22 * len(labels))
    chart = chart.properties(width=WIDTH * 2, height=alt.Step(step))
    return chart.properties(title=alt.TitleParams(title, subtitle=subtitle))


def per_case(df, labels, *, title):
    """Values of any figures side by side: a row of points per case, a panel per figure
    (used for the per-watt figures, whose units differ)."""
    df = df[df["value"].notna()].copy()
    if df.empty:
        return None
    df["case"] = df["check"] + " " + df["params"].fillna("")
    df["panel"] = df["figure"] + " (" + df["unit"].fillna("") + ")"
    fields = ["site", "site_label", "run", "date", "arch", "hostname", "partition", "environ"]
    fields += ["case", "panel", "value", "unit", "href"]
    colour = site_colour(labels)
    points = alt.Chart().mark_circle(size=60, opacity=0.6)
    points = points.encode(
        x=alt.X("value:Q", title="value", scale=alt.Scale(zero=False)),
        y=alt.Y("case:N", title=None, axis=alt.Axis(labelLimit=360)),
        color=colour,
        href="href:N",
        tooltip=RUN_TOOLTIP + [alt.Tooltip("shown:N", title="value")],
    )
    chart = alt.layer(points, data=_data(df, fields)).properties(width=WIDTH * 2)
    header = alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start", labelFontSize=12)
    chart = chart.facet(row=alt.Row("panel:N", title=None, header=header))
    chart = chart.resolve_scale(x="independent", y="independent")
    return chart.properties(title=title)


def model_vs_measured(table, labels, *, title):
    """Jacobi MLUP/s against ranks: the measurement (solid) and the model (dashed), one panel
    per mapping; ``table`` is :func:`sitebench.results.jacobi_model.model_table`'s."""
    rows = []
    for row in records(table):
        for kind, column in (("measured", "MLUP/s real"), ("model", "MLUP/s est")):
            if row.get(column) is not None:
                rows.append({**row, "kind": kind, "mlups": row[column], "site_label": row["site"]})
    if not rows:
        return None
    line = alt.Chart(alt.Data(values=rows)).mark_line(point=True)
    chart = line.encode(
        x=alt.X("N:Q", title="MPI ranks N", axis=alt.Axis(format="d")),
        y=alt.Y("median(mlups):Q", title="MLUP/s", scale=alt.Scale(zero=False)),
        color=site_colour(labels),
        strokeDash=alt.StrokeDash("kind:N", title="", sort=["measured", "model"]),
        tooltip=[
            alt.Tooltip("site_label:N", title="site"),
            alt.Tooltip("kind:N"),
            alt.Tooltip("N:Q"),
            alt.Tooltip("median(mlups):Q", title="MLUP/s", format=".4g"),
        ],
    ).properties(width=WIDTH, height=HEIGHT)
    return chart.facet(facet=alt.Facet("mapping:N", title="mapping")).properties(title=title)


def loss_bars(table, labels, *, title):
    """Loss in % per benchmark (a bar per site), from :func:`seed_tables.page_loss`."""
    if table.empty:
        return None
    rows = [{**row, "site_label": row["site"], "loss": row["loss %"]} for row in records(table)]
    bars = alt.Chart(alt.Data(values=rows)).mark_bar()
    return bars.encode(
        x=alt.X("loss:Q", title="loss with 4 KiB pages vs 2 MiB pages (%)"),
        y=alt.Y("benchmark:N", title=""),
        yOffset="site_label:N",
        color=site_colour(labels),
        tooltip=[
            alt.Tooltip("site_label:N", title="site"),
            alt.Tooltip("benchmark:N"),
            alt.Tooltip("loss:Q", title="loss %", format=".1f"),
            alt.Tooltip("small:Q", title="small pages", format=".4g"),
            alt.Tooltip("large:Q", title="large pages", format=".4g"),
            alt.Tooltip("unit:N"),
        ],
    ).properties(width=2 * WIDTH, title=title)

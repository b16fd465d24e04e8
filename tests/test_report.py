"""The HTML report, opened in headless Chromium (Debian's ``chromium``): built from a copy of
this repository's real results (plus corrupt, partial and foreign run directories, which
must be reported and skipped), every chart must render marks without a script error, and
nothing under results/ may change. A screenshot is kept in ``tests/artifacts/report.png``.
A page with a broken and an empty chart proves the check does not pass vacuously.
"""

import hashlib
import html
import json
import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

import toolchain_runs
from conftest import ROOT
from sitebench import report
from sitebench.common.errors import SitebenchError
from sitebench.report import builds, page, sections, toolchains
from sitebench.report import data as report_data

RESULTS = ROOT / "results"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium")
#: Sections that the repository's real runs have data for.
REAL_SECTIONS = {"stream", "sysbench", "parsec", "pingpong", "hpl", "npb"}


def need_chromium():
    if not CHROMIUM:
        pytest.skip(
            "CHROMIUM NOT AVAILABLE: the report's rendering test needs Debian's chromium "
            "(apt-get install chromium)"
        )


def tree_digest(root):
    """One hash of every path, file content and link target under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(Path(root).rglob("*")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def chromium(page_path, tmp_path, *args):
    """Run headless Chromium on a local page; its stdout (e.g. the DOM) as text."""
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--virtual-time-budget=20000",
            *args,
            Path(page_path).resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class _RenderedDom(HTMLParser):
    """The chart containers and the page's error and warning boxes in a dumped DOM."""

    def __init__(self):
        super().__init__()
        self.charts, self.boxes, self._box = [], {"sb-errors": "", "sb-warnings": ""}, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "sb-chart" in (attrs.get("class") or "").split():
            self.charts.append(attrs)
        if tag == "pre" and attrs.get("id") in self.boxes:
            self._box = attrs["id"]

    def handle_endtag(self, tag):
        if tag == "pre":
            self._box = None

    def handle_data(self, text):
        if self._box:
            self.boxes[self._box] += text


def render_problems(dom, expected_ids):
    """Everything wrong with a rendered report page; [] when every chart drew marks."""
    parsed = _RenderedDom()
    parsed.feed(dom)
    problems = [f"page error: {line}" for line in parsed.boxes["sb-errors"].splitlines()]
    problems += [f"Vega warning: {line}" for line in parsed.boxes["sb-warnings"].splitlines()]
    found = [c.get("id") for c in parsed.charts]
    if found != list(expected_ids):
        problems.append(f"chart containers {found}, the builder made {list(expected_ids)}")
    for chart in parsed.charts:
        if chart.get("data-rendered") != "yes" or int(chart.get("data-marks") or 0) <= 0:
            problems.append(
                f"{chart.get('id')}: rendered={chart.get('data-rendered')} "
                f"marks={chart.get('data-marks')}"
            )
    return problems


def png_facts(path):
    """(width, height, distinct byte values of the decoded image data) of a PNG."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def add_unreadable_runs(site_dir):
    """A corrupt, a partial and a foreign run directory; returns their names."""
    corrupt = site_dir / "20261123T000000Z-c0ffee"
    corrupt.mkdir()
    (corrupt / "report.json").write_text('{"runs": [ {"testcases": [')
    partial = site_dir / "20261123T000001Z-half00"
    partial.mkdir()
    (partial / "report.json").write_text(json.dumps({"session_info": {}, "runs": []}))
    foreign = site_dir / "holiday-photos"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a run\n")
    return [corrupt.name, partial.name, foreign.name]


@pytest.fixture
def real_results(tmp_path):
    """A copy of the repository's results/ with three unreadable run directories added."""
    if not any(RESULTS.glob("*/*/report.json")):
        pytest.skip(f"NO REAL RUNS in {RESULTS}: run ./sitebench run first")
    root = tmp_path / "results"
    shutil.copytree(RESULTS, root, symlinks=True)
    bad = add_unreadable_runs(root / "local")
    return root, bad


def test_report_of_real_runs_renders_in_chromium(real_results, tmp_path, capsys):
    need_chromium()
    root, bad = real_results
    real_before, copy_before = tree_digest(RESULTS), tree_digest(root)

    built = report.make(results_root=root, store_dir=tmp_path / "store")
    out = report.write(built, tmp_path / "out" / "report.html", results_root=root)

    assert tree_digest(root) == copy_before, "building the report changed results/"
    assert tree_digest(RESULTS) == real_before
    stderr = capsys.readouterr().err
    text = out.read_text()
    for name in bad:
        assert any(name in s for s in built.skipped), (name, built.skipped)
        assert name in text  # the page names each run left out
    # stderr says one line per site, with a count, however many runs it skipped.
    assert f"local: {len(bad)} warnings" in stderr and stderr.count("local/") <= 2, stderr
    assert built.runs == len(list(RESULTS.glob("*/*/report.json")))
    assert "https://cdn" not in text and "<script src" not in text
    assert [p.name for p in out.parent.iterdir()] == ["report.html"], "temporary file left"
    charted = {s for s in REAL_SECTIONS if f'<section id="{s}">' in text}
    assert charted == REAL_SECTIONS
    assert len(built.chart_ids) >= 8

    dom = chromium(out, tmp_path, "--dump-dom")
    assert render_problems(dom, built.chart_ids) == []

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    chromium(out, tmp_path, "--window-size=1400,6000", f"--screenshot={shot}")
    width, height, distinct = png_facts(shot)
    assert (width, height) == (1400, 6000)
    assert shot.stat().st_size > 20_000 and distinct > 32, "screenshot is blank"
    shutil.copy(out, ARTIFACTS / "report.html")


def test_checker_catches_broken_and_empty_charts(tmp_path):
    """The same page machinery with a spec Vega-Lite rejects and a chart with no data: the
    check must fail on both (and pass the good chart)."""
    need_chromium()
    good = {"data": {"values": [{"x": 1, "y": 2}]}, "mark": "point"}
    good["encoding"] = {"x": {"field": "x", "type": "quantitative"}}
    broken = {"data": {"values": [{"x": 1}]}, "mark": {"type": "no-such-mark"}}
    empty = {"data": {"values": []}, "mark": "point", "encoding": good["encoding"]}
    blocks = [page.Block("a", "A", "<p>a</p>", [good, broken, empty])]
    html, ids = page.assemble("broken on purpose", "<h1>test</h1>", blocks)
    path = tmp_path / "broken.html"
    path.write_text(html)

    problems = render_problems(chromium(path, tmp_path, "--dump-dom"), ids)

    assert not any(p.startswith("chart-1") for p in problems), problems
    assert any(p.startswith("chart-2: rendered=error") for p in problems), problems
    assert any(p.startswith("chart-3: rendered=empty") for p in problems), problems
    assert any(p.startswith("page error: chart-2: ") for p in problems), problems


def _emulated_site_with_power(root):
    """A site 'emul' made from the real local-slurm run: emulated, with per-watt figures."""
    source = sorted(
        p for p in (RESULTS / "local-slurm").iterdir() if p.is_dir() and not p.name.startswith(".")
    )[0]
    run = root / "emul" / source.name
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("failed-stage"))
    prov = json.loads((run / "provenance" / "provenance.json").read_text())
    prov.update(site="emul", emulated=True)
    (run / "provenance" / "provenance.json").write_text(json.dumps(prov))
    rfm = json.loads((run / "report.json").read_text())
    per_watt = {"tps": "tx/s/W", "gflops": "Gflop/s/W"}
    for attempt in rfm["runs"]:
        for case in attempt["testcases"]:
            values = case.get("perfvalues") or {}
            for key, entry in list(values.items()):
                unit = per_watt.get(key.rsplit(":", 1)[-1])
                if unit:
                    values[f"{key}_per_watt"] = [entry[0] / 40.0, 0, None, None, unit, "pass"]
    (run / "report.json").write_text(json.dumps(rfm))


def test_energy_figures_and_emulated_site(tmp_path):
    need_chromium()
    if not (RESULTS / "local-slurm").is_dir():
        pytest.skip(f"NO local-slurm RUN in {RESULTS} to derive an emulated site from")
    root = tmp_path / "results"
    _emulated_site_with_power(root)

    built = report.make(sites=["emul"], results_root=root, store_dir=tmp_path / "store")
    out = report.write(built, tmp_path / "emul.html", results_root=root)

    text = out.read_text()
    assert "emul is emulated" in text and "timings mean nothing for speed" in text
    assert "sysbench transactions/s per watt" in text and "tps_per_watt" in text
    assert "gflops_per_watt" in text and "No site measured power" not in text
    problems = render_problems(chromium(out, tmp_path, "--dump-dom"), built.chart_ids)
    assert problems == []


def test_no_runs_gives_a_page_that_says_so(tmp_path):
    root = tmp_path / "results"
    (root / "empty-site").mkdir(parents=True)

    out = report.build(tmp_path / "r.html", results_root=root, store_dir=tmp_path / "s")

    text = out.read_text()
    # STREAM, sysbench, PARSEC, ping-pong, HPL, NPB, Jacobi, ring, page size, messages,
    # Java against C, NPB in Java (saying it is optional), Gadget-2.
    assert text.count("No runs of this check") == 13
    assert "npb-java is optional: add it to the environment" in text
    assert 'content="0"' in text and 'class="sb-chart"' not in text
    assert "No site measured power" in text


def test_unknown_site_is_reported(tmp_path, capsys):
    root = tmp_path / "results"
    root.mkdir()
    built = report.make(sites=["atlantis"], results_root=root, store_dir=tmp_path / "s")
    assert built.skipped == [f"atlantis: no such site directory in {root}"]
    assert "atlantis" in capsys.readouterr().err


def test_refuses_to_write_under_results(tmp_path):
    root = tmp_path / "results"
    (root / "local").mkdir(parents=True)
    with pytest.raises(SitebenchError, match="outside results"):
        report.build(root / "local" / "report.html", results_root=root, store_dir=tmp_path)
    assert not (root / "local" / "report.html").exists()


@pytest.mark.parametrize(
    "spec, label",
    [
        (
            "hpl@2.3~openmp level=tuned simd=auto arch=linux-debian12-x86_64_v4",
            "-O3 + target SIMD",
        ),
        ("hpl@2.3 level=tuned simd=none", "-O3 + no SIMD"),
        ("hpl@2.3 level=1 arch=linux-x-aarch64", "level 1: -O0, no SIMD"),
        ("hpl@2.3 level=3", "level 3: -O3 + target SIMD"),
        ("hpl@2.3~openmp optimization=O3 simd=auto", "-O3 + target SIMD"),
        ("", "unknown flags"),
    ],
)
def test_hpl_build_flags(spec, label):
    assert builds.hpl_flags(spec) == label


def test_hpl_build_label_names_the_blas():
    specs = [
        {
            "hash": "abcdefg1234567",
            "dependencies": [
                {"name": "openblas", "parameters": {"virtuals": ["blas", "lapack"]}},
                {"name": "openmpi", "parameters": {"virtuals": ["mpi"]}},
            ],
        }
    ]
    label = builds.hpl_build_label("hpl@2.3 level=2 /abcdefg1234567", json.dumps(specs))
    assert label == "level 2: -O0, no SIMD, openblas"


@pytest.mark.reliability_input
def test_run_corrupted_after_indexing_is_skipped(tmp_path):
    source = sorted(
        p for p in (RESULTS / "local").iterdir() if p.is_dir() and not p.name.startswith(".")
    )[0]
    root = tmp_path / "results"
    shutil.copytree(source, root / "local" / source.name)
    assert report.make(results_root=root, store_dir=tmp_path / "s").runs == 1

    (root / "local" / source.name / "report.json").write_text("{")
    again = report.make(results_root=root, store_dir=tmp_path / "s", warn=lambda m: None)

    assert again.runs == 0 and again.chart_ids == []
    assert any(source.name in s and "not valid JSON" in s for s in again.skipped)


def chart_rows(spec):
    """Every data row of a chart's Vega-Lite spec (inline values and named datasets)."""
    rows = []
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in ("values",) and isinstance(value, list):
                rows += [r for r in value if isinstance(r, dict)]
            elif key == "datasets" and isinstance(value, dict):
                rows += [r for data in value.values() for r in data if isinstance(r, dict)]
            else:
                rows += chart_rows(value)
    elif isinstance(spec, list):
        for item in spec:
            rows += chart_rows(item)
    return rows


def _two_toolchain_site(root, real=None):
    """Site 'local' of ``root``: the real two-toolchain runs, else two copies of a committed
    run with every case run once under gcc-mpich and once under gcc-openmpi."""
    if real:
        for run in real:
            shutil.copytree(run, root / "local" / run.name)
        return
    source = toolchain_runs.source_run()
    if source is None:
        pytest.skip("NO COMMITTED RUN in results/local/ with OSU, HPL and NPB to copy")
    for day, f in ((1, 1.0), (2, 1.01)):
        toolchain_runs.two_toolchain_run(
            source,
            root / "local",
            f"202611{day:02d}T020000Z-tc{day:04d}",
            {"gcc-mpich": 1.3 * f, "gcc-openmpi": f},
            started=f"202611{day:02d}T020000+0000",
        )


@pytest.mark.parametrize("kind", ["copied", "real"])
def test_two_toolchains_draw_a_series_each_in_osu_hpl_and_npb(tmp_path, kind):
    need_chromium()
    real = toolchain_runs.real_two_toolchain_runs() if kind == "real" else None
    if kind == "real" and not real:
        pytest.skip("NO REAL TWO-TOOLCHAIN RUN in results/local/ yet")
    root = tmp_path / "results"
    _two_toolchain_site(root, real)
    before = tree_digest(root)

    data = report_data.load(results_root=root, store_dir=tmp_path / "store", warn=print)
    environs = sorted(set(data.figures["environ"].dropna()))
    assert len(environs) == 2, environs
    named = {e: toolchains.toolchain_label(e) for e in environs}
    if kind == "copied":
        assert named == {"gcc-mpich": "gcc-mpich (MPICH)", "gcc-openmpi": "gcc-openmpi (Open MPI)"}
    if kind == "copied":
        # The curves are read per toolchain from its own output folder (MPICH's 1.3 times).
        curves = data.curves.groupby(["environ", "params", "size"])["value"].median()
        assert len(curves) >= 50
        ratio = curves["gcc-mpich"] / curves["gcc-openmpi"]
        assert ratio.tolist() == pytest.approx([1.3] * len(ratio), rel=0.02)
    by_anchor = {s.anchor: s for s in sections.build_sections(data)}

    # Each chart splits by toolchain where its rows have two (a toolchain whose cases failed
    # has none in a real run: OSU's empty output keeps no curve); the copies have both in all.
    split = set()
    # Ping-pong: per mapping (panel) a curve per transport and toolchain, named with its MPI.
    assert len(by_anchor["pingpong"].charts) == 2
    for chart in by_anchor["pingpong"].charts:
        spec = chart.to_dict()
        rows = chart_rows(spec)
        present = {r["environ"] for r in rows}
        for mapping in {r["mapping"] for r in rows}:
            curves = {r["curve"] for r in rows if r["mapping"] == mapping}
            transports = {r["transport"] for r in rows if r["mapping"] == mapping}
            if len(present) == 1:
                assert curves == transports
                continue
            assert curves == {f"{t} · {named[e]}" for t in transports for e in present}
            assert "transport · toolchain (MPI)" in json.dumps(spec, ensure_ascii=False)
            split.add("pingpong")
    # HPL: a bar per build and toolchain.
    (hpl,) = by_anchor["hpl"].charts
    rows = chart_rows(hpl.to_dict())
    if len({r["environ"] for r in rows}) == 2:
        builds_shown = {r["build"] for r in rows}
        assert len(builds_shown) == 2 and all(
            any(b.endswith(f" | {label}") for b in builds_shown) for label in named.values()
        )
        assert "build flags, BLAS | toolchain (MPI)" in json.dumps(
            hpl.to_dict(), ensure_ascii=False
        )
        split.add("hpl")
    # NPB: a line per toolchain.
    (npb,) = by_anchor["npb"].charts
    rows = chart_rows(npb.to_dict())
    if len({r["environ"] for r in rows}) == 2:
        assert {r["series"] for r in rows} == set(named.values())
        split.add("npb")
    if kind == "copied":
        assert split == {"pingpong", "hpl", "npb"}
        # STREAM is no MPI benchmark: its lines name the toolchain without an MPI.
        stream = by_anchor["stream"].charts[0]
        assert {r["series"] for r in chart_rows(stream.to_dict())} == set(environs)
    else:
        assert split, "the real two-toolchain runs have no chart with both toolchains"

    # The whole page renders in Chromium, every chart with marks, and results/ unchanged.
    built = report.make(results_root=root, store_dir=tmp_path / "store")
    out = report.write(built, tmp_path / "out" / "toolchains.html", results_root=root)
    assert tree_digest(root) == before
    assert render_problems(chromium(out, tmp_path, "--dump-dom"), built.chart_ids) == []
    text = out.read_text()
    for label in named.values():
        assert label in text


@pytest.mark.parametrize(
    "environ, mpi",
    [
        ("gcc-mpich", "MPICH"),
        ("gcc-openmpi", "Open MPI"),
        ("gnu", "Open MPI"),  # runs before toolchains: GCC with Open MPI
        ("oneapi-intel-mpi", "Intel MPI"),
        ("gcc-cray-mpich", "Cray MPICH"),
        ("nvhpc", None),
        (None, None),
    ],
)
def test_mpi_of_a_toolchain_name(environ, mpi):
    assert toolchains.mpi_of(environ) == mpi


def test_series_name_only_what_differs():
    labels, title = toolchains.series_labels(["default"] * 2, ["gnu", "gnu"])
    assert (labels, title) == (None, None)
    labels, title = toolchains.series_labels(["default"] * 2, ["gcc-mpich", "gcc-openmpi"])
    assert labels == ["gcc-mpich (MPICH)", "gcc-openmpi (Open MPI)"]
    assert title == "toolchain (MPI)"
    labels, title = toolchains.series_labels(["a", "b"], ["gcc-mpich", "gcc-openmpi"], mpi=False)
    assert labels == ["a / gcc-mpich", "b / gcc-openmpi"] and title == "partition / toolchain"
    labels, title = toolchains.series_labels(["a", "b"], ["gnu", "gnu"])
    assert labels == ["a", "b"] and title == "partition"


def test_disturbed_cases_are_named_in_the_provenance_table(tmp_path):
    # Two copies of a real run, one with a case marked as other work disturbed it.
    source = sorted(
        p for p in (RESULTS / "local").iterdir() if p.is_dir() and not p.name.startswith(".")
    )[0]
    root = tmp_path / "results"
    quiet, busy = (root / "local" / source.name, root / "local" / (source.name[:-6] + "d15ed0"))
    for run in (quiet, busy):
        shutil.copytree(source, run)
    rfm = json.loads((busy / "report.json").read_text())
    case = next(
        c for a in rfm["runs"] for c in a["testcases"] if c.get("perfvalues") and not c["fixture"]
    )
    case.update(disturbed=True, foreign_cores=1.5)
    (busy / "report.json").write_text(json.dumps(rfm))
    text = report.make(results_root=root, store_dir=tmp_path / "s").html
    assert "1 run(s) have cases measured while other work took the machine" in text
    assert "left out of every chart, curve and table" in text
    rows = {
        r: text.split(f'<tr id="run-local-{r.name}">')[1].split("</tr>")[0] for r in (quiet, busy)
    }
    assert f"<td>{html.escape(case['display_name'])}</td>" in rows[busy]
    assert "<td>no</td><td>no</td>" in rows[quiet]  # not disturbed, not emulated


# -- what the report keeps apart: disturbed figures, other hosts ------------------------------
RICH_RUN = RESULTS / "local" / "20261125T095540Z-bb645e"  # every quick check, its host recorded
OTHER_HOST = "0th3rh0st000"


def _java_cases(environ="gcc-openmpi"):
    """The Java ping-pong's three set-ups as ReFrame cases (figures as in
    tests/fixtures/java-pingpong/, MPJ multicore and niodev, Open MPI Java)."""
    cases = []
    for device, latency, bandwidth in (
        ("multicore", 12.9, 1240.0),
        ("niodev", 45.2, 882.5),
        ("ompi", 0.75, 4112.06),
    ):
        cases.append(
            {
                "name": "JavaPingPongCheck",
                "display_name": f"JavaPingPongCheck %device={device} %mapping=core",
                "unique_name": f"JavaPingPongCheck_{device}",
                "system": "local",
                "partition": "default",
                "environ": environ,
                "result": "pass",
                "fixture": False,
                "reference_keys": ["scale", "device", "mapping"],
                "scale": "quick",
                "device": device,
                "mapping": "core",
                "perfvalues": {
                    "local:default:latency_small": [latency, 0, None, None, "us"],
                    "local:default:bandwidth_peak": [bandwidth, 0, None, None, "MB/s"],
                },
            }
        )
    return cases


def _stored_copy(site_dir, name, factor, disturbed=False, host=None):
    """RICH_RUN copied as run ``name`` with the Java cases added, every figure and OSU curve
    times ``factor``, every case marked ``disturbed`` or of another ``host`` as asked."""
    dest = site_dir / name
    shutil.copytree(RICH_RUN, dest)
    rfm = json.loads((dest / "report.json").read_text())
    rfm["runs"][0]["testcases"] += _java_cases()
    for attempt in rfm["runs"]:
        for case in attempt["testcases"]:
            for key, entry in (case.get("perfvalues") or {}).items():
                case["perfvalues"][key] = toolchain_runs._scaled(entry, factor)
            if not case.get("fixture"):
                case["disturbed"] = disturbed
                case["host_fingerprint"] = host or case.get("host_fingerprint") or "58cbb5194e14"
    stamp = name.split("-")[0]
    rfm["session_info"]["time_start"] = f"{stamp[:15]}+0000"
    (dest / "report.json").write_text(json.dumps(rfm))
    for out in dest.glob("output/*/*/*/Osu*Check_*/rfm_job.out"):
        out.write_text(toolchain_runs._osu_curve(out.read_text(errors="replace"), factor))
    return dest


def _tables_and_data(found):
    """{section anchor: (its table as records, the data every chart of it draws)}."""
    out = {}
    for section in sections.build_sections(found):
        table = None if section.table is None else section.table.to_dict("records")
        data = [c.to_dict().get("datasets") for c in section.charts]
        out[section.anchor] = (json.dumps(table, sort_keys=True, default=str), data)
    return out


def test_every_table_and_chart_leaves_out_disturbed_figures_and_other_hosts(tmp_path):
    """A store of two quiet runs, a disturbed one beside them (every figure 1000 times) and
    an older run of another host (100 times): every section's table and every chart's data
    equal those of the quiet runs alone, and the page says what was left out and which host
    is shown; --include-disturbed brings the disturbed figures back."""
    if not (RICH_RUN / "report.json").is_file():
        pytest.skip(f"the committed run {RICH_RUN} is not in this checkout")
    quiet_root, mixed_root = tmp_path / "quiet", tmp_path / "mixed"
    for root in (quiet_root, mixed_root):
        _stored_copy(root / "local", "20261126T010000Z-aaaaa1", 1.0)
        _stored_copy(root / "local", "20261126T020000Z-aaaaa2", 1.25)
    _stored_copy(mixed_root / "local", "20261126T030000Z-d15ed0", 1000.0, disturbed=True)
    _stored_copy(mixed_root / "local", "20261124T010000Z-0a0a0a", 100.0, host=OTHER_HOST)

    quiet = report_data.load(results_root=quiet_root, store_dir=tmp_path / "sq", warn=print)
    mixed = report_data.load(results_root=mixed_root, store_dir=tmp_path / "sm", warn=print)
    assert len(mixed.runs) == 4 and len(quiet.runs) == 2
    expected, got = _tables_and_data(quiet), _tables_and_data(mixed)
    tables = [a for a, (t, _) in expected.items() if t != "null"]
    # The run holds the tables of the seed studies and of Java against C.
    assert {"pages", "java"} <= set(tables), tables
    assert set(got) == set(expected)
    for anchor in expected:
        assert got[anchor] == expected[anchor], f"section {anchor} differs"
    assert quiet.curves.shape == mixed.curves.shape and len(mixed.curves)

    judged = mixed.figures  # the kept ones: of one host, none disturbed
    assert set(judged["host"]) == {"58cbb5194e14"} and not judged["disturbed"].any()
    n_disturbed = sum(
        1
        for a in json.loads(
            (mixed_root / "local/20261126T030000Z-d15ed0/report.json").read_text()
        )["runs"]
        for c in a["testcases"]
        if not c.get("fixture") and c.get("disturbed")
        for _ in (c.get("perfvalues") or {})
    )
    said = "\n".join(mixed.skipped)
    assert "local (default): " in said and f"other host(s) ({OTHER_HOST}) left out" in said
    assert "the report shows host 58cbb5194e14" in said
    line = next(s for s in mixed.skipped if "disturbed figure(s) left out" in s)
    count = int(line.split(": ")[1].split()[0])
    assert 0 < count <= n_disturbed, (line, n_disturbed)
    assert mixed.hosts == {"local": ["58cbb5194e14"]}
    text = report.make(results_root=mixed_root, store_dir=tmp_path / "sm").html
    assert "<th>figures of host</th>" in text and "<td>58cbb5194e14</td>" in text
    assert "their figures are left out of every chart, curve and table" in text
    assert html.escape(line) in text

    # Kept on request: the disturbed run's figures (1000 times) are back in the tables.
    kept = report_data.load(
        results_root=mixed_root, store_dir=tmp_path / "sm", warn=print, include_disturbed=True
    )
    assert kept.figures["disturbed"].any()
    assert not any("disturbed figure(s) left out" in s for s in kept.skipped)
    back = _tables_and_data(kept)
    assert back["java"] != expected["java"] and back["pages"] != expected["pages"]
    assert set(kept.figures["host"]) == {"58cbb5194e14"}  # other hosts still left out

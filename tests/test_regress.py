"""Regression detection: a run drifting from the site's history is flagged, even inside
its static tolerance; noise and short histories are not."""

import itertools
import json
import statistics
import time
import warnings

import pytest

from conftest import FIXTURES, sitebench
from sitebench.results import regress, summary
from sitebench.common.errors import SitebenchError
from sitebench.results import rundirs

REPORT = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())
SECONDS = itertools.count()
HPL_REFERENCE = 81.606  # the fixture's own HPL figure
NOISE = (1.0, 1.01, 0.99, 1.004, 0.996, 1.008, 0.993, 1.002)


def store_run(factor=1.0, hpl_factor=None, result="pass", mpich_hpl=None, hpl_disturbed=None):
    """A run of site "local": the real report's figures times ``factor`` (HPL's times
    ``hpl_factor``), each still judged ``result`` against its static reference; with
    ``mpich_hpl``, HPL also ran in a second toolchain, gcc-mpich, at that factor; with
    ``hpl_disturbed`` (cores), other work took that much CPU while HPL ran."""
    report = json.loads(json.dumps(REPORT))
    cases = report["runs"][0]["testcases"]
    for case in cases:
        if hpl_disturbed and case["display_name"].startswith("HplCheck "):
            case.update(disturbed=True, foreign_cores=hpl_disturbed)
        for name, entry in (case.get("perfvalues") or {}).items():
            entry[0] *= hpl_factor if hpl_factor and name.endswith(":gflops") else factor
            if name.endswith(":gflops"):
                entry[1:4] = [HPL_REFERENCE, -0.1, None]  # as references.yaml would hold it
            entry[5:] = [result]
    if mpich_hpl:
        hpl = next(c for c in cases if c["display_name"].startswith("HplCheck "))
        mpich = json.loads(json.dumps({**hpl, "environ": "gcc-mpich"}))
        mpich["perfvalues"]["local:default:gflops"][0] = HPL_REFERENCE * mpich_hpl
        cases.append(mpich)
    # Runs of one second sort by their random suffix: give each its own second.
    when = time.time() + next(SECONDS)
    incoming = rundirs.Incoming("local", when=when)
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text('{"cpu_arch": "zen3"}')
    return incoming.commit()


def drifted(df):
    return {(r.check, r.figure): r.drift for r in df.itertuples() if r.drift}


def test_a_slower_hpl_is_flagged_while_inside_its_tolerance(results_root):
    for f in NOISE:
        store_run(f)
    # 4 % slower: inside HPL's static -10 % tolerance (still "pass"), far outside ±1 % noise.
    last = store_run(1.0, hpl_factor=0.96)
    run, earlier, df = regress.check_site("local")
    assert run == last.name and len(earlier) == len(NOISE)
    assert drifted(df) == {("HplCheck", "gflops"): "worse"}
    hpl = df[df["check"] == "HplCheck"].iloc[0]
    assert hpl["result"] == "pass" and hpl["z"] < -regress.Z_LIMIT
    assert hpl["value"] >= HPL_REFERENCE * (1 - 0.1)  # inside the static tolerance indeed
    text = regress.render("local", run, earlier, df)
    assert "WORSE" in text and "HplCheck" in text and "static check: pass" in text


def test_faster_is_flagged_as_better_and_noise_is_not_flagged(results_root):
    for f in NOISE:
        store_run(f)
    store_run(1.005)  # inside the noise
    _, _, df = regress.check_site("local")
    assert drifted(df) == {}
    store_run(1.0, hpl_factor=1.1)
    _, _, df = regress.check_site("local")
    assert drifted(df) == {("HplCheck", "gflops"): "better"}


def test_each_toolchain_is_judged_against_its_own_history(results_root):
    # HPL under MPICH at 0.8 of Open MPI's. Pooled, the history's median would sit between
    # the two and its MAD be their gap: MPICH 10 % slower (z about -1.2) would pass unseen.
    for f in NOISE:
        store_run(f, mpich_hpl=0.8 * f)
    last = store_run(1.0, mpich_hpl=0.72)
    _, _, df = regress.check_site("local")
    hpl = df[df["check"] == "HplCheck"].set_index("environ")
    assert hpl.loc["gcc-mpich", "drift"] == "worse" and hpl.loc["gnu", "drift"] == ""
    assert hpl.loc["gcc-mpich", "history_median"] == pytest.approx(0.8 * HPL_REFERENCE, 0.01)
    assert drifted(df) == {("HplCheck", "gflops"): "worse"}
    text = regress.render("local", last.name, [], df)
    assert "[default%gcc-mpich] gflops" in text


def test_the_summary_sets_each_toolchain_beside_its_own_earlier_runs(results_root):
    for f in NOISE[:3]:
        store_run(f, mpich_hpl=0.8 * f)
    last = store_run(1.0, mpich_hpl=0.8)
    with warnings.catch_warnings():
        # DuckDB 2.0's .df() of a TIMESTAMPTZ column warned (Pandas4Warning) until 2026-11-28.
        warnings.simplefilter("error", DeprecationWarning)
        text = summary.summarize(last)
    rows = [line.split() for line in text.splitlines() if line.lstrip().startswith("HplCheck")]
    # One row per toolchain, each at x1.000 of its own median (pooled: x0.89 and x1.11).
    assert sorted(row[2] for row in rows) == ["gcc-mpich", "gnu"], text
    assert all("(x1.000, n=3)" in " ".join(row) for row in rows), text


def test_a_short_history_is_not_judged(results_root):
    for f in NOISE[:3]:
        store_run(f)
    store_run(0.5)
    _, earlier, df = regress.check_site("local")
    assert len(earlier) == 3 and set(df["drift"]) == {"history too short"}


def test_only_the_last_runs_make_the_history(results_root):
    # An old era at half the speed is outside the 8-run window and does not count.
    for f in NOISE:
        store_run(0.5 * f)
    for f in NOISE:
        store_run(f)
    store_run(1.0)
    _, earlier, df = regress.check_site("local", history=len(NOISE))
    assert len(earlier) == len(NOISE) and drifted(df) == {}


@pytest.mark.reliability_input
def test_unknown_site_or_run_is_a_clear_error(results_root):
    store_run()
    with pytest.raises(SitebenchError, match="is not among the readable runs"):
        regress.check_site("local", run="20990101T000000Z-000000")


def test_command_line_exit_code_on_worse(results_root):
    for f in NOISE:
        store_run(f)
    store_run(1.0, hpl_factor=0.9)
    plain = sitebench("regressions", "local", check=True)
    assert "1 drifted" in plain.stdout
    strict = sitebench("regressions", "local", "--fail-on-worse")
    assert strict.returncode == 1
    js = json.loads(sitebench("regressions", "local", "--format", "json", check=True).stdout)
    assert len(js["history"]) == len(NOISE)


HPL_FIGURES = sum(
    len(c["perfvalues"])
    for c in REPORT["runs"][0]["testcases"]
    if c["display_name"].startswith("HplCheck ")
)
DISTURBED_HPL = (0.7, 0.69, 0.71, 0.7, 0.72, 0.7, 0.68)  # a hog beside HPL: 30 % lost


def store_disturbed_history():
    """The NOISE history with more runs than it of HPL beside a hog (marked disturbed)."""
    for quiet, busy in itertools.zip_longest(NOISE, DISTURBED_HPL):
        store_run(quiet)
        if busy:
            store_run(1.0, hpl_factor=busy, hpl_disturbed=1.6)


def test_disturbed_figures_are_left_out_of_the_history(results_root):
    store_disturbed_history()
    # 4 % slower: a drift against the quiet runs, hidden by the disturbed ones when kept
    # (their median sits at the edge of the quiet ones, their MAD is the gap to the hog's).
    last = store_run(1.0, hpl_factor=0.96)
    _, earlier, df = regress.check_site("local")
    hpl = df[df["check"] == "HplCheck"].iloc[0]
    assert drifted(df) == {("HplCheck", "gflops"): "worse"}
    assert hpl["history_n"] == len(NOISE) and not hpl["disturbed"]
    assert hpl["history_median"] == pytest.approx(HPL_REFERENCE * statistics.median(NOISE))
    left_out = len(DISTURBED_HPL) * HPL_FIGURES
    text = regress.render("local", last.name, earlier, df)
    assert f"\n{left_out} disturbed figure(s) left out (--include-disturbed keeps them)" in text
    _, _, kept = regress.check_site("local", include_disturbed=True)
    hpl = kept[kept["check"] == "HplCheck"].iloc[0]
    assert hpl["history_n"] == len(NOISE) + len(DISTURBED_HPL) and hpl["drift"] == ""
    assert "disturbed figure(s) left out" not in regress.render("local", last.name, [], kept)


def test_a_disturbed_figure_of_the_run_is_reported_not_judged(results_root):
    for f in NOISE:
        store_run(f)
    last = store_run(1.0, hpl_factor=0.5, hpl_disturbed=1.617)
    run, earlier, df = regress.check_site("local")
    hpl = df[df["check"] == "HplCheck"].iloc[0]
    assert hpl["drift"] == regress.DISTURBED and hpl["foreign_cores"] == 1.617
    assert drifted(df) == {("HplCheck", "gflops"): regress.DISTURBED}  # not "worse"
    text = regress.render("local", run, earlier, df)
    judged = len(df) - HPL_FIGURES
    assert f": {judged} of {len(df)} figures judged, 0 drifted" in text
    assert f"{HPL_FIGURES} disturbed figure(s) left out" in text
    assert "DISTURBED, NOT JUDGED: HplCheck %scale=quick [default%gnu] (gflops; " in text
    assert "other work took 1.62 cores)" in text
    # Kept, it is judged as any other: far below its history.
    _, _, kept = regress.check_site("local", last.name, include_disturbed=True)
    assert drifted(kept) == {("HplCheck", "gflops"): "worse"}
    plain = sitebench("regressions", "local", "--fail-on-worse")
    assert plain.returncode == 0 and "DISTURBED, NOT JUDGED" in plain.stdout
    kept = sitebench("regressions", "local", "--fail-on-worse", "--include-disturbed")
    assert kept.returncode == 1 and "WORSE" in kept.stdout


def test_the_summary_leaves_disturbed_earlier_figures_out(results_root):
    """An earlier HPL that other work slowed to half is neither 'previous' nor in the
    median; the summary says how many figures it left out."""
    for f in NOISE[:3]:
        store_run(f)
    store_run(1.0, hpl_factor=0.5, hpl_disturbed=1.2)
    text = summary.summarize(store_run(1.0))
    (hpl,) = [line for line in text.splitlines() if line.lstrip().startswith("HplCheck")]
    # previous: the third noise run (x0.99), not the disturbed half; the median of three.
    assert hpl.endswith("80.79 (x1.010) 81.61 (x1.000, n=3)"), hpl
    assert "1 disturbed figure(s) of earlier runs left out" in text


def test_a_disturbed_case_with_many_figures_is_named_on_a_short_line():
    """A monitored case's 40-odd figures: five named, the rest counted."""
    import pandas as pd

    rows = pd.DataFrame(
        {
            "check": "NpbMessagesCheck",
            "params": "%benchmark=cg",
            "partition": "mpirun",
            "environ": "gcc-openmpi",
            "figure": [f"count_socket_{2**i}B" for i in range(40)],
            "foreign_cores": None,
        }
    )
    (line,) = regress._not_judged_lines(rows)
    assert line.endswith(
        "(count_socket_1B, count_socket_2B, count_socket_4B, "
        "count_socket_8B, count_socket_16B and 35 more)"
    ), line

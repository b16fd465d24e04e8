"""Compare: sides (sites, partitions, runs, time ranges), the Mann-Whitney U test, formats."""

import itertools
import json
import math
import random
import shutil

import pandas as pd
import pytest

import toolchain_runs
from conftest import FIXTURES, sitebench
from sitebench.results import compare as cmp
from sitebench.results import store
from sitebench.results.compare import Side, compare, render
from sitebench.common.errors import SitebenchError
from sitebench.results.rundirs import Incoming

REPORT = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())
FIGURES_IN_REPORT = 9


def store_run(site, factor=1.0, started=None, partition=None, disturbed=None):
    """A run whose figures are the real report's times ``factor``; the cases whose display
    name starts with ``disturbed`` ran beside other work."""
    report = json.loads(json.dumps(REPORT))
    if started:
        report["session_info"]["time_start"] = started
    for case in report["runs"][0]["testcases"]:
        if disturbed and case["display_name"].startswith(disturbed):
            case.update(disturbed=True, foreign_cores=1.5)
        if partition:
            case["partition"] = partition
        for entry in (case.get("perfvalues") or {}).values():
            entry[0] *= factor
    incoming = Incoming(site)
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({"site": site}))
    return incoming.commit()


SPREAD = (0.99, 1.0, 1.01, 1.003, 0.995, 1.005)


def test_a_real_difference_is_beyond_noise_and_equal_sides_are_not(results_root):
    # Site b is 20 % faster in every figure; 6 runs each with ±1 % spread.
    for f in SPREAD:
        store_run("a", f)
        store_run("b", 1.2 * f)
    table = compare(Side.parse("a"), Side.parse("b"))
    assert len(table) == FIGURES_IN_REPORT
    assert (table["n_a"] == 6).all() and (table["n_b"] == 6).all()
    assert table["ratio"].tolist() == pytest.approx([1.2] * FIGURES_IN_REPORT)
    # Complete separation of 6 against 6: exact p = 2 / C(12, 6).
    assert table["p_value"].tolist() == pytest.approx([2 / 924] * FIGURES_IN_REPORT)
    assert set(table["beyond_noise"]) == {"yes"}
    same = compare(Side.parse("a"), Side.parse("a"))
    assert set(same["beyond_noise"]) == {"no"} and set(same["p_value"]) == {1.0}
    text = render(table, "a", "b")
    assert "B/A" in text and "1.200" in text and "Mann-Whitney" in text


def test_a_difference_within_the_noise_is_not_flagged(results_root):
    # Interleaved values: b is 0.2 % higher in median, well inside its ±1 % spread.
    for f in SPREAD:
        store_run("a", f)
        store_run("b", f * 1.002)
    table = compare(Side.parse("a"), Side.parse("b"))
    assert set(table["beyond_noise"]) == {"no"}
    assert (table["p_value"] > 0.3).all()


def test_too_few_runs_is_said_not_guessed(results_root):
    # 3 against 3 cannot reach p < 0.01 even when completely separated (p >= 0.1).
    for f in SPREAD[:3]:
        store_run("a", f)
        store_run("b", 2 * f)
    table = compare(Side.parse("a"), Side.parse("b"))
    assert set(table["beyond_noise"]) == {"too few runs"}
    assert table["p_value"].tolist() == pytest.approx([0.1] * FIGURES_IN_REPORT)


def test_exact_p_matches_enumeration():
    # Every split of 9 distinct values into 4 and 5: the exact two-sided p by brute force.
    n_a, n_b = 4, 5
    values = range(n_a + n_b)
    us = []
    for a in itertools.combinations(values, n_a):
        us.append(sum(1 for x in a for y in values if y not in a and x > y))
    for u in range(n_a * n_b + 1):
        low = min(u, n_a * n_b - u)
        brute = min(1.0, 2 * sum(1 for v in us if v <= low) / len(us))
        rank_sum = u + n_a * (n_a + 1) / 2
        assert cmp.p_value(rank_sum, n_a, n_b, 0) == pytest.approx(brute)


def test_tie_corrected_variance_matches_the_permutation_variance():
    # With ties the normal approximation's variance must equal U's exact variance over
    # all splits (mid-ranks): that is what the tie correction claims.
    data = [1, 1, 2, 3, 3, 3, 4, 5]
    n_a, n_b = 3, 5
    ranks = pd.Series(data).rank(method="average").tolist()
    us = [
        sum(ranks[i] for i in a) - n_a * (n_a + 1) / 2
        for a in itertools.combinations(range(len(data)), n_a)
    ]
    mean = sum(us) / len(us)
    permutation_var = sum((u - mean) ** 2 for u in us) / len(us)
    ties = sum(t**3 - t for t in pd.Series(data).value_counts())
    assert cmp.u_variance(n_a, n_b, ties) == pytest.approx(permutation_var)


def test_rank_sums_and_ties_from_duckdb_match_pandas(results_root):
    rng = random.Random(7)
    a = [rng.choice([1.0, 2.0, 2.5, 3.0, 4.0]) for _ in range(30)]
    b = [rng.choice([1.0, 2.0, 3.5, 4.0, 5.0]) for _ in range(40)]
    for i, value in enumerate(a + b):
        site = "a" if i < len(a) else "b"
        # One figure (HPL's) carries the value; the factor scales the report's 81.606.
        store_run(site, value / 81.606)
    con = store.open_store(["a", "b"])
    df = cmp.query(con, Side.parse("a").where(), Side.parse("b").where())
    hpl = df[df["check"] == "HplCheck"].iloc[0]
    ranks = pd.Series([round(v, 9) for v in a + b]).rank(method="average")
    assert hpl["rank_sum_a"] == pytest.approx(ranks[: len(a)].sum())
    counts = pd.Series([round(v, 9) for v in a + b]).value_counts()
    assert hpl["ties"] == pytest.approx(sum(t**3 - t for t in counts))
    assert hpl["median_a"] == pytest.approx(pd.Series(a).median())
    q = pd.Series(b).quantile([0.25, 0.75])
    assert hpl["iqr_b"] == pytest.approx(q[0.75] - q[0.25])


def test_time_ranges_and_partitions_as_sides(results_root):
    # Two weeks of one site: the second week 10 % slower, on partition "srun".
    for day, f in zip(range(1, 7), SPREAD):
        store_run("site", f, started=f"202611{day:02d}T020000+0000")
    for day, f in zip(range(15, 21), SPREAD):
        store_run("site", 0.9 * f, started=f"202611{day:02d}T020000+0000", partition="srun")
    early = Side.parse("site@2026-11-01..2026-11-08")
    late = Side.parse("site@2026-11-15..")
    table = compare(early, late)
    assert (table["n_a"] == 6).all() and (table["n_b"] == 6).all()
    assert table["ratio"].tolist() == pytest.approx([0.9] * FIGURES_IN_REPORT)
    assert set(table["beyond_noise"]) == {"yes"}
    by_partition = compare(Side.parse("site:default"), Side.parse("site:srun"))
    assert by_partition["ratio"].tolist() == pytest.approx([0.9] * FIGURES_IN_REPORT)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "spec, message",
    [
        ("nowhere", "has no runs"),
        ("../etc", "invalid site name"),
        ("local/20990101T000000Z-000000", "does not exist"),
        ("local@yesterday..", "is not a date"),
        ("local@2026-11-01", "cannot read the comparison side"),
        ("local:bad partition", "invalid partition name"),
    ],
)
def test_bad_sides_say_what_to_write(results_root, spec, message):
    store_run("local")
    with pytest.raises(SitebenchError, match=message):
        Side.parse(spec)


def test_cli_formats_warnings_and_errors(results_root):
    store_run("local")
    store_run("local", 1.1)
    (results_root / "local" / "20200101T000000Z-abcdef").mkdir()  # partial: no report
    csv = sitebench("compare", "local", "local", "--format", "csv", check=True)
    assert csv.stdout.splitlines()[0] == ",".join(cmp.COLUMNS)
    assert "skipped local/20200101T000000Z-abcdef" in csv.stderr
    js = json.loads(sitebench("compare", "local", "local", "--format", "json", check=True).stdout)
    assert len(js["rows"]) == FIGURES_IN_REPORT and "Mann-Whitney" in js["test"]
    bad = sitebench("compare", "local", "local@2026-13-45..")
    assert bad.returncode == 2 and "is not a date" in bad.stderr


def test_compare_never_modifies_results(results_root):
    store_run("local")
    (results_root / "local" / "garbage").mkdir()
    before = sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*"))
    sitebench("compare", "local", "local", check=True)
    after = sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*"))
    assert before == after


def test_an_emulated_site_carries_its_caveat(results_root):
    for f in SPREAD:
        store_run("native", f)
        run = store_run("arm", f / 50)
        prov = run / "provenance/provenance.json"
        # Runs are never rewritten; this test builds its own site as an emulated one would.
        prov.write_text(json.dumps({"site": "arm", "emulated": {"qemu_cpu": "neoverse-n1"}}))
    table = compare(Side.parse("native"), Side.parse("arm"))
    assert table.attrs["caveats"] and "'arm' runs under emulation" in table.attrs["caveats"][0]
    assert "CAVEAT: site 'arm' runs under emulation" in render(table, "native", "arm")
    js = json.loads(render(table, "native", "arm", "json"))
    assert len(js["caveats"]) == 1
    plain = compare(Side.parse("native"), Side.parse("native"))
    assert plain.attrs["caveats"] == []


# Toolchains (issue 16): a side SITE%TOOLCHAIN keeps the figures of that ReFrame environment.


def two_toolchain_site(results_root, factors_of_run, site="local"):
    """Runs of ``site``, each a copy of a committed run of results/local/ whose every case ran
    once per toolchain ({toolchain: factor of the real values} per run)."""
    source = toolchain_runs.source_run()
    if source is None:
        pytest.skip("NO COMMITTED RUN in results/local/ with OSU, HPL and NPB to copy")
    return [
        toolchain_runs.two_toolchain_run(
            source,
            results_root / site,
            f"202611{day:02d}T020000Z-tc{day:04d}",
            factors,
            started=f"202611{day:02d}T020000+0000",
            site=site,
        )
        for day, factors in enumerate(factors_of_run, start=1)
    ]


def test_two_toolchains_of_a_site_give_a_verdict_per_figure(results_root):
    # MPICH 20 % above Open MPI in every figure, 6 runs with both toolchains, ±1 % spread.
    two_toolchain_site(results_root, [{"gcc-mpich": 1.2 * f, "gcc-openmpi": f} for f in SPREAD])
    a, b = Side.parse("local%gcc-openmpi"), Side.parse("local%gcc-mpich")
    assert (a.site, a.toolchain, b.toolchain) == ("local", "gcc-openmpi", "gcc-mpich")
    table = compare(a, b)

    con = store.open_store(["local"])
    expected = con.execute(
        'SELECT count(DISTINCT ("check", params, problem, figure)) FROM figures '
        "WHERE environ = 'gcc-mpich' AND isfinite(value) AND figure <> 'job_wall'"
    ).fetchone()[0]
    assert expected > 50 and len(table) == expected  # every figure, once
    assert (table["n_a"] == 6).all() and (table["n_b"] == 6).all()
    assert {"OsuLatencyCheck", "HplCheck", "NpbCheck"} <= set(table["check"])
    moved = table[table["median_a"] != 0]
    assert moved["ratio"].tolist() == pytest.approx([1.2] * len(moved))
    assert set(moved["beyond_noise"]) == {"yes"}
    # Figures that are 0 in every run (sysbench's errors) are equal: no verdict of a change.
    assert set(table[table["median_a"] == 0]["beyond_noise"]) <= {"no"}
    assert table.attrs["caveats"] == []
    text = render(table, "local%gcc-openmpi", "local%gcc-mpich")
    assert "A: local%gcc-openmpi" in text and "B: local%gcc-mpich" in text and "1.200" in text

    # The same toolchain on both sides: nothing differs.
    same = compare(Side.parse("local%gcc-mpich"), Side.parse("local%gcc-mpich"))
    assert len(same) == expected and set(same["beyond_noise"]) == {"no"}


def test_a_figure_of_zero_on_either_side_has_no_ratio(results_root):
    # NPB class S's IS printed "Time in seconds = 0.00" in one toolchain's run (CI, 2026-11-27):
    # B/A = 0 would read as infinitely faster; the figure is under its printed resolution.
    store_run("a")
    store_run("b", 0.0)
    table = compare(Side.parse("a"), Side.parse("b"))
    assert len(table) == FIGURES_IN_REPORT and (table["median_b"] == 0).all()
    assert table["ratio"].isna().all()
    assert compare(Side.parse("b"), Side.parse("a"))["ratio"].isna().all()
    assert "0.000" not in render(table, "a", "b").split("B/A", 1)[1]


def test_toolchain_combines_with_partition_run_and_time_range(results_root):
    runs = two_toolchain_site(
        results_root, [{"gcc-mpich": 1.2 * f, "gcc-openmpi": f} for f in SPREAD]
    )
    ranged = Side.parse("local:default%gcc-mpich@2026-11-01..2026-11-04")
    assert (ranged.partition, ranged.toolchain, ranged.run) == ("default", "gcc-mpich", None)
    assert str(ranged.since.date()) == "2026-11-01" and str(ranged.until.date()) == "2026-11-04"
    table = compare(Side.parse("local:default%gcc-openmpi@2026-11-01..2026-11-04"), ranged)
    assert (table["n_a"] == 3).all() and (table["n_b"] == 3).all()  # days 1, 2 and 3
    assert set(table["beyond_noise"]) <= {"too few runs"}
    one = Side.parse(f"local%gcc-mpich/{runs[0].name}")
    assert (one.toolchain, one.run) == ("gcc-mpich", runs[0].name)
    single = compare(Side.parse(f"local%gcc-openmpi/{runs[0].name}"), one)
    assert (single["n_a"] == 1).all() and (single["n_b"] == 1).all()
    moved = single[single["median_a"] != 0]
    assert moved["ratio"].tolist() == pytest.approx([1.2] * len(moved))


def test_without_a_toolchain_a_side_pools_them_as_before_and_says_so(results_root):
    two_toolchain_site(results_root, [{"gcc-mpich": 1.2 * f, "gcc-openmpi": f} for f in SPREAD])
    pooled = compare(Side.parse("local"), Side.parse("local%gcc-mpich"))
    assert (pooled["n_a"] == 12).all() and (pooled["n_b"] == 6).all()
    assert pooled.attrs["caveats"] == [
        "side A (local) pools the figures of 2 toolchains (gcc-mpich, gcc-openmpi) as one; "
        "name one to compare them apart, e.g. local%gcc-mpich"
    ]
    assert "CAVEAT: side A (local) pools" in render(pooled, "local", "local%gcc-mpich")


def test_a_committed_single_toolchain_run_reads_the_same_with_and_without_it(results_root):
    # Old runs have the one environment 'gnu': naming it changes nothing.
    source = toolchain_runs.source_run()
    if source is None:
        pytest.skip("NO COMMITTED RUN in results/local/ with OSU, HPL and NPB to copy")
    shutil.copytree(source, results_root / "local" / source.name)
    plain = compare(Side.parse("local"), Side.parse("local"))
    named = compare(Side.parse("local%gnu"), Side.parse(f"local:default%gnu/{source.name}"))
    pd.testing.assert_frame_equal(plain, named)
    assert plain.attrs["caveats"] == named.attrs["caveats"] == []


@pytest.mark.reliability_input
def test_an_unknown_toolchain_names_those_the_runs_used(results_root):
    two_toolchain_site(results_root, [{"gcc-mpich": 1.0, "gcc-openmpi": 1.0}])
    with pytest.raises(SitebenchError) as err:
        compare(Side.parse("local%gcc-mpich"), Side.parse("local:default%intel-impi@2026-11-01.."))
    message = str(err.value)
    assert "toolchain 'intel-impi' was never used in the runs of local:default@2026-11-01.." in (
        message
    )
    assert "their toolchains: gcc-mpich, gcc-openmpi" in message
    assert "local:default%gcc-mpich@2026-11-01.." in message  # how to write one
    with pytest.raises(SitebenchError, match="they have no figures at all"):
        compare(Side.parse("local%gcc-mpich@2030-01-01.."), Side.parse("local"))
    cli = sitebench("compare", "local%gcc-mpich", "local%nvhpc-openmpi")
    assert cli.returncode == 2, cli.stderr
    assert "'nvhpc-openmpi' was never used" in cli.stderr and "gcc-mpich, gcc-openmpi" in (
        cli.stderr
    )
    ok = sitebench("compare", "local%gcc-mpich", "local%gcc-openmpi", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    rows = json.loads(ok.stdout)["rows"]
    assert rows and all(r["beyond_noise"] == "too few runs" for r in rows if r["n_a"])


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "spec, message",
    [
        ("local%bad tool", "invalid toolchain name"),
        ("local%", "cannot read the comparison side"),
        ("local/20261101T020000Z-tc0001%gcc-mpich", "cannot read the comparison side"),
        ("local%a%b", "cannot read the comparison side"),
    ],
)
def test_bad_toolchain_sides_say_what_to_write(results_root, spec, message):
    store_run("local")
    with pytest.raises(SitebenchError, match=message) as err:
        Side.parse(spec)
    if "cannot read" in message:
        assert "SITE%TOOLCHAIN" in str(err.value)


def test_a_real_two_toolchain_run_gives_a_verdict_per_figure(results_root):
    """A run of results/local/ made with two toolchains, if one was committed."""
    real = toolchain_runs.real_two_toolchain_runs()
    if not real:
        pytest.skip("NO REAL TWO-TOOLCHAIN RUN in results/local/ yet")
    run = real[-1]
    shutil.copytree(run, results_root / "local" / run.name)
    con = store.open_store(["local"])
    names = [
        e for (e,) in con.execute("SELECT DISTINCT environ FROM figures ORDER BY 1").fetchall()
    ]
    a, b = Side.parse(f"local%{names[0]}"), Side.parse(f"local%{names[1]}")
    table = compare(a, b)
    compared = table[table["beyond_noise"] != cmp.NOT_COMPARED]
    assert len(compared) > 0
    assert set(compared["beyond_noise"]) <= {"too few runs"}  # one run against one
    assert (compared["n_a"] == 1).all() and (compared["n_b"] == 1).all()


def test_sides_holding_disturbed_figures_are_marked(results_root):
    busy = 2  # runs of side B with HPL beside other work
    for i, f in enumerate(SPREAD):
        store_run("a", f)
        store_run("b", 1.2 * f, disturbed="HplCheck " if i < busy else None)
    table = compare(Side.parse("a"), Side.parse("b"))
    by_check = table.set_index("check")
    # Counted per side and figure; the disturbed figures stay in (compare keeps every run).
    assert (table["disturbed_a"] == 0).all() and (table["n_b"] == len(SPREAD)).all()
    assert by_check.loc["HplCheck", "disturbed_b"] == busy
    assert (by_check.drop("HplCheck")["disturbed_b"] == 0).all()
    text = render(table, "a", "b")
    hpl = next(line for line in text.splitlines() if "HplCheck" in line)
    assert f"(n={len(SPREAD)}, {busy} disturbed)" in hpl
    assert sum("disturbed)" in line for line in text.splitlines()) == 1
    assert "\ndisturbed: of the side's runs, measured while other work took" in text
    assert "disturbed" not in render(compare(Side.parse("a"), Side.parse("a")), "a", "a")


def test_smallest_p_of_long_histories_matches_the_exact_binomial():
    # Past 2 x EXACT_MAX_N runs it is computed through log-gamma (5 years of nightly runs
    # made math.comb's 1,100-digit integers a second of every compare).
    for n_a, n_b in ((26, 25), (40, 40), (300, 7), (1825, 1825)):
        exact = 2 / math.comb(n_a + n_b, n_a)
        assert cmp.smallest_p(n_a, n_b) == pytest.approx(exact, rel=1e-9, abs=1e-300)

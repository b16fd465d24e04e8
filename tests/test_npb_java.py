"""NPB 3.0 Java (NPB3.0-JAV, the substitute for NPB-MPJ): the parser on the captures in
tests/fixtures/npb-java/ (README there says how), and (markers spack, slow) the recipe built
from the mirror and NpbJavaCheck run through ReFrame on CG and IS class A."""

import re

import pytest
import yaml

from conftest import FIXTURES, ROOT, build_in_temp_env
from sitebench.parsers import ParseError, npb_java

NJ = FIXTURES / "npb-java"
FILES = sorted(NJ.glob("*.txt"))


def readme_rows():
    rows = {}
    for line in (NJ / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".txt`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def test_every_fixture_is_documented():
    assert len(FILES) == 6 and {p.name for p in FILES} == set(readme_rows())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parse_matches_the_capture_notes(path):
    note = readme_rows()[path.name]
    if note.startswith("fails:"):
        with pytest.raises(ParseError) as err:
            npb_java.parse(path.read_text())
        assert note.removeprefix("fails:").strip().rstrip(".") in str(err.value)
        return
    name, cls, threads, mops, time = re.match(
        r"passes: (\w+) (\w), (\d+) threads, ([\d.]+) Mop/s, ([\d.]+) s\.", note
    ).groups()
    result = npb_java.parse(path.read_text())
    assert (result.benchmark, result.npb_class, result.threads) == (name, cls, int(threads))
    assert (result.mops_total, result.time) == (float(mops), float(time))
    assert result.verified


def test_a_failed_verification_is_read_as_such():
    text = (NJ / "cg_A_np2.txt").read_text().replace("= Successful", "= UNSUCCESSFUL")
    assert not npb_java.parse(text).verified


def test_a_truncated_run_has_no_banner():
    text = (NJ / "cg_A_np2.txt").read_text()
    with pytest.raises(ParseError, match="no NPB3_0_JAV result banner"):
        npb_java.parse(text[: text.index("*****")])


@pytest.mark.spack
@pytest.mark.slow
def test_check_runs_cg_and_is_verified(spack, tmp_path):
    import rfm_temp_env

    env = yaml.safe_load((ROOT / "environments/local/spack.yaml").read_text())["spack"]
    packages = {k: env["packages"][k] for k in ("java", "openjdk")}
    build_in_temp_env(spack, tmp_path, ["npb-java"], packages=packages)
    no_references = tmp_path / "no-references.yaml"
    no_references.write_text("{}\n")
    proc, cases = rfm_temp_env.run(
        spack,
        tmp_path / "env",
        tmp_path / "rfm-run",
        ["npb_java.py"],
        ["NpbJavaCheck.*benchmark=(cg|is)"],
        references=no_references,
    )
    ran = {c["display_name"]: c for c in cases}
    assert set(ran) == {
        "NpbJavaCheck %scale=quick %benchmark=cg",
        "NpbJavaCheck %scale=quick %benchmark=is",
    }, proc.stdout[-3000:]
    assert all(c["result"] == "pass" for c in ran.values()), proc.stdout[-3000:]
    for c in ran.values():
        assert c["npb_class"] == "A" and c["substitute_for"] == "NPB-MPJ"


def test_report_sets_npb_java_beside_npb_mpi_kernel_by_kernel():
    """A stored run made from the captures: NPB Java's four kernels (class A, 2 threads) and
    NPB-MPI's of the same class on 2 ranks (tests/fixtures/npb/, Open MPI); the seed table pairs
    them kernel by kernel, labelled the substitute it is, and the report's section shows it."""
    from types import SimpleNamespace

    import pandas as pd

    from sitebench.parsers import npb
    from sitebench.report import sections, seed_tables
    from sitebench.results import figures as figure_rows
    from test_java_pingpong import case

    cases = []
    for kernel in ("cg", "ft", "is", "mg"):
        java = npb_java.parse((NJ / f"{kernel}_A_np2.txt").read_text())
        cases.append(
            case(
                "NpbJavaCheck",
                f"%scale=quick %benchmark={kernel}",
                {"mops_total": (java.mops_total, "Mop/s"), "time": (java.time, "s")},
                environ="gcc-mpich",
                scale="quick",
                benchmark=kernel,
                npb_class=java.npb_class,
                threads=java.threads,
            )
        )
        mpi = npb.parse((FIXTURES / f"npb/npb-3.4.2-mpi_{kernel}.A_np2.txt").read_text())
        # Only CG also ran on 1 rank: a count Java did not run, never paired.
        ranks = (1, 2) if kernel == "cg" else (2,)
        for n in ranks:
            mpi_n = (
                mpi
                if n == 2
                else npb.parse((FIXTURES / "npb/npb-3.4.2-mpi_cg.A_np1.txt").read_text())
            )
            cases.append(
                case(
                    "NpbCheck",
                    f"%scale=quick %benchmark={kernel} %ranks={n}",
                    {"mops_total": (mpi_n.mops_total, "Mop/s")},
                    scale="quick",
                    benchmark=kernel,
                    npb_class="A",
                    num_ranks=n,
                )
            )
    run = SimpleNamespace(
        site="local",
        name="r1",
        provenance={"cpu_arch": "x86_64_v4"},
        report={
            "session_info": {"time_start": "2026-11-26T10:00:00"},
            "runs": [{"testcases": cases}],
        },
    )
    figs = pd.DataFrame(list(figure_rows.rows_of_run(run)))
    table = seed_tables.npb_java_against_c(figs)
    assert list(table.columns) == seed_tables.NPB_JAVA_COLUMNS
    assert sorted(table["benchmark"]) == ["cg", "ft", "is", "mg"]
    cg = table[table["benchmark"] == "cg"].iloc[0]
    assert (cg["java (Mop/s)"], cg["cores"], cg["npb_class"]) == (1054.588, 2, "A")
    assert cg["c (Mop/s)"] == 8193.57 and cg["c_mpi"] == "gcc-openmpi"
    assert cg["java / c"] == pytest.approx(1054.588 / 8193.57)
    assert cg["java"] == "NPB3.0-JAV threads (substitute for NPB-MPJ)" and cg["runs"] == 1
    # Without NPB-MPI figures the Java rows stay, C empty.
    alone = seed_tables.npb_java_against_c(figs[figs["check"] == "NpbJavaCheck"])
    assert len(alone) == 4 and alone["c (Mop/s)"].isna().all()
    figs["site_label"], figs["date"], figs["hostname"], figs["href"] = "local", "d", "vm", "#"
    figs["ranks"] = pd.array([None] * len(figs), dtype="Int64")
    runs = pd.DataFrame({"site": ["local"], "emulated": [False]})
    (section,) = [
        s for s in sections.seed_sections(figs, runs, ["local"]) if s.anchor == "npb-java"
    ]
    assert len(section.table) == 4 and section.charts and "SUBSTITUTE" in section.text
    # The chart: Java's four kernels and the four NPB-MPI cases on 2 ranks, not CG on 1.
    drawn = seed_tables.npb_java_rows(figs)
    assert sorted(drawn["check"]) == ["NpbCheck"] * 4 + ["NpbJavaCheck"] * 4
    assert "%ranks=1" not in " ".join(drawn["params"])

"""NPB-MPI: the parser, the sanity verdict and the process-count rules on real outputs."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, unjudged
from sitebench.parsers import ParseError, npb

NPB = FIXTURES / "npb"
FILES = sorted(NPB.glob("npb-*.txt"))
# npb-3.4.3-mpi_cg.A_np2.txt, npb-3.4.3-spack_ep.A_np2_log-error-1e-7.txt, ...
_NAME = re.compile(r"_(\w\w)\.([A-Z])_np(\d+)")


def readme_rows():
    """file -> result text, from the fixture README written when they were captured."""
    rows = {}
    for line in (NPB / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".txt`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def requested(path):
    benchmark, npb_class, ranks = _NAME.search(path.name).groups()
    return benchmark, npb_class, int(ranks)


def test_every_fixture_is_documented_and_tested():
    assert len(FILES) > 70, "fixtures missing"
    assert {p.name for p in FILES} == set(readme_rows())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_output_matches_its_capture_notes(path):
    """The README's result column: "409.67 Mop/s, 1.31 s, SUCCESSFUL." or "refused: <NPB text>"."""
    note = readme_rows()[path.name]
    text = path.read_text()
    benchmark, npb_class, ranks = requested(path)
    if note.startswith("refused:"):
        with pytest.raises(ParseError, match=re.escape(note.split(":", 1)[1].strip().rstrip("."))):
            npb.parse(text)
        return
    mops, seconds, verdict = re.match(r"([\d.]+) Mop/s, ([\d.]+) s, (\w+)\.", note).groups()
    result = npb.parse(text)
    assert result.mops_total == pytest.approx(float(mops), abs=0.0051)
    assert result.time_s == pytest.approx(float(seconds), abs=0.0051)
    assert result.verification == verdict
    assert result.mops_per_process == pytest.approx(
        result.mops_total / result.total_processes, abs=0.01
    )
    found = npb.problems(result, benchmark, npb_class, ranks)
    assert (found == []) == (verdict == "SUCCESSFUL" and "strict-off" not in path.name), found


@pytest.mark.reliability_input
def test_failed_verification_fails_naming_benchmark_class_and_npb_verdict():
    # A real run of the Spack-built ep.A.x with a perturbed log() (README).
    path = NPB / "npb-3.4.3-spack_ep.A_np2_log-error-1e-7.txt"
    result = npb.parse(path.read_text())
    assert not result.verified
    assert npb.problems(result, "ep", "A", 2) == [
        "NPB EP class A on 2 processes: Verification = UNSUCCESSFUL"
    ]


@pytest.mark.reliability_input
def test_failed_verification_quotes_what_npb_printed():
    # NPB's own failure lines, from a real passing run turned into CG's failure format.
    text = (NPB / "npb-3.4.3-mpi_cg.A_np2.txt").read_text()
    text = text.replace(" VERIFICATION SUCCESSFUL", " VERIFICATION FAILED")
    text = text.replace("=               SUCCESSFUL", "=             UNSUCCESSFUL")
    (message,) = npb.problems(npb.parse(text), "cg", "A", 2)
    assert message.startswith("NPB CG class A on 2 processes: Verification = UNSUCCESSFUL")
    assert "NPB printed: VERIFICATION FAILED | Zeta is 0.1713023505403E+02" in message


def test_wrong_class_fails():
    result = npb.parse((NPB / "npb-3.4.3-mpi_lu.S_np2.txt").read_text())
    assert npb.problems(result, "lu", "A", 2) == ["NPB LU ran class S, expected class A"]


def test_wrong_benchmark_fails():
    result = npb.parse((NPB / "npb-3.4.3-mpi_mg.A_np1.txt").read_text())
    assert npb.problems(result, "cg", "A", 1) == ["NPB ran MG, expected CG"]


def test_wrong_process_count_fails():
    result = npb.parse((NPB / "npb-3.4.3-mpi_ft.A_np1.txt").read_text())
    assert npb.problems(result, "ft", "A", 2) == [
        "NPB FT class A: Total processes = 1, Active processes = 1, expected 2 and 2"
    ]


def test_inactive_ranks_fail():
    # NPB_NPROCS_STRICT=off: CG verified on 2 of the 3 ranks it was given.
    result = npb.parse((NPB / "npb-3.4.3-spack_cg.A_np3_strict-off.txt").read_text())
    assert result.verified and (result.total_processes, result.active_processes) == (3, 2)
    assert npb.problems(result, "cg", "A", 3) == [
        "NPB CG class A: Total processes = 3, Active processes = 2, expected 3 and 3"
    ]


def test_refused_process_count_is_an_error_quoting_npb():
    with pytest.raises(ParseError) as err:
        npb.parse((NPB / "npb-3.4.3-spack_lu.A_np3.txt").read_text())
    assert str(err.value) == (
        "NPB stopped before its report; NPB printed: *** ERROR determining processor topology "
        "for 3 processes | Expecting a grid (nx*ny, nx/2<=ny<=nx) number of processes "
        "(such as 2)"
    )
    with pytest.raises(ParseError, match=r"^LU stopped before its report.*TOO SMALL"):
        npb.parse((NPB / "npb-3.4.3-spack_lu.S_np15.txt").read_text())


@pytest.mark.reliability_input
def test_empty_and_truncated_outputs_are_errors():
    with pytest.raises(ParseError, match="empty"):
        npb.parse(" \n")
    text = (NPB / "npb-3.4.3-mpi_is.A_np2.txt").read_text()
    with pytest.raises(ParseError, match="IS output has no 'Benchmark Completed'.*truncated"):
        npb.parse(text[: text.index(" IS Benchmark Completed")])
    with pytest.raises(ParseError, match="IS report lacks 'Verification'.*truncated"):
        npb.parse(text[: text.index(" Verification    =")])
    with pytest.raises(ParseError, match="lacks 'Mop/s total', 'Mop/s/process', 'Verification'"):
        npb.parse(text[: text.index(" Mop/s total")])


@pytest.mark.reliability_input
def test_unprintable_and_nan_figures_are_errors():
    text = (NPB / "npb-3.4.3-mpi_ep.A_np1.txt").read_text()
    # Fortran prints asterisks when a number overflows its field.
    stars = re.sub(r"(Mop/s total\s+=\s+)\S+", r"\1*********", text)
    with pytest.raises(ParseError, match="'Mop/s total' is not a number"):
        npb.parse(stars)
    with pytest.raises(ParseError, match="'Time in seconds' is not finite"):
        npb.parse(re.sub(r"(Time in seconds =\s+)\S+", r"\1NaN", text))


@pytest.mark.parametrize("benchmark", ["cg", "ft", "is", "mg"])
def test_power_of_two_benchmarks(benchmark):
    assert [n for n in range(1, 20) if not npb.refused_processes(benchmark, "A", n)] == [
        1,
        2,
        4,
        8,
        16,
    ]
    assert "power-of-two" in npb.refused_processes(benchmark, "A", 6)


def test_lu_accepts_the_counts_it_ran_with():
    # Measured with the Spack-built lu.S.x on 1..24 ranks (fixture README).
    ran = {1, 2, 4, 6, 8, 9, 12, 16}
    refused = {3, 5, 7, 10, 15, 18, 20, 24}
    assert {n for n in ran | refused if npb.refused_processes("lu", "S", n) is None} == ran
    assert "grid" in npb.refused_processes("lu", "S", 10)
    assert "narrower than 3 points" in npb.refused_processes("lu", "S", 15)
    assert npb.refused_processes("lu", "A", 15) is None  # 64 points: 5 x 3 subdomains fit


def test_ep_and_is_limits():
    assert npb.refused_processes("ep", "A", 3) is None
    assert npb.refused_processes("ep", "S", 256) is None
    assert "256 batches" in npb.refused_processes("ep", "S", 257)
    assert "at most 128" in npb.refused_processes("is", "S", 256)
    assert npb.refused_processes("is", "A", 256) is None


BADLOG_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
double log(double x) {
    static double (*real_log)(double);
    if (!real_log) real_log = (double (*)(double))dlsym(RTLD_NEXT, "log");
    return real_log(x) * (1.0 + 1e-7);
}
"""


@pytest.mark.reliability_input
@pytest.mark.spack
@pytest.mark.slow
def test_reframe_fails_a_run_whose_verification_failed(tmp_path, spack):
    """EP under a log() off by 1e-7 fails its own verification: the check must fail, saying so."""
    (tmp_path / "badlog.c").write_text(BADLOG_C)
    lib = tmp_path / "libbadlog.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "badlog.c"), "-ldl"],
        check=True,
    )

    def run(*options):
        report = tmp_path / f"report{len(options)}.json"
        proc = subprocess.run(
            [
                os.path.join(os.path.dirname(sys.executable), "reframe"),
                "-C",
                str(ROOT / "site-configs/local/reframe.py"),
                "-c",
                str(ROOT / "reframe-checks/npb.py"),
                "-n",
                "NpbCheck.*benchmark=ep.*ranks=all",
                "-S",
                "NpbCheck.npb_class=S",
                *options,
                "-r",
                "--prefix",
                str(tmp_path / "rfm"),
                "--report-file",
                str(report),
            ],
            env=unjudged(spack),
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
        cases = json.loads(report.read_text())["runs"][0]["testcases"]
        return proc, next(c for c in cases if c["name"].startswith("NpbCheck"))

    proc, case = run()
    assert proc.returncode == 0 and case["result"] == "pass", proc.stdout[-3000:]
    assert case["perfvalues"]["local:default:mops_total"][0] > 0
    proc, case = run("-S", f"NpbCheck.env_vars=LD_PRELOAD:{lib}")
    assert proc.returncode != 0 and case["result"] == "fail"
    assert case["fail_phase"] == "sanity"
    expected = f"NPB EP class S on {case['num_tasks']} processes: Verification = UNSUCCESSFUL"
    assert expected in case["fail_reason"]

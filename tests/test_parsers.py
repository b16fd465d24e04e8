"""The parsers on real outputs captured on this project's machines (tests/fixtures/)."""

import math
import re

import pytest

from conftest import FIXTURES
from sitebench.parsers import ParseError, hpl, stream

STREAM_FILES = sorted((FIXTURES / "stream").glob("stream-*.txt"))
HPL_FILES = sorted((FIXTURES / "hpl").glob("hpl-*.txt"))


def readme_rows(folder):
    """file -> result text, from the fixture README written when they were captured."""
    rows = {}
    for line in (folder / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".txt`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def test_every_fixture_is_documented_and_tested():
    for files in (STREAM_FILES, HPL_FILES):
        assert files, "fixtures missing"
        assert {p.name for p in files} == set(readme_rows(files[0].parent))


@pytest.mark.parametrize("path", STREAM_FILES, ids=lambda p: p.name)
def test_stream_rates_match_the_capture_notes(path):
    text = path.read_text()
    result = stream.parse(text)
    assert stream.validates(text)
    assert result.array_elements == 80_000_000 and result.bytes_per_element == 8
    # The README lists each kernel in GB/s with one decimal, e.g. "Copy 40.0, ... Triad 36.8 GB/s".
    noted = dict(
        re.findall(r"(Copy|Scale|Add|Triad) ([\d.]+)", readme_rows(path.parent)[path.name])
    )
    assert set(noted) == set(stream.KERNELS)
    for kernel, gbs in noted.items():
        assert result.best_rate_mbs[kernel] / 1000 == pytest.approx(float(gbs), abs=0.051)


def test_stream_thread_count():
    assert (
        stream.parse((FIXTURES / "stream/stream-5.10_omp_O3_80M_t2_rep1.txt").read_text()).threads
        == 2
    )
    serial = stream.parse((FIXTURES / "stream/stream-5.10_serial_O3_80M_rep1.txt").read_text())
    assert serial.threads is None  # no OpenMP, no thread lines


@pytest.mark.parametrize("path", HPL_FILES, ids=lambda p: p.name)
def test_hpl_gflops_and_verdict_match_the_capture_notes(path):
    result = hpl.parse(path.read_text())
    note = readme_rows(path.parent)[path.name]
    gflops = float(re.search(r"([\d.]+) GFLOPS", note).group(1))
    assert result.best_gflops == pytest.approx(gflops, abs=0.0051)  # README: 2 decimals
    failed = "0 PASSED, 1 FAILED" in note
    assert bool(result.all_passed) is not failed
    assert result.tests[0].n in (2000, 5000, 10000)


@pytest.mark.reliability_input
def test_hpl_failed_residual_is_not_passed():
    result = hpl.parse(
        (
            FIXTURES
            / "hpl/hpl-2.3_openblas_O3-native_N2000_residual-FAILED_threshold-1e-12_np2.txt"
        ).read_text()
    )
    assert not result.all_passed
    assert (result.passed, result.failed) == (0, 1)
    assert result.tests[0].passed is False


def test_hpl_spack_style_output_with_progress_lines():
    path = (
        FIXTURES
        / "hpl/hpl-2.3_autotools_openblas_O3_progress-report_detailed-timing_N5000_np2.txt"
    )
    result = hpl.parse(path.read_text())
    assert len(result.tests) == 1 and result.all_passed
    assert result.best_gflops == pytest.approx(107.19, rel=1e-3)


@pytest.mark.reliability_input
@pytest.mark.parametrize("module", [stream, hpl])
def test_empty_output_is_an_error(module):
    with pytest.raises(ParseError, match="empty"):
        module.parse("  \n")


@pytest.mark.reliability_input
def test_truncated_stream_is_an_error():
    text = (FIXTURES / "stream/stream-5.10_omp_O3_80M_t1_rep1.txt").read_text()
    cut = text[: text.index("Add:")]
    with pytest.raises(ParseError, match="Add, Triad"):
        stream.parse(cut)
    assert not stream.validates(cut)


@pytest.mark.reliability_input
def test_truncated_hpl_is_an_error():
    text = (FIXTURES / "hpl/hpl-2.3_openblas_O0_N5000_NB192_P1Q2_np2_rep1.txt").read_text()
    with pytest.raises(ParseError, match="summary"):
        hpl.parse(text[: text.index("Finished")])
    with pytest.raises(ParseError, match="no result line"):
        hpl.parse(text[: text.index("T/V                N")])


@pytest.mark.reliability_input
def test_nan_and_inf_are_errors():
    stream_text = (FIXTURES / "stream/stream-5.10_omp_O3_80M_t1_rep1.txt").read_text()
    bad = re.sub(r"^(Triad:\s+)\S+", r"\1nan", stream_text, flags=re.M)
    with pytest.raises(ParseError, match="Triad"):
        stream.parse(bad)
    hpl_text = (FIXTURES / "hpl/hpl-2.3_openblas_O0_N5000_NB192_P1Q2_np2_rep1.txt").read_text()
    bad = re.sub(r"(WR\S+\s+5000\s+192\s+1\s+2\s+\S+\s+)\S+", r"\1inf", hpl_text)
    with pytest.raises(ParseError, match="finite"):
        hpl.parse(bad)
    assert math.isfinite(hpl.parse(hpl_text).best_gflops)

"""PARSEC: the parser and the check's sanity on real outputs (tests/fixtures/parsec/),
the sizes and thread counts of reframe-checks/parsec.py, and (slow) real ReFrame runs."""

import csv
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, unjudged
from sitebench.parsers import ParseError, parsec

HERE = FIXTURES / "parsec"
FILES = HERE / "files"
SHARED = sorted(HERE.glob("parsec-3.0_*.txt"))
JOBS = sorted(p for p in HERE.glob("sitebench-*.txt") if not p.name.endswith(".stderr.txt"))
TIMINGS = {row["file"]: row for row in csv.DictReader(open(HERE / "timings.csv"))}
# Options of PARSEC's blackscholes input sets; particles of fluidanimate's (printed by the
# runs in the fixtures, and test_recipe_parsec.py reads the same counts from the files).
OPTIONS = {"test": 4, "simsmall": 4096, "simmedium": 16384, "simlarge": 65536}
OPTIONS["native-generated"] = 10_000_000
PARTICLES = {"test": 4800, "simsmall": 36504, "simmedium": 102850}
PARTICLES["simmedium-500frames"] = 102850


def load_check_module():
    """reframe-checks/parsec.py as a module (ReFrame needs it registered under its name)."""
    spec = importlib.util.spec_from_file_location(
        "parsec_check", ROOT / "reframe-checks/parsec.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["parsec_check"] = module
    spec.loader.exec_module(module)
    return module


check = load_check_module()


def job(name):
    """(stdout, stderr) of one capture, named by its file name without .txt."""
    stderr = HERE / f"{name}.stderr.txt"
    return (
        (HERE / f"{name}.txt").read_text(),
        stderr.read_text() if stderr.is_file() else "",
    )


def readme_files():
    names = set()
    for line in (HERE / "README.md").read_text().splitlines():
        names |= set(re.findall(r"^\| `([^`]+\.txt)`", line))
    return names


def test_every_fixture_is_documented():
    assert SHARED and JOBS
    stdout = {p.name for p in SHARED + JOBS}
    assert stdout == readme_files()
    assert set(TIMINGS) == {p.name for p in SHARED}


# --- The hand-built runs from the shared captures: the parser reads what they printed. ---


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_shared_captures_parse_as_recorded(path):
    row = TIMINGS[path.name]
    result = parsec.parse(path.read_text(), row["app"])
    assert result.version == "3.0-beta-20150206"
    assert result.hooks == (row["build"] == "hooks")
    if result.hooks:
        assert result.roi_s == pytest.approx(float(row["roi_s"]), abs=5e-4)
        assert result.timer == "roi" and result.time_s == result.roi_s
    else:
        assert result.roi_s is None and not row["roi_s"]
    if row["app"] == "blackscholes":
        assert result.options == OPTIONS[row["input_set"]]
    else:
        assert result.particles == PARTICLES[row["input_set"]]
        assert result.saved_file == "out.fluid"
    # Run by hand, without the check's job script: only its status line is missing.
    found = parsec.problems(result, int(row["threads"]), hooks=result.hooks)
    assert len(found) == 1 and "no exit status line" in found[0], found


# --- Runs made like the check's job script (the same timer and status lines). ---


def test_good_blackscholes_run_has_no_problems():
    out, err = job("sitebench-job_blackscholes_in1000_t2")
    result = parsec.parse(out, "blackscholes", err)
    assert (result.exit_status, result.bound_cpus, result.options) == (0, 2, 1000)
    assert result.roi_s == 0.013 and result.timer == "roi"
    assert result.wall_s == pytest.approx(1795356283.072033791 - 1795356283.036909997)
    assert parsec.problems(result, 2, hooks=True, bound_cpus=2, options=1000) == []
    assert parsec.check_prices(FILES / "prices_in1000_t2.txt", 1000, FILES / "in_1000.txt") == 1000


def test_good_fluidanimate_run_has_no_problems():
    out, err = job("sitebench-job_fluidanimate_in5K_1frame_t2")
    result = parsec.parse(out, "fluidanimate", err)
    assert (result.particles, result.saved_file) == (4800, "out_in5K_1frame_t2.fluid")
    assert parsec.problems(result, 2, hooks=True, bound_cpus=2) == []
    assert parsec.check_fluid(FILES / "out_in5K_1frame_t2.fluid", 4800) == 4800


def test_wall_time_when_there_is_no_roi():
    out, _ = job("sitebench-job_blackscholes_in1000_t2")
    no_hooks = "\n".join(line for line in out.splitlines() if not line.startswith("[HOOKS]"))
    result = parsec.parse(no_hooks, "blackscholes")
    assert result.timer == "wall" and result.time_s == pytest.approx(0.035, abs=1e-3)
    assert parsec.problems(result, 2, hooks=False, options=1000) == []
    # ... but a +hooks binary that printed no hooks lines is not a good run.
    assert (
        "printed no '[HOOKS] PARSEC Hooks Version'"
        in parsec.problems(result, 2, hooks=True, options=1000)[0]
    )


# Each failed run, and the words its failure message must contain.
FAILED = {
    "sitebench-job_blackscholes_in2000000_t1-segv": (
        "blackscholes",
        1,
        {"bound_cpus": 1, "options": 2_000_000},
        ["was killed by SIGSEGV (exit status 139)", "Segmentation fault", "never left it"],
    ),
    "sitebench-job_blackscholes_missing-input_t2": (
        "blackscholes",
        2,
        {"bound_cpus": 2, "options": 1000},
        ["exited with status 1", "ERROR: Unable to open file in_missing.txt", "never entered"],
    ),
    "sitebench-job_blackscholes_in100000_t2-bound-1cpu": (
        "blackscholes",
        2,
        {"bound_cpus": 2, "options": 100000},
        ["ran on 1 CPUs, expected 2"],
    ),
    "sitebench-job_blackscholes_in4_t8-reduced": (
        "blackscholes",
        8,
        {"options": 4},
        ["ran fewer than 8 threads: the input has only 4 options", "unevenly"],
    ),
    "sitebench-job_blackscholes_in1000_t3-uneven": (
        "blackscholes",
        3,
        {"options": 1000},
        ["splits 1000 options unevenly over 3 threads: it would skip the last 1"],
    ),
    "sitebench-job_fluidanimate_in5K_t3-not-power-of-2": (
        "fluidanimate",
        3,
        {},
        ["exited with status 1 (Number of threads must be a power of 2)", "needs a power of 2"],
    ),
    "sitebench-rfm_quick_blackscholes_t1-time-limit-4s": (
        "blackscholes",
        1,
        {"bound_cpus": 1, "options": 2_000_000},
        ["no exit status line", "killed before it ended (time limit?)", "never entered the ROI"],
    ),
    "sitebench-job_fluidanimate_missing-input_t2": (
        "fluidanimate",
        2,
        {"bound_cpus": 2},
        ["Error opening file. Aborting.", "no 'Number of particles'", "did not save"],
    ),
}


@pytest.mark.reliability_input
@pytest.mark.parametrize("name", sorted(FAILED))
def test_failed_runs_name_their_cause(name):
    benchmark, threads, expect, causes = FAILED[name]
    out, err = job(name)
    found = parsec.problems(
        parsec.parse(out, benchmark, err), threads, hooks=True, stderr=err, **expect
    )
    message = "; ".join(found)
    for cause in causes:
        assert cause in message, message


# The check's quick runs under ReFrame: (benchmark, threads, options or particles, ROI s).
RFM_QUICK = {
    "sitebench-rfm_quick_blackscholes_t1": ("blackscholes", 1, 2_000_000, 9.459),
    "sitebench-rfm_quick_blackscholes_t2": ("blackscholes", 2, 2_000_000, 13.496),
    "sitebench-rfm_quick_fluidanimate_t1": ("fluidanimate", 1, 102850, 18.814),
    "sitebench-rfm_quick_fluidanimate_t2": ("fluidanimate", 2, 102850, 20.645),
}


@pytest.mark.parametrize("name", sorted(RFM_QUICK))
def test_quick_runs_under_reframe_are_good(name):
    benchmark, threads, size, roi = RFM_QUICK[name]
    out, err = job(name)
    result = parsec.parse(out, benchmark, err)
    assert result.time_s == roi and result.timer == "roi"
    assert result.wall_s > roi  # the wall time also holds reading the input
    expect = {"options": size} if benchmark == "blackscholes" else {}
    assert parsec.problems(result, threads, hooks=True, bound_cpus=threads, **expect) == []
    assert (result.options if benchmark == "blackscholes" else result.particles) == size


def test_every_job_capture_is_tested():
    good = {"sitebench-job_blackscholes_in1000_t2", "sitebench-job_fluidanimate_in5K_1frame_t2"}
    assert {p.name.removesuffix(".txt") for p in JOBS} == good | set(FAILED) | set(RFM_QUICK)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "cut_before, cause",
    [
        ("[HOOKS] Leaving ROI", "never left it"),
        ("[HOOKS] Total time", "printed no ROI time"),
        ("[HOOKS] Terminating", "did not finish after the ROI"),
        ("[sitebench] exit status", "no exit status line"),
        ("[HOOKS] Entering ROI", "never entered the ROI"),
    ],
)
def test_truncated_output_names_what_is_missing(cut_before, cause):
    out, _ = job("sitebench-job_fluidanimate_in5K_1frame_t2")
    cut = out[: out.index(cut_before)]
    found = parsec.problems(parsec.parse(cut, "fluidanimate"), 2, hooks=True, bound_cpus=2)
    assert any(cause in f for f in found), found


@pytest.mark.reliability_input
def test_not_parsec_output_is_an_error():
    with pytest.raises(ParseError, match="empty"):
        parsec.parse(" \n", "blackscholes")
    with pytest.raises(ParseError, match="no 'PARSEC Benchmark Suite' line"):
        parsec.parse("Segmentation fault\n", "fluidanimate")
    with pytest.raises(ParseError, match="unknown PARSEC benchmark 'canneal'"):
        parsec.parse(job("sitebench-job_blackscholes_in1000_t2")[0], "canneal")
    out, _ = job("sitebench-job_blackscholes_in1000_t2")
    with pytest.raises(ParseError, match="ROI time is not a finite"):
        parsec.parse(out.replace("0.013s", "nans"), "blackscholes")


def test_zero_roi_time_is_too_short():
    out, _ = job("sitebench-job_blackscholes_in1000_t2")
    result = parsec.parse(out.replace("0.013s", "0.000s"), "blackscholes")
    assert "too short to time, enlarge the input" in "; ".join(
        parsec.problems(result, 2, hooks=True, bound_cpus=2, options=1000)
    )


# --- Output files. ---


def test_uneven_split_leaves_a_real_option_unpriced():
    """blackscholes 3 threads on 1000 options priced 999: the last price is 0 (real file)."""
    with pytest.raises(ParseError, match=r"option 1000 priced 0\.0, DerivaGem's reference"):
        parsec.check_prices(FILES / "prices_in1000_t3-uneven.txt", 1000, FILES / "in_1000.txt")


@pytest.mark.reliability_input
def test_broken_prices_files(tmp_path):
    good = (FILES / "prices_in1000_t2.txt").read_text().splitlines(keepends=True)
    cases = {
        "truncated": (good[:-10], "holds 990 prices, expected 1000"),
        "header": (["999\n"] + good[1:], "starts with '999', not the option count 1000"),
        "garbage": (good[:5] + ["nan-ish\n"] + good[6:], "price 5 is not a number"),
        "wrong": (good[:7] + ["1.5\n"] + good[8:], "option 7 priced 1.5"),
        "nan": (good[:3] + ["nan\n"] + good[4:], "option 3 priced nan"),
    }
    for name, (lines, message) in cases.items():
        path = tmp_path / f"{name}.txt"
        path.write_text("".join(lines))
        with pytest.raises(ParseError, match=re.escape(message)):
            parsec.check_prices(path, 1000, FILES / "in_1000.txt")
    with pytest.raises(ParseError, match="wrote no prices file"):
        parsec.check_prices(tmp_path / "absent.txt", 1000, FILES / "in_1000.txt")
    with pytest.raises(ParseError, match="does not hold 2000 options"):
        parsec.check_prices(FILES / "prices_in1000_t2.txt", 2000, FILES / "in_1000.txt")


@pytest.mark.reliability_input
def test_broken_fluid_files(tmp_path):
    data = (FILES / "out_in5K_1frame_t2.fluid").read_bytes()
    floats = list(struct.unpack(f"<{9 * 4800}f", data[8:]))
    nan = floats.copy()
    nan[100] = float("nan")
    outside = floats.copy()
    outside[9 * 17 + 1] = 0.5  # y of particle 17, above the box (max 0.1 m)
    cases = {
        "truncated": (data[:-36], 4800, "truncated"),
        "count": (data, 5000, "holds 4800 particles, the run had 5000"),
        "nan": (data[:8] + struct.pack(f"<{len(nan)}f", *nan), 4800, "non-finite"),
        "outside": (
            data[:8] + struct.pack(f"<{len(outside)}f", *outside),
            4800,
            "left the simulation box along axis y",
        ),
        "empty": (b"", 4800, "no header"),
    }
    for name, (content, particles, message) in cases.items():
        path = tmp_path / f"{name}.fluid"
        path.write_bytes(content)
        with pytest.raises(ParseError, match=re.escape(message)):
            parsec.check_fluid(path, particles)
    with pytest.raises(ParseError, match="wrote no output file"):
        parsec.check_fluid(tmp_path / "absent.fluid", 4800)


# --- Sizes, thread counts and binding of the check. ---


@pytest.mark.parametrize(
    "cores, counts",
    [(1, [1]), (2, [1, 2]), (6, [1, 2, 3, 4, 6]), (128, [1, 2, 4, 8, 16, 32, 64, 128])],
)
def test_the_one_thread_baseline_always_runs(cores, counts):
    assert check.thread_counts(cores) == counts
    assert check.thread_count("1", cores) == 1
    assert check.thread_count("all", 1) is None  # would repeat the baseline


@pytest.mark.parametrize("cores", [1, 2, 6, 12, 64, 96, 128])
def test_blackscholes_input_is_split_evenly_at_every_count(cores):
    options = check.blackscholes_options(cores, 1_000_000, 0)
    assert options >= 1_000_000 * cores
    assert all(options % count == 0 for count in check.thread_counts(cores))


def test_sizes_per_scale():
    # The 2-core VM: quick 2 M options and 80 frames, full PARSEC native 10 M and 500.
    assert check.blackscholes_options(2, 1_000_000, 0) == 2_000_000
    assert check.blackscholes_options(2, 2_500_000, 10_000_000) == 10_000_000
    assert check.blackscholes_options(64, 2_500_000, 10_000_000) == 160_000_000
    assert check.blackscholes_options(6, 1_000_000, 0) == 6_000_000
    assert check.blackscholes_options(5, 333, 0) == 1680  # lcm(1, 2, 4, 5) = 20
    assert check.fluidanimate_frames(2, 40, 0) == 80
    assert check.fluidanimate_frames(2, 125, 500) == 500
    assert check.fluidanimate_frames(64, 125, 500) == 8000


def test_binding_only_where_the_first_cpus_are_distinct_cores():
    local = ROOT / "site-configs/local/topology.json"
    two_cores = {"cores": ["0x1", "0x2"]}
    assert check.bindable(two_cores, 2) and check.bindable(two_cores, 1)
    assert not check.bindable(two_cores, 3)
    siblings_apart = {"cores": ["0x11", "0x22", "0x44", "0x88"]}  # 0-3 cores, 4-7 SMT
    assert check.bindable(siblings_apart, 4)
    siblings_adjacent = {"cores": ["0x3", "0xc"]}  # CPUs 0 and 1 share a core
    assert not check.bindable(siblings_adjacent, 2) and check.bindable(siblings_adjacent, 1)
    assert not check.bindable({}, 1) and not check.bindable(None, 1)
    if local.is_file():
        assert check.bindable(json.loads(local.read_text())["topology"], 2)


# --- Real ReFrame runs (the Spack-built binaries). ---


def reframe(tmp_path, *args, env=None, checks=ROOT / "reframe-checks/parsec.py"):
    exe = os.path.join(os.path.dirname(sys.executable), "reframe")
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            exe,
            "-C",
            str(ROOT / "site-configs/local/reframe.py"),
            "-c",
            str(checks),
            "--prefix",
            str(tmp_path),
            "--report-file",
            str(report),
            "--exec-policy",
            "serial",
            "-r",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    cases = {}
    if report.is_file():
        for run in json.loads(report.read_text())["runs"]:
            for case in run["testcases"]:
                cases[case["name"]] = case
    return proc, cases


@pytest.mark.spack
@pytest.mark.slow
def test_selected_count_pulls_in_the_one_thread_run(tmp_path, spack):
    """Only threads=all selected: the 1-thread run comes along and is its baseline."""
    proc, cases = reframe(
        tmp_path,
        "-n",
        "ParsecCheck.*fluidanimate.*threads=all",
        "-S",
        "ParsecCheck.fluid_input=in_35K.fluid",
        "-S",
        "ParsecCheck.frames=20",
        env=unjudged(spack),
    )
    one = cases.get("ParsecCheck %scale=quick %benchmark=fluidanimate %threads=1")
    all_ = cases.get("ParsecCheck %scale=quick %benchmark=fluidanimate %threads=all")
    assert one and all_, proc.stdout[-3000:]
    for case in (one, all_):
        assert case["result"] == "pass", case.get("fail_reason")
        assert case["timer"] == "roi" and case["frames"] == 20
    figures = {k.split(":")[-1]: v[0] for k, v in all_["perfvalues"].items()}
    assert all_["baseline_time"] == one["perfvalues"]["local:default:time"][0]
    assert figures["speedup"] == pytest.approx(all_["baseline_time"] / figures["time"])
    assert figures["efficiency"] == pytest.approx(figures["speedup"] / all_["num_threads"])
    assert one["perfvalues"]["local:default:speedup"][0] == 1.0
    assert all_["num_threads"] == all_["bound_cpus"] > 1
    # Both outputs were kept: the 1-thread run was cleaned up after its dependent passed.
    for case in (one, all_):
        out = (
            tmp_path
            / "output/local/default"
            / case["environ"]
            / case["short_name"]
            / "rfm_job.out"
        )
        assert "[HOOKS] Total time spent in ROI" in out.read_text()


WRONG_THREADS = """
import sys

sys.path.insert(0, {checks!r})

import reframe as rfm  # noqa: E402
from reframe.core.builtins import run_before  # noqa: E402

import parsec  # noqa: E402


@rfm.simple_test
class ParsecWrongThreads(parsec.ParsecCheck):
    # Starts the program with 3 threads, whatever the check expects.
    @run_before("run")
    def three_threads(self):
        self.executable_opts = ["3"] + self.executable_opts[1:]
"""


@pytest.mark.reliability_fault
@pytest.mark.spack
@pytest.mark.slow
def test_failing_runs_fail_the_check_with_their_cause(tmp_path, spack):
    """Real runs: refused thread count (sanity), time limit (run), bad inputs (setup)."""
    wrong = tmp_path / "wrong_threads.py"
    wrong.write_text(WRONG_THREADS.format(checks=str(ROOT / "reframe-checks")))
    proc, cases = reframe(
        tmp_path / "threads",
        "-n",
        "ParsecWrongThreads.*fluidanimate.*threads=1$",
        "-S",
        "fluid_input=in_5K.fluid",
        "-S",
        "frames=1",
        env=unjudged(spack),
        checks=wrong,
    )
    case = cases["ParsecWrongThreads %scale=quick %benchmark=fluidanimate %threads=1"]
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", proc.stdout[-3000:]
    assert "exited with status 1 (Number of threads must be a power of 2)" in case["fail_reason"]
    assert not case.get("perfvalues") or all(v[0] is None for v in case["perfvalues"].values())

    runs = {
        "blackscholes": (["-S", "ParsecCheck.time_limit=2s"], "run", "job timed out"),
        "fluidanimate": (
            ["-S", "ParsecCheck.fluid_input=in_500K.fluid"],
            "setup",
            "fluidanimate input in_500K.fluid is not installed",
        ),
    }
    for benchmark, (options, phase, cause) in runs.items():
        proc, cases = reframe(
            tmp_path / benchmark,
            "-n",
            f"ParsecCheck.*{benchmark}.*threads=1$",
            *options,
            env=unjudged(spack),
        )
        case = cases[f"ParsecCheck %scale=quick %benchmark={benchmark} %threads=1"]
        assert proc.returncode != 0 and case["result"] == "fail", proc.stdout[-3000:]
        assert case["fail_phase"] == phase and cause in case["fail_reason"], case["fail_reason"]

    proc, cases = reframe(
        tmp_path / "uneven",
        "-n",
        "ParsecCheck.*blackscholes.*threads=1$",
        "-S",
        "ParsecCheck.num_options=1001",
        env=unjudged(spack),
    )
    case = cases["ParsecCheck %scale=quick %benchmark=blackscholes %threads=1"]
    assert case["result"] == "fail" and case["fail_phase"] == "setup"
    assert "num_options=1001 is not a multiple of 2 threads" in case["fail_reason"]

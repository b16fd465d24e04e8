"""References from history: median, noise-aware tolerance, diff before writing."""

import json
import statistics

import pytest
import yaml

from conftest import sitebench
from sitebench.results import propose
from sitebench.common.errors import SitebenchError
from sitebench.sites import host


HOST = host.make({"cpu_model": "Test CPU", "sockets": 1, "cores": 4, "cpus": 8, "memory_gib": 16})


def store_run(root, name, triads, latency=None, arch="zen3", fingerprint=HOST, disturbed=()):
    """A run directory as the runner stores it, with STREAM-like and latency-like cases;
    the STREAM cases of the thread counts in ``disturbed`` ran beside other work."""
    cases = [
        {
            "name": f"StreamCheck %threads={threads}",
            "display_name": f"StreamCheck %scale=quick %threads={threads}",
            "unique_name": f"StreamCheck_{threads}",
            "fixture": False,
            "scale": "quick",
            "num_threads": threads,
            "reference_keys": ["scale", "num_threads"],
            "perfvalues": {"local:default:Triad": [value, 0, None, None, "MB/s", "pass"]},
            "disturbed": threads in disturbed,
            "foreign_cores": 1.5 if threads in disturbed else 0.01,
        }
        for threads, value in triads.items()
    ]
    # A latency per toolchain ({environ: value}) where the MPI check ran in several.
    for environ, value in (latency if isinstance(latency, dict) else {None: latency}).items():
        if value is None:
            continue
        cases.append(
            {
                "name": "OsuLatency",
                "display_name": "OsuLatency %scale=quick %mapping=core",
                "fixture": False,
                "environ": environ,
                "scale": "quick",
                "mapping": "core",
                "reference_keys": ["scale", "mapping"],
                "perfvalues": {"local:default:latency": [value, 0, None, None, "us", "pass"]},
            }
        )
    cases.append({"name": "StreamBuild", "fixture": True, "perfvalues": {}})
    run = root / "local" / name
    (run / "provenance").mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({"runs": [{"testcases": cases}]}))
    prov = {"cpu_arch": arch, "host_fingerprint": fingerprint}
    (run / "provenance/provenance.json").write_text(json.dumps(prov))
    return run


def test_median_and_tolerance_from_the_spread(tmp_path):
    # Triad on 1 thread: median 100, MAD 2 -> noise 1.4826 x 2 / 100 = 2.97 %, 3 sigma = 0.09.
    for i, (t1, lat) in enumerate([(98, 1.0), (100, 1.0), (102, 1.2), (100, 1.0), (110, 0.9)]):
        store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: t1, 2: 150.0}, latency=lat)
    proposal, notes, runs = propose.propose("local", last=5, root=tmp_path)
    assert len(runs) == 5 and notes == []
    stream = proposal["StreamCheck"]
    assert stream["$index"] == ["$processor.arch", "scale", "num_threads"]
    assert stream["zen3"]["quick"][1]["Triad"] == [100, -0.09, None, "MB/s"]
    # No spread at all still leaves the minimum tolerance.
    assert stream["zen3"]["quick"][2]["Triad"] == [150, -propose.MIN_TOLERANCE, None, "MB/s"]
    # A latency loses upwards: the bound is on the upper side.
    latency = proposal["OsuLatency"]["zen3"]["quick"]["core"]["latency"]
    assert latency[0] == 1.0 and latency[1] is None and latency[2] > 0


def test_a_check_run_in_two_toolchains_gets_a_reference_per_toolchain(tmp_path):
    # MPICH's and Open MPI's small-message latency over shared memory in the stored run
    # local/20261125T095540Z-bb645e (0.57 and 0.38 us): one pooled median would hold neither.
    for i, (mpich, ompi) in enumerate([(0.57, 0.38), (0.58, 0.38), (0.56, 0.39)]):
        latency = {"gcc-mpich": mpich, "gcc-openmpi": ompi}
        store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 100.0}, latency=latency)
    proposal, notes, _ = propose.propose("local", last=3, root=tmp_path)
    osu = proposal["OsuLatency"]
    assert osu["$index"] == ["$processor.arch", "toolchain", "scale", "mapping"]
    # MPICH: MAD 0.01 -> 3 x 1.4826 x 0.01 / 0.57 = 0.078; Open MPI: no spread, the minimum.
    assert osu["zen3"]["gcc-mpich"]["quick"]["core"]["latency"][:3] == [0.57, None, 0.08]
    assert osu["zen3"]["gcc-openmpi"]["quick"]["core"]["latency"][:3] == [0.38, None, 0.05]
    # STREAM ran in one toolchain: its index is the check's own.
    assert proposal["StreamCheck"]["$index"] == ["$processor.arch", "scale", "num_threads"]
    assert notes == []


def test_only_the_last_runs_count(tmp_path):
    store_run(tmp_path, "20250101T000000Z-000000", {1: 10.0})
    for i in range(3):
        store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 100.0})
    proposal, _, runs = propose.propose("local", last=3, root=tmp_path)
    assert runs[0] == "20260100T000000Z-aaaaa0"
    assert proposal["StreamCheck"]["zen3"]["quick"][1]["Triad"][0] == 100


def test_too_few_runs_is_a_clear_error(tmp_path):
    store_run(tmp_path, "20260101T000000Z-aaaaaa", {1: 100.0})
    with pytest.raises(SitebenchError, match="at least 3"):
        propose.propose("local", root=tmp_path)


def test_a_figure_missing_from_some_runs_is_left_out_and_said(tmp_path):
    store_run(tmp_path, "20260101T000000Z-aaaaaa", {1: 100.0, 2: 150.0})
    store_run(tmp_path, "20260102T000000Z-aaaaaa", {1: 100.0})
    store_run(tmp_path, "20260103T000000Z-aaaaaa", {1: 100.0})
    proposal, notes, _ = propose.propose("local", root=tmp_path)
    assert 2 not in proposal["StreamCheck"]["zen3"]["quick"]
    assert any("need 3" in n for n in notes)


def test_diff_first_then_write_keeping_other_checks(tmp_path):
    for i in range(3):
        store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 100.0 + i})
    refs = tmp_path / "references.yaml"
    refs.write_text(
        "HplCheck:\n  $index: [$processor.arch]\n  zen3:\n    gflops: [50, -0.1, null]\n"
    )
    change, _ = propose.apply("local", refs, last=5, root=tmp_path)
    assert "+StreamCheck:" in change and "HplCheck" in refs.read_text()
    assert "StreamCheck" not in refs.read_text()  # a diff only, until --write
    propose.apply("local", refs, last=5, root=tmp_path, write=True)
    written = yaml.safe_load(refs.read_text())
    assert written["HplCheck"]["zen3"]["gflops"] == [50, -0.1, None]
    assert written["StreamCheck"]["zen3"]["quick"][1]["Triad"][0] == 101
    again, _ = propose.apply("local", refs, last=5, root=tmp_path, write=True)
    assert again == ""


def test_the_written_file_passes_the_validator(tmp_path):
    from sitebench.sites import references

    for i in range(3):
        store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 100.0 + i}, latency=1.0 + i / 10)
    refs = tmp_path / "references.yaml"
    propose.apply("local", refs, root=tmp_path, write=True)
    references.validate(refs)


def test_command_line_on_a_site_without_runs(results_root):
    proc = sitebench("references", "local")
    assert proc.returncode != 0
    assert "at least 3" in proc.stderr and "Traceback" not in proc.stderr


def test_runs_of_an_older_index_are_left_out(tmp_path):
    for i in range(3):
        run = store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 100.0})
    # The check's index gained a key: earlier runs cannot say which entry they belong to.
    report = json.loads((run / "report.json").read_text())
    for case in report["runs"][0]["testcases"]:
        if case.get("reference_keys"):
            case["reference_keys"] = ["scale", "num_threads", "variant"]
            case["variant"] = "a"
    (run / "report.json").write_text(json.dumps(report))
    for i in range(3, 5):
        new = store_run(tmp_path, f"2026010{i}T000000Z-aaaaa{i}", {1: 200.0})
        (new / "report.json").write_text(json.dumps(report))
    proposal, notes, _ = propose.propose("local", last=5, root=tmp_path)
    stream = proposal["StreamCheck"]
    assert stream["$index"] == ["$processor.arch", "scale", "num_threads", "variant"]
    assert stream["zen3"]["quick"][1] == {"a": {"Triad": [100, -0.05, None, "MB/s"]}}
    assert any("since changed" in n for n in notes)


QUIET_TRIADS = (100.0, 101.0, 99.0)
BUSY_TRIADS = (60.0, 62.0)  # STREAM beside a hog


def store_disturbed_history(root):
    """Five runs of STREAM on 1 thread, the last two disturbed; on 2 threads all quiet."""
    values = [(v, ()) for v in QUIET_TRIADS] + [(v, (1,)) for v in BUSY_TRIADS]
    for i, (triad, disturbed) in enumerate(values):
        store_run(root, f"2026010{i}T000000Z-aaaaa{i}", {1: triad, 2: 150.0}, disturbed=disturbed)


def test_references_leave_disturbed_figures_out_unless_asked(tmp_path):
    store_disturbed_history(tmp_path)
    refs = tmp_path / "references.yaml"
    _, notes = propose.apply("local", refs, last=5, root=tmp_path, write=True)
    triad = yaml.safe_load(refs.read_text())["StreamCheck"]["zen3"]["quick"][1]["Triad"]
    assert triad[0] == statistics.median(QUIET_TRIADS)
    assert notes == [
        f"{len(BUSY_TRIADS)} disturbed figure(s) left out (--include-disturbed keeps them)"
    ]
    _, notes = propose.apply(
        "local", refs, last=5, root=tmp_path, write=True, include_disturbed=True
    )
    triad = yaml.safe_load(refs.read_text())["StreamCheck"]["zen3"]["quick"][1]["Triad"]
    assert triad[0] == statistics.median(QUIET_TRIADS + BUSY_TRIADS) and notes == []


def test_command_line_says_what_it_left_out_and_keeps_it_when_asked(results_root):
    store_disturbed_history(results_root)
    plain = sitebench("references", "local", check=True)
    left_out = f"note: {len(BUSY_TRIADS)} disturbed figure(s) left out (--include-disturbed"
    assert left_out in plain.stderr and "not written (add --write)" in plain.stdout
    kept = sitebench("references", "local", "--include-disturbed", check=True)
    assert "disturbed" not in kept.stderr
    for out, triads in ((plain, QUIET_TRIADS), (kept, QUIET_TRIADS + BUSY_TRIADS)):
        assert f"+        Triad: [{propose._round(statistics.median(triads))}, " in out.stdout

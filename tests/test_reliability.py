"""The reliability suite's own cases: faults survived with nothing lost, and the bad inputs
no other file covers. The rest of the suite is marked where it lives; `./sitebench test -m
reliability` runs it all (tests/README.md lists it, tests/fixtures/reliability/ the inputs).

Faults here: the disk full while a run is written (a 2 MiB tmpfs), the writer killed
mid-copy and mid-commit, concurrent writers of two sites and of one, a Spack build failure
of one benchmark (a STREAM tarball with a wrong checksum in a copy of the mirror), ReFrame
interrupted with Ctrl-C, a benchmark killed mid-run.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import small_tmpfs, FIXTURES, ROOT, sitebench
from sitebench.results import compare
from sitebench.results import figures
from sitebench.results import record
from sitebench.results import store
from sitebench.sites import toolchains
from sitebench.sites.site import Site
from sitebench.common.errors import SitebenchError
from sitebench.parsers import ParseError, hpl, stream
from sitebench.results.rundirs import (
    INCOMING,
    Incoming,
    case_folder,
    leftovers,
    load_run,
    load_runs,
    run_dirs,
)

HERE = FIXTURES / "reliability"
REPORT = (FIXTURES / "reframe/report-local-quick.json").read_text()
SRC = str(ROOT / "src")


def store_run(site="local", root=None, marker=None):
    """A committed run of the real report (``marker`` in its provenance)."""
    incoming = Incoming(site, root)
    (incoming.path / "report.json").write_text(REPORT)
    (incoming.path / "provenance").mkdir()
    provenance = {"site": site, "marker": marker}
    (incoming.path / "provenance/provenance.json").write_text(json.dumps(provenance))
    return incoming.commit()


def tree_bytes(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def visible(root, site="local"):
    return [p.name for p in run_dirs(site, root)]


# -- the disk full while a run is written ------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, unmounted at the end."""
    with small_tmpfs(tmp_path / "small-disk", "2m") as mnt:
        yield mnt


@pytest.mark.reliability_fault
def test_disk_full_while_a_run_is_written_stores_nothing_and_keeps_the_rest(small_disk, tmp_path):
    earlier = store_run(root=small_disk)
    before = tree_bytes(earlier)
    # ReFrame's output (outside results/), larger than the disk: 3 MiB of benchmark output.
    work = tmp_path / "work"
    (work / "output/local/default/gnu/StreamCheck_1").mkdir(parents=True)
    (work / "output/local/default/gnu/StreamCheck_1/rfm_job.out").write_bytes(
        os.urandom(3 * 1024 * 1024)
    )
    (work / "perflogs").mkdir()
    incoming = Incoming("local", small_disk)
    report = incoming.path / "report.json"
    report.write_text(REPORT)

    def write_provenance(dest):
        dest.mkdir()
        (dest / "provenance.json").write_text("{}")

    with pytest.raises(SitebenchError) as err:
        record.store(incoming, work, report, write_provenance)
    # The error names the cause, what was kept and what to do.
    assert "No space left on device" in err.value.problem, err.value
    assert "nothing was stored" in err.value.problem and str(work) in err.value.problem
    assert "make room" in err.value.fix
    assert isinstance(err.value.__cause__, OSError)  # shutil.Error: copytree's list
    assert "[(" not in err.value.problem  # its first cause, not the list
    # No new run is visible; the earlier one is intact; the leftover is hidden and marked.
    assert visible(small_disk) == [earlier.name]
    assert tree_bytes(earlier) == before
    (left,) = [p for p in (small_disk / "local").iterdir() if p.name.startswith(".")]
    assert left.name.startswith(INCOMING) and left.name.endswith(".abandoned")
    assert left == incoming.path and str(left) in err.value.fix
    ((path, why),) = leftovers("local", small_disk)
    assert path == left and why.startswith("abandoned")
    warnings = []
    runs = load_runs("local", small_disk, warn=warnings.append)
    assert [r.name for r in runs] == [earlier.name]
    assert len(warnings) == 1 and "is not a run (abandoned" in warnings[0]
    # ReFrame's output is still where it was; with room again, the next run is stored.
    assert (work / "output/local/default/gnu/StreamCheck_1/rfm_job.out").stat().st_size > 0
    shutil.rmtree(left)
    again = store_run(root=small_disk)
    assert visible(small_disk) == sorted([earlier.name, again.name])


# -- the writer killed while writing a run -----------------------------------------------

WRITER = r"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, {src!r})
from sitebench.results import rundirs
stage, root, ready = sys.argv[1:4]
incoming = rundirs.Incoming("local", root)
(incoming.path / "report.json").write_text({report!r})
if stage == "copy":
    (incoming.path / "output").mkdir()
    with open(incoming.path / "output/rfm_job.out", "wb") as out:
        out.write(b"STREAM output, half copied\n" * 1000)
        out.flush()
        Path(ready).write_text(incoming.path.name)
        time.sleep(300)  # killed here, mid-copy
else:
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text("{{}}")

    def stuck(src, dst):
        Path(ready).write_text(incoming.path.name)
        time.sleep(300)  # killed here, inside commit, before its rename

    os.rename = stuck
    incoming.commit()
"""


@pytest.mark.reliability_fault
@pytest.mark.parametrize("stage", ["copy", "commit"])
def test_writer_killed_mid_write_leaves_no_visible_run(results_root, tmp_path, stage):
    earlier = store_run()
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(src=SRC, report=REPORT))
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(script), stage, str(results_root), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, f"the writer exited with {proc.returncode}"
            assert time.monotonic() < deadline, "the writer never got to its stage"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = results_root / "local" / ready.read_text()
    assert left.is_dir() and left.name.startswith(INCOMING)
    # Readers see the earlier run only; the leftover is reported, never read as a run.
    assert visible(results_root) == [earlier.name]
    warnings = []
    assert [r.name for r in load_runs("local", warn=warnings.append)] == [earlier.name]
    assert len(warnings) == 1 and str(left) in warnings[0]
    assert f"its writer (pid {proc.pid}) is gone" in warnings[0]
    assert store.refresh("local") == 1
    con = store.connect(sites=["local"])
    assert con.execute("SELECT list(DISTINCT run) FROM figures").fetchone()[0] == [earlier.name]
    side = compare.Side.parse("local")
    table = compare.compare(side, side)
    assert len(table) and set(table["n_a"]) == {1}
    with pytest.raises(SitebenchError, match="invalid run name"):
        compare.Side.parse(f"local/{left.name}")
    # A writer still at work is not reported.
    busy = Incoming("local")
    assert [p for p, _ in leftovers("local")] == [left]
    assert busy.commit().parent == results_root / "local"


# -- concurrent writers ------------------------------------------------------------------

CONCURRENT = r"""
import json, random, sys, time
from pathlib import Path
sys.path.insert(0, {src!r})
from sitebench.results import rundirs
# Few free names, so that writers of one site in one second clash, and retry.
draw = random.SystemRandom()
rundirs.secrets.token_hex = lambda n: "%03x" % draw.randrange(1024)
site, writer, count, root, go = sys.argv[1:6]
count = int(count)
while not Path(go).exists():
    time.sleep(0.005)
made = {{}}
for i in range(count):
    incoming = rundirs.Incoming(site, root, when=1790000000)  # all in the same second
    marker = f"{{site}}/{{writer}}/{{i}}"
    (incoming.path / "report.json").write_text(json.dumps({{"runs": [], "marker": marker}}))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({{"marker": marker}}))
    made[incoming.commit().name] = marker
print(json.dumps(made))
"""


@pytest.mark.reliability_fault
def test_concurrent_writers_of_two_sites_and_of_one_site(results_root, tmp_path):
    script = tmp_path / "concurrent.py"
    script.write_text(CONCURRENT.format(src=SRC))
    go, count = tmp_path / "go", 12
    writers = [(site, str(w)) for site in ("site-a", "site-b") for w in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), site, w, str(count), str(results_root), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for site, w in writers
    ]
    time.sleep(1.0)  # all started and waiting
    go.touch()
    made = {"site-a": {}, "site-b": {}}
    for (site, _), proc in zip(writers, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        mine = json.loads(out)
        assert not set(mine) & set(made[site]), "two writers got the same run"
        made[site].update(mine)
    for site, runs in made.items():
        assert len(runs) == 3 * count
        assert visible(results_root, site) == sorted(runs)
        warnings = []
        loaded = load_runs(site, warn=warnings.append)
        assert not warnings and not leftovers(site)
        # Each run holds what its own writer wrote: none overwritten, none mixed.
        for run in loaded:
            assert run.report["marker"] == run.provenance["marker"] == runs[run.name]
        assert not list((results_root / site).glob(".*"))


# -- bad benchmark output and bad names (the gaps of test_parsers.py, test_inputs.py) -----


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "name, module, match",
    [
        ("stream-triad-inf.txt", stream, "Triad"),
        ("stream-copy-nan.txt", stream, "Copy"),
        ("hpl-gflops-nan.txt", hpl, "finite"),
        ("hpl-time-inf.txt", hpl, "finite"),
    ],
)
def test_nan_and_inf_in_benchmark_output_are_errors(name, module, match):
    text = (HERE / name).read_text()
    with pytest.raises(ParseError, match=match) as err:
        module.parse(text)
    assert re.search(r"\b(nan|inf)\b", str(err.value))  # the value is quoted


def test_every_reliability_fixture_is_documented():
    readme = (HERE / "README.md").read_text()
    documented = set(re.findall(r"^\| `([\w.-]+\.txt)`", readme, flags=re.M))
    assert documented == {p.name for p in HERE.glob("*.txt")}


BAD_NAMES = ["a b", "tab\tsite", "new\nline", "esc\x1b[31m", "nul\x01", "..", "../etc", "a/b"]


@pytest.mark.reliability_input
@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
@pytest.mark.parametrize(
    "command",
    [
        ("run", "--site", "{name}"),
        ("compare", "{name}", "local"),
        ("compare", "local/{name}", "local"),
        ("references", "{name}"),
        ("regressions", "{name}"),
    ],
    ids=["run", "compare-site", "compare-run", "references", "regressions"],
)
def test_unsafe_site_and_run_names_on_the_command_line(results_root, command, name):
    store_run()
    proc = sitebench(*[a.format(name=name) for a in command])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # ("a/b" as a side is site "a", run "b": a site without runs.)
    assert re.search(
        r"invalid (site|run) name|cannot read the comparison side|'a' has no runs", proc.stderr
    ), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "fix:" in proc.stderr
    # Only the earlier run, nothing written anywhere else.
    assert [p.name for p in results_root.iterdir()] == ["local"]


@pytest.mark.reliability_input
def test_missing_mirror_stops_the_run_saying_what_to_fix(results_root, tmp_path):
    proc = sitebench("run", env={"SITEBENCH_MIRROR": str(tmp_path / "no-mirror")})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"SITEBENCH_MIRROR={tmp_path / 'no-mirror'} does not exist" in proc.stderr
    assert "fix: point SITEBENCH_MIRROR at a Spack source mirror" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results_root.exists() or not any(results_root.rglob("report.json"))


# -- under ReFrame: a failed build, Ctrl-C, a killed benchmark (markers spack, slow) -----


def no_references(tmp_path):
    empty = tmp_path / "no-references.yaml"
    empty.write_text("{}\n")
    return str(empty)


def cases_of(run_dir):
    report = json.loads((run_dir / "report.json").read_text())
    return {c["name"]: c for r in report["runs"] for c in r["testcases"]}


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.reliability_fault
def test_a_failed_spack_build_fails_its_benchmark_only_and_is_recorded(
    results_root, tmp_path, spack
):
    """STREAM's tarball has the wrong checksum in a copy of the mirror; Spack builds into a
    fresh install tree and source cache, so it really fetches: STREAM's build fails with
    Spack's message, HPL is built and run, and the run keeps both."""
    mirror = os.environ.get("SITEBENCH_MIRROR", "").removeprefix("file://")
    if not mirror:
        pytest.skip("SITEBENCH_MIRROR not set: no local mirror to corrupt")
    broken = tmp_path / "mirror"
    shutil.copytree(mirror, broken, symlinks=True)
    (tarball,) = (broken / "_source-cache/archive").rglob("977651ff*.tar.gz")  # stream 5.10
    tarball.unlink()
    tarball.write_bytes(b"not the STREAM sources")
    builtin = spack_packages_checkout()
    proc = sitebench(
        "run",
        # One toolchain: one HPL built from source (a build per toolchain took 160 s).
        "--toolchain",
        toolchains.selected(toolchains.load(Site.resolve("local")))[0].name,
        "--",
        "-n",
        "StreamCheck",
        "-n",
        "HplCheck",
        "-S",
        "HplCheck.n=2048",
        env={
            # Its own install tree, source cache and Spack config: nothing of STREAM cached.
            "SITEBENCH_STATE_DIR": str(tmp_path / "state"),
            "SITEBENCH_SPACK_PACKAGES": str(builtin),
            "SITEBENCH_MIRROR": str(broken),
            "SITEBENCH_REFERENCES": no_references(tmp_path),
            # From source: the machine's binary cache would serve STREAM without its tarball.
            "SITEBENCH_BUILDCACHE": "off",
        },
    )
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    (run,) = run_dirs("local")
    cases = cases_of(run)
    by_check = {}
    for name, case in cases.items():
        by_check.setdefault(name.split()[0], []).append(case)
    (build,) = by_check["StreamBuild"]
    assert build["result"] == "fail" and build["fail_phase"].startswith("compile"), build
    for case in by_check["StreamCheck"]:
        assert case["result"] in ("fail", "fail_deps") and not case.get("perfvalues")
    hpl_cases = [c for c in by_check["HplCheck"] if c["result"] != "skip"]
    assert hpl_cases and all(c["result"] == "pass" for c in hpl_cases), hpl_cases
    assert all(c["perfvalues"] for c in hpl_cases)
    # Spack's own words are kept with the run.
    logs = "".join(p.read_text() for p in case_folder(run, build).glob("rfm_build.*"))
    assert "sha256 checksum failed" in logs, logs[-3000:]
    prov = json.loads((run / "provenance/provenance.json").read_text())
    assert prov["reframe_exit_code"] == 1 and "partial" not in prov
    assert "gflops" in set(figures.frame([load_run(run)])["figure"])


def spack_packages_checkout():
    from sitebench.spack import pinned as spack_mod

    return spack_mod.builtin_repo().parents[2]  # .../repos/spack_repo/builtin -> checkout


def start_run(tmp_path, *reframe_args):
    return subprocess.Popen(
        [sys.executable, "-m", "sitebench", "run", "--", *reframe_args],
        cwd=ROOT,
        env={**os.environ, "SITEBENCH_REFERENCES": no_references(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as under a terminal
    )


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.reliability_fault
def test_ctrl_c_keeps_the_partial_run_marked_partial(results_root, tmp_path, spack):
    earlier = store_run()
    proc = start_run(tmp_path, "-n", "StreamCheck")
    lines, sent = [], False
    try:
        for line in proc.stdout:
            lines.append(line)
            plain = re.sub(r"\x1b\[[0-9;]*m", "", line)  # ReFrame's colours
            # The first measured case is done: Ctrl-C, to the whole process group.
            if not sent and re.search(r"\[\s+(OK|FAIL)\s+\] \(\d+/\d+\) StreamCheck ", plain):
                os.killpg(proc.pid, signal.SIGINT)
                sent = True
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = "".join(lines)
    assert sent, output[-4000:]
    assert proc.returncode == 130, output[-4000:]  # 128 + SIGINT, as a shell reports it
    assert "interrupted (SIGINT); the partial run is stored in" in output
    runs = run_dirs("local")
    # Both runs may be named in the same second: their order is then the random suffix's.
    assert len(runs) == 2 and earlier in runs
    (run,) = [r for r in runs if r != earlier]
    prov = json.loads((run / "provenance/provenance.json").read_text())
    assert prov["partial"] is True and prov["interrupted"] == "SIGINT"
    cases = [c for c in cases_of(run).values() if c["name"].startswith("StreamCheck ")]
    # The first case was measured (ReFrame may mark it aborted: the Ctrl-C came during its
    # cleanup); the one with all threads was cut short or never started.
    measured = [c["name"] for c in cases if c.get("perfvalues")]
    assert measured == ["StreamCheck %scale=quick %threads=1"], [
        (c["name"], c["result"]) for c in cases
    ]
    assert all(c["result"] != "pass" for c in cases if "threads=all" in c["name"])
    # Listed and compared like any run; its figures are those of the case that completed.
    store.refresh("local")  # (the run's summary indexed both already)
    con = store.connect(sites=["local"])
    listed = con.execute("SELECT run FROM runs ORDER BY run").fetchall()
    assert sorted(r for (r,) in listed) == sorted([earlier.name, run.name])
    (provenance,) = con.execute("SELECT provenance FROM runs WHERE run = ?", [run.name]).fetchone()
    assert json.loads(provenance)["partial"] is True
    params = con.execute(
        "SELECT DISTINCT params FROM figures WHERE run = ? AND \"check\" = 'StreamCheck'",
        [run.name],
    ).fetchall()
    assert len(params) == 1
    compared = sitebench("compare", f"local/{earlier.name}", f"local/{run.name}")
    assert compared.returncode == 0, compared.stderr
    assert "StreamCheck" in compared.stdout
    assert not leftovers("local")


def benchmark_pids(name):
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.path.basename(os.readlink(proc / "exe")) == name:
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.reliability_fault
def test_a_benchmark_killed_mid_run_fails_its_case_and_the_run_is_kept(
    results_root, tmp_path, spack
):
    before = set(benchmark_pids("stream_c.exe"))
    killed, done = [], threading.Event()

    def killer():
        while not done.is_set() and not killed:
            for pid in set(benchmark_pids("stream_c.exe")) - before:
                # Mid-run: STREAM at one thread may finish within a second of its start.
                time.sleep(0.05)
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
                break
            time.sleep(0.02)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        proc = start_run(tmp_path, "-n", "StreamCheck.*threads=1$")
        output = proc.communicate(timeout=600)[0]
    finally:
        done.set()
        thread.join()
    assert killed, "STREAM never ran: " + output[-4000:]
    assert proc.returncode == 1, output[-4000:]
    (run,) = run_dirs("local")
    (case,) = [c for c in cases_of(run).values() if c["name"].startswith("StreamCheck ")]
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", case
    assert not any(v[0] for v in (case.get("perfvalues") or {}).values())
    # The failed case's stage is kept in its own folder, as every case's files are.
    assert (case_folder(run, case) / "rfm_job.out").is_file()
    assert "partial" not in json.loads((run / "provenance/provenance.json").read_text())


# -- the suite's size --------------------------------------------------------------------


COLLECT = """
import json, sys
import pytest

class Kinds:
    def pytest_collection_finish(self, session):
        kinds = {}
        for item in session.items:
            for kind in ("reliability_input", "reliability_fault", "reliability"):
                if item.get_closest_marker(kind):
                    kinds.setdefault(kind, []).append(item.nodeid)
        print("KINDS " + json.dumps(kinds))

sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[1]],
                     plugins=[Kinds()]))
"""


def collected():
    """The node ids of each kind of the suite, as pytest collects them (one run)."""
    proc = subprocess.run(
        [sys.executable, "-c", COLLECT, str(ROOT / "tests")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("KINDS ")]
    return json.loads(line[len("KINDS ") :])


def test_the_suite_counts():
    """The issue asks for at least 30 bad inputs and 10 faults; tests/README.md says how
    many there are (each parametrized case counts once)."""
    kinds = collected()
    inputs, faults = kinds["reliability_input"], kinds["reliability_fault"]
    suite = kinds["reliability"]
    assert len(inputs) >= 30 and len(faults) >= 10, (len(inputs), len(faults))
    assert set(inputs) | set(faults) <= set(suite)
    readme = (ROOT / "tests/README.md").read_text()
    stated = re.search(r"at least\s+(\d+)\s+bad-input\s+cases\s+and\s+(\d+)\s+faults", readme)
    assert stated, "tests/README.md does not state the suite's counts"
    assert int(stated[1]) >= 30 and int(stated[2]) >= 10
    assert (len(inputs), len(faults)) >= (int(stated[1]), int(stated[2])), (
        "fewer than tests/README.md says",
        len(inputs),
        len(faults),
    )

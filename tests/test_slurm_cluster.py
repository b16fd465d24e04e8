"""Slurm as the engine: the private cluster started and stopped, the quick suite run
through it with both of ReFrame's Slurm backends, several nodes in network namespaces,
and faults (a node lost mid-job, a job over its time limit).

Needs Debian's slurm-wlm, slurmdbd and munge (and root, for the nodes in namespaces):
where they are missing the tests skip, saying what to install.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, sitebench, unjudged
from test_loop import ALL_CHECKS  # the quick suite's checks, run on the local site there
from sitebench.common.errors import SitebenchError
from sitebench.results.rundirs import case_folder
from sitebench.services.slurm import netns, owners
from sitebench.services.slurm.cluster import LocalCluster, missing_programs, needs_root, read_pid

#: Not Slurm's default 6817: a developer's own cluster may be up.
PORT = 16817


def _skip_reason(nodes):
    if needs_root():
        return f"NOT ROOT: {needs_root()[0]}"
    missing = missing_programs()
    if missing:
        return (
            f"SLURM NOT INSTALLED: missing {', '.join(missing)}; "
            f"apt-get install {' '.join(sorted(set(missing.values())))}"
        )
    if nodes > 1:
        why = netns.unavailable()
        if why:
            return f"NO NODES IN NAMESPACES HERE: {why}"
        if len(os.sched_getaffinity(0)) < nodes:
            return f"{nodes} nodes need {nodes} CPUs; this machine has fewer"
    return None


@pytest.fixture
def start_cluster():
    """start_cluster(nodes) -> a running LocalCluster in a fresh directory, stopped (and
    checked to leave no process behind) at the end of the test."""
    started = []
    # Short path: a unix socket path is at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="sb-slurm."))
    root.chmod(0o755)  # munged wants the directories above its socket searchable

    def start(nodes=1, cpus_per_node=None):
        reason = _skip_reason(nodes)
        if reason:
            pytest.skip(reason)
        cluster = LocalCluster(root / f"n{nodes}")
        started.append(cluster)
        cluster.start(nodes=nodes, port=PORT, cpus_per_node=cpus_per_node, owner=os.getpid())
        return cluster

    yield start
    for cluster in started:
        pids = cluster.daemons()
        cluster.stop()
        left = [label for label, pid in pids.items() if pid and _alive(pid)]
        assert not left, f"still running after stop: {left}"
    shutil.rmtree(root, ignore_errors=True)


def _alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(") ")[1][0] != "Z"


def _processes_using(directory):
    """Processes whose command line names ``directory`` (daemons, job steps)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in cmd and _alive(int(proc.name)):
            found.append(f"{proc.name}: {cmd[:120]}")
    return found


def run_site(cluster, results, env, *reframe_args):
    return sitebench(
        "run",
        "--site",
        "local-slurm",
        "--",
        *reframe_args,
        env={
            **env,
            "SITEBENCH_SLURM_DIR": str(cluster.layout.root),
            "SITEBENCH_RESULTS_DIR": str(results),
        },
    )


def cases_of(run_dir):
    report = json.loads((run_dir / "report.json").read_text())
    return [c for r in report["runs"] for c in r["testcases"] if not c.get("fixture")]


def only_run(results):
    (run,) = sorted((results / "local-slurm").iterdir())
    return run


@pytest.mark.reliability
@pytest.mark.slurm
def test_start_status_stop_leaves_nothing_behind(start_cluster):
    cluster = start_cluster(1)
    lay = cluster.layout
    running = cluster.running()
    assert set(running) == {"munged", "mariadbd", "slurmdbd", "slurmctld", f"slurmd {_host()}"}
    assert cluster.sinfo() == {_host(): "idle"}
    # Keys and secrets are private to the cluster's directory.
    assert lay.munge_key_dir.stat().st_mode & 0o777 == 0o700
    assert lay.munge_key.stat().st_mode & 0o777 == 0o600
    assert lay.slurmdbd_conf.stat().st_mode & 0o777 == 0o600
    # Accounting: sacct answers from slurmdbd, the way ReFrame's slurm backend asks.
    env = cluster.env()
    job = subprocess.run(
        ["sbatch", "--parsable", "-W", "-n", "1", "--wrap", "hostname"],
        capture_output=True,
        text=True,
        env=env,
        cwd=lay.root,
    )
    assert job.returncode == 0, job.stderr
    jobid = job.stdout.strip()
    states = ""
    for _ in range(50):  # the record reaches slurmdbd a moment after the job ends
        states = subprocess.run(
            ["sacct", "-P", "-n", "-j", jobid, "-o", "jobid,state,exitcode,nodelist"],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        if f"{jobid}|COMPLETED|0:0|{_host()}" in states:
            break
        time.sleep(0.2)
    assert f"{jobid}|COMPLETED|0:0|{_host()}" in states, states
    # A second start on a running cluster is refused, saying how to stop it.
    again = sitebench("cluster", "start", "--dir", str(lay.root), "--port", str(PORT))
    assert again.returncode == 2 and "already running" in again.stderr
    assert "./sitebench cluster stop" in again.stderr
    stopped = cluster.stop()
    assert [s.split()[0] for s in stopped] == [
        "slurmd",
        "slurmctld",
        "slurmdbd",
        "mariadbd",
        "munged",
    ]
    assert not any(_alive(pid) for pid in running.values())
    assert not _processes_using(lay.root)
    assert cluster.stop() == []  # stopping a stopped cluster is fine


#: Starts a cluster for this very process (its owner), says so, then waits to be killed.
_OWNER = """
import os, sys
from sitebench.services.slurm.cluster import LocalCluster
LocalCluster(sys.argv[1]).start(port=int(sys.argv[2]), owner=os.getpid())
print("up", flush=True)
sys.stdin.read()
"""


@pytest.mark.reliability_fault
@pytest.mark.slurm
def test_the_cluster_of_a_killed_run_is_stopped_by_the_next_start():
    """A test run killed mid-way (pytest killed, a CI timeout) leaves its cluster's daemons
    on the fixed ports; the next start stops them once their owner is gone, never while it
    lives, and never a cluster started with no owner (`./sitebench cluster start`)."""
    reason = _skip_reason(1)
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="sb-slurm."))  # short: unix socket paths
    root.chmod(0o755)
    dirs = {name: root / name for name in ("killed", "next", "admin", "blocked")}
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(dirs["killed"]), str(PORT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        assert owner.stdout.readline() == "up\n", owner.stderr.read()
        killed = LocalCluster(dirs["killed"])
        daemons = killed.running()
        assert len(daemons) == 5, daemons
        # Its owner alive, the cluster is another run's: the ports are refused, it lives.
        with pytest.raises(SitebenchError, match=f"in use: .*{dirs['killed']}"):
            LocalCluster(dirs["next"]).start(port=PORT, owner=os.getpid())
        assert killed.running() == daemons
        owner.kill()  # the owner only: its daemons live on, as after a killed run
        owner.wait()
        assert killed.running() == daemons
        following = LocalCluster(dirs["next"])
        following.start(port=PORT, owner=os.getpid())
        assert following.sinfo() == {_host(): "idle"}
        assert not any(_alive(pid) for pid in daemons.values())
        assert not _processes_using(dirs["killed"])
        assert _recorded_under(root) == [dirs["next"]]
        following.stop()
        assert _recorded_under(root) == []
        # A cluster with no owner (an admin's, like a system Slurm) is never stopped by a start.
        admin = sitebench("cluster", "start", "--dir", str(dirs["admin"]), "--port", str(PORT))
        assert admin.returncode == 0, admin.stderr
        admin_daemons = LocalCluster(dirs["admin"]).running()
        with pytest.raises(SitebenchError, match="in use"):
            LocalCluster(dirs["blocked"]).start(port=PORT, owner=os.getpid())
        assert LocalCluster(dirs["admin"]).running() == admin_daemons
    finally:
        owner.kill()
        owner.wait()
        for directory in dirs.values():
            LocalCluster(directory).stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not _processes_using(root)


def _recorded_under(root):
    return [owned.root for owned in owners.recorded() if owned.root.is_relative_to(root)]


def _host():
    import socket

    return socket.gethostname().split(".")[0]


@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_quick_suite_through_slurm_with_both_backends(start_cluster, spack, tmp_path):
    cluster = start_cluster(1)
    results = tmp_path / "results"
    # Every check through the backends but PARSEC's and the page-size ones, threaded jobs
    # as STREAM is (68 and 59 s of the suite's 835 s), NPB with two of its kernels (all six
    # took 227 s); test_loop runs them all on the local site. The checks without MPI run
    # through srun only (the mpirun partition has the feature mpi_checks_only).
    proc = run_site(
        cluster,
        results,
        unjudged(spack),
        "-x",
        "NpbCheck.*benchmark=(ft|is|lu|mg)",
        "-x",
        "ParsecCheck",
        "-x",
        "PagesCheck",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run = only_run(results)
    cases = cases_of(run)
    by_partition = {}
    for case in cases:
        by_partition.setdefault(case["partition"], []).append(case)
    assert set(by_partition) == {"srun", "mpirun"}
    for partition, scheduler in (("srun", "slurm"), ("mpirun", "squeue")):
        ran = [c for c in by_partition[partition] if c["result"] != "skip"]
        assert all(c["result"] == "pass" for c in ran), [c["fail_reason"] for c in ran]
        assert all(c["scheduler"] == scheduler and c["jobid"] for c in ran)
        measured = {c["name"].split()[0] for c in ran if c["perfvalues"]}
        # The OSU, Jacobi and ring mappings are written for mpirun; under srun they skip, as
        # the message monitoring does (it needs mpirun's bindings report).
        expected = ALL_CHECKS - {"ParsecCheck", "PagesCheck"}
        if partition == "srun":
            expected -= {"OsuLatencyCheck", "OsuBandwidthCheck"}
            expected -= {"JacobiCheck", "RingCheck", "HplMessagesCheck", "NpbMessagesCheck"}
        else:  # mpi_checks_only: the same node again, the checks without MPI ran in srun
            expected -= {"StreamCheck", "SysbenchCheck"}
            assert not {c["name"].split()[0] for c in by_partition[partition]} & {
                "StreamCheck",
                "SysbenchCheck",
            }
        assert measured == expected, (partition, measured)
        if scheduler == "slurm":  # sacct knows the nodes of every job
            assert all(c["job_nodelist"] == [_host()] for c in ran)
    # The MPI checks went through the partition's launcher.
    scripts = {
        p.parent.parent.parent.name: p.read_text()
        for p in run.glob("output/*/*/*/HplCheck*/rfm_job.sh")
    }
    assert "srun" in scripts["srun"] and "mpirun" in scripts["mpirun"]
    assert "#SBATCH" in scripts["srun"]
    prov = json.loads((run / "provenance/provenance.json").read_text())
    assert prov["scheduler"]["name"] == "slurm"
    # Debian's build says "slurm-wlm 22.05.8", upstream's "slurm 23.11.4".
    assert re.fullmatch(r"slurm(-wlm)? \d+\.\d+\.\d+", prov["scheduler"]["version"])
    assert prov["scheduler"]["nodes"] == {_host(): "idle"}
    assert "ClusterName=sitebench" in (run / "provenance/slurm.conf").read_text()
    assert prov["environment"] == "environments/local"
    # Perflogs name the job and its nodes beside every figure.
    header, line = (run / "perflogs/local-slurm/srun/HplCheck.log").read_text().splitlines()[:2]
    row = dict(zip(header.split("|"), line.split("|")))
    assert row["job_nodelist"] == _host() and row["jobid"].isdigit()


@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_two_nodes_ping_pong_and_npb_across_them(start_cluster, spack, tmp_path):
    cluster = start_cluster(2)
    assert cluster.sinfo() == {"sbnode1": "idle", "sbnode2": "idle"}
    results = tmp_path / "results"
    proc = run_site(
        cluster,
        results,
        unjudged(spack),
        "-n",
        "OsuLatencyCheck.*transport=tcp",
        "-n",
        "NpbCheck.*benchmark=ep",
        "-S",
        "NpbCheck.max_nodes=2",
        "-S",
        "OsuLatencyCheck.max_size=65536",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    cases = {(c["partition"], c["display_name"]): c for c in cases_of(only_run(results))}
    osu = cases[("mpirun", "OsuLatencyCheck %scale=quick %mapping=node %transport=tcp")]
    assert osu["result"] == "pass", osu["fail_reason"]
    assert 0 < osu["perfvalues"]["local-slurm:mpirun:latency_small"][0]
    for partition in ("srun", "mpirun"):
        npb = cases[(partition, "NpbCheck %scale=quick %benchmark=ep %ranks=all")]
        assert npb["result"] == "pass", npb["fail_reason"]
        assert npb["num_tasks"] == 2 and npb["num_tasks_per_node"] == 1
        # Slurm's own record of the job: both nodes. (ReFrame's node list, from sacct
        # while the job starts, once named sbnode1 only.)
        record = next(
            line
            for line in (cluster.layout.log / "jobcomp.txt").read_text().splitlines()
            if line.startswith(f"JobId={npb['jobid']} ")
        )
        assert "NodeList=sbnode[1-2] NodeCnt=2 " in record and "JobState=COMPLETED" in record
    # Two one-core nodes cannot hold the core mapping: it skips, saying why.
    core = cases[("mpirun", "OsuLatencyCheck %scale=quick %mapping=core %transport=tcp")]
    assert core["result"] == "skip"


def _kill_when_running(cluster, node, nodes_wanted, done, killed):
    env = cluster.env()
    while not done.is_set():
        out = subprocess.run(
            ["squeue", "-h", "-t", "R", "-o", "%i %D"], capture_output=True, text=True, env=env
        ).stdout
        if any(line.split()[1] == str(nodes_wanted) for line in out.splitlines()):
            time.sleep(1)
            killed.extend(cluster.kill_node(node, signal.SIGKILL))
            return
        time.sleep(0.3)


@pytest.mark.reliability_fault
@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_a_lost_node_fails_its_check_with_slurms_reason(start_cluster, spack, tmp_path):
    cluster = start_cluster(2)
    results = tmp_path / "results"
    done, killed = threading.Event(), []
    killer = threading.Thread(
        target=_kill_when_running, args=(cluster, "sbnode2", 2, done, killed)
    )
    killer.start()
    try:
        # EP class B on 2 nodes runs for ~10 s here: time to lose a node under it.
        proc = run_site(
            cluster,
            results,
            unjudged(spack),
            "--system",
            "local-slurm:srun",
            "-n",
            "NpbCheck.*benchmark=ep.*ranks=all",
            "-n",
            "StreamCheck.*threads=all",
            "-S",
            "NpbCheck.max_nodes=2",
            "-S",
            "NpbCheck.npb_class=B",
        )
    finally:
        done.set()
        killer.join()
    assert killed, "the 2-node job never ran"
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    run = only_run(results)
    cases = {c["name"].split()[0]: c for c in cases_of(run) if c["result"] != "skip"}
    npb, stream = cases["NpbCheck"], cases["StreamCheck"]
    assert npb["result"] == "fail" and npb["fail_phase"] == "sanity"
    assert "a node of the job failed (Slurm NODE_FAIL)" in npb["fail_reason"]
    assert "sbnode2" in npb["fail_reason"]
    # The other check ran on the node left, and the run keeps both.
    assert stream["result"] == "pass" and stream["job_nodelist"] == ["sbnode1"]
    assert (case_folder(run, npb) / "rfm_job.err").is_file()
    assert cluster.sinfo()["sbnode2"].startswith("down")


@pytest.mark.reliability_fault
@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_a_job_over_its_time_limit_is_reported_as_such(start_cluster, spack, tmp_path):
    cluster = start_cluster(1)
    results = tmp_path / "results"
    # Slurm counts limits in minutes and enforces them every 30 s or so: LU class C on one
    # rank runs for several minutes here.
    proc = run_site(
        cluster,
        results,
        unjudged(spack),
        "--system",
        "local-slurm:mpirun",
        "-n",
        "NpbCheck.*benchmark=lu.*ranks=1$",
        "-S",
        "NpbCheck.npb_class=C",
        "-S",
        "NpbCheck.time_limit=1m",
    )
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    (case,) = [c for c in cases_of(only_run(results)) if c["result"] != "skip"]
    assert case["fail_phase"] == "sanity"
    assert "the job reached its time limit (Slurm TIMEOUT)" in case["fail_reason"]
    assert read_pid(cluster.layout.pid_file("slurmctld"))

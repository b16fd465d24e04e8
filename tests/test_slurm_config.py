"""The private Slurm cluster's plan and configuration files, and the site settings: no
Slurm needed."""

from types import SimpleNamespace

import pytest

from conftest import ROOT
from sitebench.common.errors import SitebenchError
from sitebench.parsers import osu, slurm
from sitebench.run.benchmark import scheduler_verdict
from sitebench.services.slurm.config import Cluster, Layout, plan, slurm_conf, slurmdbd_conf


def conf_lines(text):
    return dict(
        line.split("=", 1)
        for line in text.splitlines()
        if "=" in line and not line.startswith(("#", "NodeName", "PartitionName"))
    )


def test_one_node_is_this_host_on_loopback(tmp_path):
    cluster = plan(1, "vm", [0, 1], 24105, accounting="slurmdbd", db_password="pw")
    (node,) = cluster.nodes
    assert (node.name, node.address, node.cpus, node.netns) == ("vm", "127.0.0.1", 2, "")
    text = slurm_conf(cluster, Layout(tmp_path))
    keys = conf_lines(text)
    assert keys["SlurmctldHost"] == "vm(127.0.0.1)"
    assert keys["TaskPlugin"] == "task/affinity"
    assert keys["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert keys["JobRequeue"] == "0" and keys["MpiDefault"] == "pmix"
    assert keys["DefMemPerCPU"] == str(24105 // 2)
    assert keys["AuthInfo"] == f"socket={tmp_path}/munge-sock/munge.socket.2"
    assert (
        "NodeName=vm NodeAddr=127.0.0.1 NodeHostname=vm CPUs=2 Boards=1 SocketsPerBoard=1 "
        "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 State=UNKNOWN"
    ) in text
    dbd = conf_lines(slurmdbd_conf(cluster, Layout(tmp_path)))
    assert dbd["StoragePass"] == "pw" and dbd["DbdPort"] == str(cluster.port + 2)


def test_nodes_share_out_cpus_and_memory(tmp_path):
    cluster = plan(2, "vm", [0, 1], 24105, subnet="10.213.0.0/24", accounting="none")
    a, b = cluster.nodes
    assert (a.name, a.address, a.host_cpus, a.netns) == (
        "sbnode1",
        "10.213.0.11",
        [0],
        "sitebench-sbnode1",
    )
    assert (b.address, b.host_cpus, b.memory_mb) == ("10.213.0.12", [1], 24105 // 2)
    assert cluster.controller_address == "10.213.0.1" and cluster.subnet == "10.213.0.1/24"
    text = slurm_conf(cluster, Layout(tmp_path))
    keys = conf_lines(text)
    # Nodes are cpusets: Slurm's task/affinity cannot bind inside them (measured).
    assert keys["TaskPlugin"] == "task/none"
    assert keys["AccountingStorageType"] == "accounting_storage/none"
    assert "\nPartitionName=local Nodes=sbnode1,sbnode2 " in text
    assert "NodeName=sbnode2 NodeAddr=10.213.0.12 NodeHostname=sbnode2 CPUs=1 " in text
    # Nodes share /tmp: PMIx's per-job directories go to each node's own TmpFS.
    assert keys["TmpFS"] == f"{tmp_path}/nodes/%n/tmp"
    assert Cluster.from_json(cluster.to_json()) == cluster


def test_nodes_may_declare_more_cpus_than_their_share(tmp_path):
    """--cpus-per-node 2 on a 2-core machine: two nodes of 2 CPUs, one host core each."""
    cluster = plan(2, "vm", [0, 1], 24105, accounting="none", cpus_per_node=2)
    assert [(n.cpus, n.cores_per_socket, n.host_cpus) for n in cluster.nodes] == [
        (2, 2, [0]),
        (2, 2, [1]),
    ]
    text = slurm_conf(cluster, Layout(tmp_path))
    assert "NodeName=sbnode2 NodeAddr=10.213.0.12 NodeHostname=sbnode2 CPUs=2 " in text
    # Slurm takes the declared CPUs, not what slurmd finds in the cpuset.
    assert conf_lines(text)["SlurmdParameters"] == "config_overrides"


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "args, extra, message",
    [
        ((3, "vm", [0, 1], 1000), {}, "3 nodes on 2 CPUs: each node needs a CPU of its own"),
        ((0, "vm", [0, 1], 1000), {}, "0 nodes: a cluster needs at least 1"),
        ((1, "vm", [0, 1], 1000), {"cpus_per_node": 4}, "cpus_per_node is for several nodes"),
        (
            (2, "vm", [0, 1, 2, 3], 1000),
            {"cpus_per_node": 1},
            r"1 CPUs per node is fewer than each node's share of the host \(2\)",
        ),
    ],
)
def test_impossible_plans_say_why(args, extra, message):
    with pytest.raises(ValueError, match=message):
        plan(*args, **extra)


def test_a_small_subnet_is_refused():
    with pytest.raises(ValueError, match="subnet 10.0.0.0/30 is too small for 2 nodes"):
        plan(2, "vm", [0, 1], 1000, subnet="10.0.0.0/30")


def job(state, time_limit=None):
    return SimpleNamespace(
        state=state, jobid="7", nodelist=["sbnode1", "sbnode2"], time_limit=time_limit
    )


def test_slurmstepd_says_why_when_the_backend_cannot():
    """ReFrame's squeue backend sees no finished job: slurmstepd's line is the word."""
    err = (ROOT / "tests/fixtures/slurm/timeout_mpirun_squeue.rfm_job.err").read_text()
    assert scheduler_verdict(job(None), err) == (
        "the job reached its time limit (Slurm TIMEOUT): job 7 on sbnode1, sbnode2"
    )
    assert slurm.cancelled_in(err) == ("TIMEOUT", "1", "vm")
    lost = (
        "slurmstepd-sbnode1: error: *** STEP 1.0 ON sbnode1 CANCELLED AT "
        "2026-11-22T19:13:01 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
    )
    assert slurm.cancelled_in(lost) == ("NODE_FAIL", "1", "sbnode1")
    plain = "slurmstepd-vm: error: *** JOB 9 ON vm CANCELLED AT 2026-11-22T19:24:40 ***"
    assert (
        slurm.verdict("", "9", [], plain) == "the job was cancelled (Slurm CANCELLED): job 9 on vm"
    )
    assert slurm.cancelled_in("srun: error: task 0 launch failed") is None


def test_the_scheduler_verdict_names_state_job_and_nodes():
    assert scheduler_verdict(job("NODE_FAIL")) == (
        "a node of the job failed (Slurm NODE_FAIL): job 7 on sbnode1, sbnode2"
    )
    assert scheduler_verdict(job("TIMEOUT", 60)) == (
        "the job reached its time limit (Slurm TIMEOUT): job 7 on sbnode1, sbnode2; "
        "time limit 60"
    )
    assert scheduler_verdict(job("CANCELLED by 0")).startswith("the job was cancelled")
    # The program's own ending is judged by the check's sanity, not here.
    for state in ("COMPLETED", "FAILED", None, ""):
        assert scheduler_verdict(job(state)) is None


def test_one_core_nodes_count_as_bound_for_the_node_mapping():
    unbound = {
        0: osu.Binding(0, "sbnode1", ()),
        1: osu.Binding(1, "sbnode2", ()),
    }
    assert osu.mapping_problem(unbound, "node", cores_per_node=1) is None
    assert "not bound" in osu.mapping_problem(unbound, "node", cores_per_node=2)
    same_host = {r: osu.Binding(r, "vm", ()) for r in (0, 1)}
    assert "not bound" in osu.mapping_problem(same_host, "core", cores_per_node=1)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "text, message",
    [
        ("environment: nowhere\n", "environment 'nowhere' does not exist"),
        ("environment: [local]\n", "environment is ['local'], expected a str"),
        ("slurm_cluster: yes please\n", "slurm_cluster is 'yes please', expected a bool"),
        ("envirnoment: local\n", "unknown key 'envirnoment'"),
        ("- local\n", "must be a mapping of keys"),
        ("environment: [\n", "is not valid YAML"),
    ],
)
def test_bad_site_settings_are_named(tmp_path, monkeypatch, text, message):
    from sitebench.common import paths
    from sitebench.sites import site_settings

    site = tmp_path / "site-configs" / "bad"
    site.mkdir(parents=True)
    (site / "site.yaml").write_text(text)
    (tmp_path / "environments" / "local").mkdir(parents=True)
    (tmp_path / "environments" / "local" / "spack.yaml").write_text("spack: {}\n")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    with pytest.raises(SitebenchError, match="site-configs/bad/site.yaml") as err:
        site_settings.load("bad")
    assert message in err.value.problem


def test_the_local_slurm_site_builds_like_local():
    from sitebench.sites import site_settings

    assert site_settings.load("local-slurm") == {"environment": "local", "slurm_cluster": True}
    assert site_settings.load("local") == {"environment": "local", "slurm_cluster": False}
    assert (ROOT / "site-configs" / "local-slurm" / "reframe.py").is_file()


# -- the cluster command without a cluster ---------------------------------------------------
@pytest.mark.reliability_input
def test_cluster_env_without_a_cluster_says_so(tmp_path):
    """`cluster env` where nothing runs prints no SLURM_CONF naming a missing file: it says
    no cluster runs there, how to start one and how to use one an admin started."""
    from conftest import sitebench

    proc = sitebench("cluster", "env", "--dir", str(tmp_path / "none"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""  # nothing for `eval $(...)` to export
    assert f"no Slurm cluster is running from {tmp_path / 'none'}" in proc.stderr
    assert "export SITEBENCH_SLURM_DIR=DIR" in proc.stderr and "Traceback" not in proc.stderr
    status = sitebench("cluster", "status", env={"SITEBENCH_SLURM_DIR": str(tmp_path / "none")})
    assert status.returncode == 1
    assert "no cluster running" in status.stdout and "SITEBENCH_SLURM_DIR" in status.stdout


def test_the_unprivileged_hint_says_how_to_use_a_cluster_an_admin_started(monkeypatch):
    from sitebench.services.slurm import cluster

    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    problem, fix = cluster.needs_root()
    assert "ask the admin" in fix and "export SITEBENCH_SLURM_DIR=DIR" in fix
    assert "--site local-slurm" in fix and "cluster env" in fix

"""ReFrame configuration of the site 'local-slurm': this machine through its private Slurm.

Start the cluster first (``./sitebench cluster start [--nodes N]``); this file reads what
was started from ``cluster.json`` in the cluster's directory ($SITEBENCH_SLURM_DIR, default
.sitebench/slurm) and points Slurm's commands at it (SLURM_CONF), so plain
``reframe -C site-configs/local-slurm/reframe.py ...`` works as well as ``./sitebench run``.

Two partitions, the two ways a site runs MPI under Slurm, and both of ReFrame's Slurm
backends: ``srun`` (backend ``slurm``: job states from ``sacct``, i.e. slurmdbd; ranks
launched by ``srun --mpi=pmix``) and ``mpirun`` (backend ``squeue``; Open MPI's mpirun inside
the allocation). The builds and the references are the local site's: same machine, same
Spack environment, figures keyed by CPU microarchitecture.
"""

import copy
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCALES = os.environ.get("SITEBENCH_SCALES", "quick").split(",")
CLUSTER_DIR = os.environ.get("SITEBENCH_SLURM_DIR") or os.path.join(ROOT, ".sitebench", "slurm")


def _load_local():
    spec = importlib.util.spec_from_file_location(
        "sitebench_local_site", os.path.join(ROOT, "site-configs", "local", "reframe.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def _cluster():
    path = os.path.join(CLUSTER_DIR, "cluster.json")
    try:
        with open(path) as fp:
            return json.load(fp)
    except FileNotFoundError:
        raise RuntimeError(
            f"no Slurm cluster was started from {CLUSTER_DIR} ({path} is missing): "
            f"run ./sitebench cluster start first"
        ) from None


_cluster_info = _cluster()
_nodes = _cluster_info["nodes"]
_node = _nodes[0]  # the nodes are alike
# ReFrame runs sbatch, squeue and sacct from this process: they must reach this cluster.
os.environ["SLURM_CONF"] = os.path.join(CLUSTER_DIR, "etc", "slurm.conf")
_multi = len(_nodes) > 1
_subnet = _cluster_info["subnet"]
# Nodes declaring more CPUs than their cpuset holds (cluster start --cpus-per-node): ranks
# share cores, so placement and traffic are a bigger node's but no timing is this machine's.
_shared_cores = _multi and _node["cpus"] > len(_node["host_cpus"])


def _partition(name, scheduler, launcher, descr, features=()):
    return {
        "name": name,
        "descr": descr,
        "scheduler": scheduler,
        "launcher": launcher,
        "access": ["--partition=local"],
        "environs": [e["name"] for e in _envs],
        # One job at a time: concurrent benchmarks would measure each other.
        "max_jobs": 1,
        # The local site's modules (its toolchains.yaml): purge, then the environment's.
        "prepare_cmds": _local["systems"][0]["partitions"][0].get("prepare_cmds", []),
        "features": ["spack", "mpi", "openmp", "slurm", *features]
        + [f"scale_{s.strip()}" for s in SCALES],
        "processor": _processor(),
        "extras": {
            "spack_environment": os.path.join(ROOT, "environments", "local"),
            "references": os.environ.get("SITEBENCH_REFERENCES")
            or os.path.join(ROOT, "site-configs", "local", "references.yaml"),
            # local's references: this machine's, so they apply on the host they came from
            # (the private cluster's nodes are this machine; src/sitebench/sites/host.py).
            "host_references": True,
            "memory_bytes": _node["memory_mb"] * 1024 * 1024,
            "nodes": len(_nodes),
            # TCP between nodes: their private subnet (ReFrame's OSU check reads it).
            "tcp_interfaces": _subnet if _multi else "lo",
            # Host cores under each node's declared CPUs where fewer (0: a core per CPU):
            # every case's figures are then marked disturbed (sitebench/run/benchmark.py).
            "shared_cores": len(_node["host_cpus"]) if _shared_cores else 0,
        },
    }


def _processor():
    """A node's topology: the host's as detected for the local site (one node), or the
    node's share of it (several nodes, each a cpuset of one socket)."""
    try:
        with open(os.path.join(ROOT, "site-configs", "local", "topology.json")) as fp:
            host = json.load(fp)
    except FileNotFoundError:
        raise RuntimeError(
            "site-configs/local/topology.json is missing: run ./sitebench detect first"
        ) from None
    if not _multi:
        return host
    return {
        **{k: host[k] for k in ("arch", "vendor", "model", "platform") if k in host},
        "num_cpus": _node["cpus"],
        "num_cpus_per_core": 1,
        "num_sockets": _node["sockets"],
        "num_cpus_per_socket": _node["cores_per_socket"],
    }


_local = _load_local()
# The local site's Open MPI toolchains: the partitions launch with `srun --mpi=pmix` and
# Open MPI's mpirun. The first of them also runs the checks that use no MPI.
_envs = [copy.deepcopy(e) for e in _local["environments"] if e["extras"]["mpi"] == "openmpi"]
if not _envs:
    raise RuntimeError(
        "the local site has no Open MPI toolchain (site-configs/local/toolchains.yaml): "
        "the private Slurm cluster runs Open MPI (apt-get install openmpi-bin libopenmpi-dev, "
        "then ./sitebench detect --redetect)"
    )
if "no_mpi_checks" not in _envs[0]["features"]:
    _envs[0]["features"].append("no_mpi_checks")
for _env in _envs:
    _env["env_vars"] = _env["env_vars"] + [
        # Open MPI between the nodes' namespaces (or on loopback with one node).
        ["OMPI_MCA_oob_tcp_if_include", _subnet if _multi else "lo"],
        ["OMPI_MCA_btl_tcp_if_include", _subnet if _multi else "lo"],
        ["SLURM_MPI_TYPE", "pmix"],
    ]
    if _shared_cores:
        # More ranks than the node's cpuset has cores: mpirun must bind several to one, and
        # a rank waiting for a message yields its core (it counts the declared CPUs as slots,
        # so it does not see the oversubscription; busy polling made NPB LU.A crawl).
        _env["env_vars"] += [
            ["OMPI_MCA_hwloc_base_binding_policy", "core:overload-allowed"],
            ["OMPI_MCA_mpi_yield_when_idle", "1"],
        ]

# The local site's perflog: its %(check_#ALL)s already holds check_jobid and
# check_job_nodelist, and the report the scheduler of every case.
_logging = copy.deepcopy(_local["logging"])

site_configuration = {
    "systems": [
        {
            "name": "local-slurm",
            "descr": f"this machine through its private Slurm cluster ({len(_nodes)} nodes)",
            "hostnames": [".*"],
            "modules_system": _local["systems"][0]["modules_system"],
            "partitions": [
                _partition("srun", "slurm", "srun", "srun --mpi=pmix; job states from sacct"),
                # The same nodes again: the checks without MPI (STREAM, sysbench) run in srun
                # only, instead of measuring them twice.
                _partition(
                    "mpirun",
                    "squeue",
                    "mpirun",
                    "Open MPI's mpirun in the allocation",
                    features=["mpi_checks_only"],
                ),
            ],
        }
    ],
    "environments": _envs,
    "general": copy.deepcopy(_local["general"]),
    "logging": _logging,
}

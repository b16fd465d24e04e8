"""The configuration files of a private Slurm cluster, as text (no side effects).

One ``Layout`` says where everything of the cluster lives (all under one directory);
one ``Cluster`` says what it is (nodes, addresses, ports, CPUs and memory per node).
``slurm_conf`` and ``slurmdbd_conf`` render Debian's Slurm 22.05 configuration from them,
as measured in ``os-services.md`` of the project notes (single node) and extended to
several nodes in network namespaces.
"""

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Names of nodes in network namespaces: sbnode1, sbnode2, ...
NODE_PREFIX = "sbnode"
#: The private subnet joining the namespaced nodes (a bridge in the host's namespace).
DEFAULT_SUBNET = "10.213.0.0/24"
DEFAULT_PORT = 6817
CLUSTER_NAME = "sitebench"
PARTITION = "local"


@dataclass(frozen=True)
class Layout:
    """Every file of the cluster: keys, sockets, state, logs and pid files, in ``root``."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root).absolute())

    etc = property(lambda s: s.root / "etc")
    munge_key_dir = property(lambda s: s.root / "munge")  # 0700: the key
    munge_socket_dir = property(lambda s: s.root / "munge-sock")  # 0755: munged insists
    munge_socket = property(lambda s: s.munge_socket_dir / "munge.socket.2")
    munge_key = property(lambda s: s.munge_key_dir / "munge.key")
    state = property(lambda s: s.root / "state")
    spool = property(lambda s: s.root / "spool")
    log = property(lambda s: s.root / "log")
    run = property(lambda s: s.root / "run")
    db = property(lambda s: s.root / "mariadb")
    slurm_conf = property(lambda s: s.etc / "slurm.conf")
    slurmdbd_conf = property(lambda s: s.etc / "slurmdbd.conf")
    cluster_file = property(lambda s: s.root / "cluster.json")

    def node_tmp(self, node="%n"):
        """A node's TmpFS (``%n``: Slurm puts in the node's name)."""
        return self.root / "nodes" / node / "tmp"

    def pid_file(self, daemon, node=None):
        return self.run / (f"{daemon}-{node}.pid" if node else f"{daemon}.pid")


@dataclass
class Node:
    name: str
    address: str
    cpus: int
    cores_per_socket: int
    sockets: int
    memory_mb: int
    #: Host CPUs the node may use (its cpuset); empty: all (single node, host namespace).
    host_cpus: list = field(default_factory=list)
    #: Network namespace; empty: the host's own (single node on loopback).
    netns: str = ""


@dataclass
class Cluster:
    nodes: list
    controller_host: str
    controller_address: str
    port: int = DEFAULT_PORT
    subnet: str = ""
    bridge: str = ""
    accounting: str = "slurmdbd"
    db_password: str = ""

    @property
    def ports(self):
        return {"slurmctld": self.port, "slurmd": self.port + 1, "slurmdbd": self.port + 2}

    def to_json(self):
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        data["nodes"] = [Node(**n) for n in data["nodes"]]
        return cls(**data)


def plan(
    num_nodes,
    host,
    host_cpus,
    memory_mb,
    *,
    port=DEFAULT_PORT,
    subnet=DEFAULT_SUBNET,
    accounting="slurmdbd",
    db_password="",
    cpus_per_node=None,
):
    """The cluster to start: 1 node is this host on loopback; N > 1 nodes share out the
    host's CPUs (at least one each, never two nodes on one CPU) and memory, one network
    namespace each on ``subnet``.

    ``cpus_per_node`` (N > 1 only) declares more CPUs a node than its share of the host
    holds: ranks then share cores (timings mean nothing), but Slurm, mpirun and the checks
    place them as on nodes of that size, e.g. two ranks on each of two nodes on a 2-core
    machine, for traffic inside and between nodes in one run."""
    if num_nodes < 1:
        raise ValueError(f"{num_nodes} nodes: a cluster needs at least 1")
    if cpus_per_node is not None and num_nodes == 1:
        raise ValueError(
            "cpus_per_node is for several nodes; one node is this host with all its CPUs"
        )
    cpus = sorted(host_cpus)
    if num_nodes == 1:
        node = Node(host, "127.0.0.1", len(cpus), len(cpus), 1, memory_mb)
        return Cluster(
            [node], host, "127.0.0.1", port, accounting=accounting, db_password=db_password
        )
    if num_nodes > len(cpus):
        raise ValueError(
            f"{num_nodes} nodes on {len(cpus)} CPUs: each node needs a CPU of its own "
            f"(ask for at most {len(cpus)} nodes)"
        )
    net = ipaddress.ip_network(subnet)
    if net.num_addresses < num_nodes + 4:
        raise ValueError(f"subnet {subnet} is too small for {num_nodes} nodes")
    hosts = list(net.hosts())
    per = len(cpus) // num_nodes
    declared = cpus_per_node or per
    if declared < per:
        raise ValueError(
            f"{declared} CPUs per node is fewer than each node's share of the host ({per}): "
            f"ask for at least {per}, or more nodes"
        )
    nodes = [
        Node(
            name=f"{NODE_PREFIX}{i + 1}",
            address=str(hosts[10 + i]),
            cpus=declared,
            cores_per_socket=declared,
            sockets=1,
            memory_mb=memory_mb // num_nodes,
            host_cpus=cpus[i * per : (i + 1) * per],
            netns=f"sitebench-{NODE_PREFIX}{i + 1}",
        )
        for i in range(num_nodes)
    ]
    return Cluster(
        nodes,
        controller_host=host,
        controller_address=str(hosts[0]),
        port=port,
        subnet=f"{hosts[0]}/{net.prefixlen}",
        bridge="sitebench-br0",
        accounting=accounting,
        db_password=db_password,
    )


def slurm_conf(cluster, layout):
    """slurm.conf: select/cons_tres by core and memory, no batch delay, accounting by
    slurmdbd (what ReFrame's ``slurm`` backend reads with sacct) or none."""
    ports = cluster.ports
    lines = [
        f"# Written by `sitebench cluster start`; everything lives in {layout.root}",
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={cluster.controller_host}({cluster.controller_address})",
        f"SlurmctldPort={ports['slurmctld']}",
        f"SlurmdPort={ports['slurmd']}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"StateSaveLocation={layout.state}",
        f"SlurmdSpoolDir={layout.spool}/%n",
        "MailProg=/bin/true",
        f"SlurmctldPidFile={layout.pid_file('slurmctld')}",
        f"SlurmdPidFile={layout.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.log}/slurmctld.log",
        f"SlurmdLogFile={layout.log}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        # One node: srun binds tasks (--cpu-bind) as on a production cluster. Nodes in
        # cpusets: each node's cpuset is its binding; Slurm 22.05's task/affinity fails
        # there ("task_g_set_affinity: Invalid argument" on the second node).
        "TaskPlugin=" + ("task/affinity" if len(cluster.nodes) == 1 else "task/none"),
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # The declared CPUs and memory, not what each slurmd sees of the shared host.
        "SlurmdParameters=config_overrides",
        # Without it, CR_Core_Memory gives each job a whole node's memory.
        f"DefMemPerCPU={min(n.memory_mb // n.cpus for n in cluster.nodes)}",
        "SchedulerType=sched/backfill",
        # The default 3 s delay would add 3 s to every job of a ReFrame run.
        "SchedulerParameters=batch_sched_delay=0",
        # scrontab (Slurm >= 20.11): `sitebench nightly install --via scrontab` makes the
        # nightly run a Slurm job of its own.
        "ScronParameters=enable",
        "MpiDefault=pmix",
        # A node whose slurmd comes back is usable again without scontrol.
        "ReturnToService=2",
        # A job hit by a node failure ends (NODE_FAIL) instead of rerunning: a benchmark
        # run is recorded as it happened.
        "JobRequeue=0",
        # A lost node is declared down after 20 s (default 300 s): faults show quickly.
        "SlurmdTimeout=20",
        "MinJobAge=300",
        "KillWait=5",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={layout.log}/jobcomp.txt",
    ]
    if len(cluster.nodes) > 1:
        # Nodes on one machine share /tmp; Slurm's PMIx keeps per-job directories in the
        # TmpFS of each node, which must differ ("spmix_appdir_...: File exists").
        lines.append(f"TmpFS={layout.node_tmp()}")
    if cluster.accounting == "slurmdbd":
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={cluster.controller_address}",
            f"AccountingStoragePort={ports['slurmdbd']}",
            # Clients talking to slurmdbd take the munge socket from here, not AuthInfo.
            f"AccountingStoragePass={layout.munge_socket}",
        ]
    else:
        lines.append("AccountingStorageType=accounting_storage/none")
    for n in cluster.nodes:
        lines.append(
            f"NodeName={n.name} NodeAddr={n.address} NodeHostname={n.name} CPUs={n.cpus} "
            f"Boards=1 SocketsPerBoard={n.sockets} CoresPerSocket={n.cores_per_socket} "
            f"ThreadsPerCore=1 RealMemory={n.memory_mb} State=UNKNOWN"
        )
    names = ",".join(n.name for n in cluster.nodes)
    lines.append(
        f"PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP "
        f"OverSubscribe=NO"
    )
    return "\n".join(lines) + "\n"


def slurmdbd_conf(cluster, layout):
    """slurmdbd.conf: the private MariaDB through its unix socket (MYSQL_UNIX_PORT)."""
    return (
        "\n".join(
            [
                "# Written by `sitebench cluster start`; mode 0600 (it holds a password)",
                "AuthType=auth/munge",
                f"AuthInfo=socket={layout.munge_socket}",
                "DbdHost=localhost",
                f"DbdAddr={cluster.controller_address}",
                f"DbdPort={cluster.ports['slurmdbd']}",
                "SlurmUser=root",
                f"PidFile={layout.pid_file('slurmdbd')}",
                f"LogFile={layout.log}/slurmdbd.log",
                "StorageType=accounting_storage/mysql",
                "StorageHost=localhost",
                "StorageUser=slurm",
                f"StoragePass={cluster.db_password}",
                "StorageLoc=slurm_acct_db",
            ]
        )
        + "\n"
    )

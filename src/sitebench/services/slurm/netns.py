"""Nodes on one machine: a network namespace, a hostname and a share of the CPUs each.

Each node gets a network namespace joined to a bridge in the host's namespace by a veth
pair (its own address on a private subnet, nothing routed further), its own UTS namespace
(its own hostname, so MPI and Slurm see distinct hosts) and a cpuset cgroup holding its
CPUs (so two nodes never share a core, and hwloc inside a node sees only the node's).
Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the ``ip``, ``nsenter`` and ``unshare``
programs; ``unavailable()`` says why not where they are missing.
"""

import os
import subprocess
from pathlib import Path

from sitebench.services import programs

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: veth name inside every node's namespace (names are per namespace).
NODE_IFACE = "eth0"


def _ip(*args, check=True):
    proc = subprocess.run(programs.resolved(["ip", *args]), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def unavailable():
    """Why nodes in namespaces cannot be made here (a sentence), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    missing = [p for p in ("ip", "nsenter", "unshare") if not programs.which(p)]
    if missing:
        return f"missing programs: {', '.join(missing)} (Debian: iproute2, util-linux)"
    if cpuset_base() is None:
        return f"no cpuset cgroup controller under {CGROUP_ROOT}"
    probe = "sitebench-probe"
    proc = _ip("netns", "add", probe, check=False)
    if proc.returncode != 0:
        return f"cannot create a network namespace: {proc.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def cpuset_base():
    """The cpuset hierarchy: cgroup v1's ``cpuset/`` or the v2 root; None without one."""
    v1 = CGROUP_ROOT / "cpuset"
    if (v1 / "cpuset.cpus").exists():
        return v1
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpuset" in controllers.read_text().split():
        return CGROUP_ROOT
    return None


def cgroup_dir(node):
    return cpuset_base() / f"sitebench-{node.name}"


def make_cpuset(node):
    base = cpuset_base()
    if base == CGROUP_ROOT:  # v2: the controller must be enabled for children
        (base / "cgroup.subtree_control").write_text("+cpuset")
    group = cgroup_dir(node)
    group.mkdir(exist_ok=True)
    (group / "cpuset.cpus").write_text(",".join(map(str, node.host_cpus)))
    mems = base / ("cpuset.mems" if base != CGROUP_ROOT else "cpuset.mems.effective")
    (group / "cpuset.mems").write_text(mems.read_text().strip() or "0")
    return group


def remove_cpuset(node):
    base = cpuset_base()
    if base is None:
        return
    group = base / f"sitebench-{node.name}"
    if group.is_dir():
        try:
            group.rmdir()
        except OSError:
            pass  # still has processes: stop() reports them


def create(cluster):
    """Bridge, namespaces, veth pairs and addresses for every node of ``cluster``."""
    prefix = cluster.subnet.split("/")[1]
    _ip("link", "add", cluster.bridge, "type", "bridge")
    _ip("addr", "add", cluster.subnet, "dev", cluster.bridge)
    _ip("link", "set", cluster.bridge, "up")
    for i, node in enumerate(cluster.nodes, start=1):
        host_end = f"sb-veth{i}"
        _ip("netns", "add", node.netns)
        _ip(
            "link",
            "add",
            host_end,
            "type",
            "veth",
            "peer",
            "name",
            NODE_IFACE,
            "netns",
            node.netns,
        )
        _ip("link", "set", host_end, "master", cluster.bridge)
        _ip("link", "set", host_end, "up")
        _ip("-n", node.netns, "addr", "add", f"{node.address}/{prefix}", "dev", NODE_IFACE)
        _ip("-n", node.netns, "link", "set", NODE_IFACE, "up")
        _ip("-n", node.netns, "link", "set", "lo", "up")
        make_cpuset(node)


def existing(cluster):
    """The bridge and namespaces of ``cluster`` that exist now (another cluster's, or
    left behind)."""
    found = []
    if cluster.bridge and _ip("link", "show", cluster.bridge, check=False).returncode == 0:
        found.append(f"bridge {cluster.bridge}")
    names = _ip("netns", "list", check=False).stdout.split()
    found += [f"namespace {n.netns}" for n in cluster.nodes if n.netns and n.netns in names]
    return found


def pids(node):
    """Processes inside a node's network namespace."""
    proc = _ip("netns", "pids", node.netns, check=False)
    return [int(p) for p in proc.stdout.split()] if proc.returncode == 0 else []


def destroy(cluster):
    """Remove what ``create`` made; missing pieces are fine (a half-made cluster)."""
    for i, node in enumerate(cluster.nodes, start=1):
        _ip("link", "del", f"sb-veth{i}", check=False)
        _ip("netns", "del", node.netns, check=False)
        remove_cpuset(node)
    if cluster.bridge:
        _ip("link", "del", cluster.bridge, check=False)


def node_command(node, argv):
    """``argv`` run as a process of ``node``: in its cpuset, network and UTS namespaces,
    with its hostname. The file system stays shared, as a cluster's is (the checkout, the
    stage directories, /tmp). The cgroup is joined before the namespaces (nsenter, not
    ``ip netns exec``, so /sys and the cgroup tree stay visible to hwloc)."""
    group = cgroup_dir(node)
    inner = f'hostname {node.name} && exec "$@"'
    return [
        "sh",
        "-c",
        f'echo $$ > {group}/cgroup.procs && exec "$@"',
        "sh",
        "nsenter",
        f"--net=/run/netns/{node.netns}",
        "unshare",
        "--uts",
        "sh",
        "-c",
        inner,
        "sh",
        *argv,
    ]

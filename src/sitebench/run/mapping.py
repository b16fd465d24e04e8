"""Where the ranks of an MPI check sit: the ``--map-by`` mappings of the Jacobi and ring checks.

core: consecutive ranks on consecutive cores (a socket filled before the next); socket:
ranks dealt round-robin over the sockets; node: over the nodes. Each rank is bound to a core
and mpirun prints the bindings (``--report-bindings``). A mapping that cannot differ from
``core`` on the partition (one socket, one node) is skipped, saying so.

The MPI is the environ's (``extras['mpi']``, a Spack package name; missing: openmpi). Under
MPICH, hydra's mpirun takes its own options and the transport is chosen through UCX.
"""

MAPPINGS = ("core", "socket", "node")

#: MPIs whose options these are (Spack package names, as in the environ's ``extras['mpi']``).
MPIS = ("openmpi", "mpich")

#: mpirun options per mapping (Open MPI).
MPIRUN_OPTIONS = {
    name: ["--map-by", name, "--bind-to", "core", "--report-bindings"] for name in MAPPINGS
}

#: mpirun options per mapping under MPICH's hydra (measured with MPICH 4.0.2, see
#: tests/fixtures/mpich/README.md). Hydra has no ``-map-by node``: ``-ppn 1`` puts one process
#: per host and goes round the hosts again (4 ranks on 2 hosts: 0, 2 on one, 1, 3 on the
#: other), as Open MPI's ``--map-by node`` does. No ``--report-bindings`` either:
#: HYDRA_TOPO_DEBUG=1 (:func:`transport_env`) prints each process's CPUs on stdout.
MPICH_MPIRUN_OPTIONS = {
    "core": ["-map-by", "core", "-bind-to", "core"],
    "socket": ["-map-by", "socket", "-bind-to", "core"],
    "node": ["-ppn", "1", "-bind-to", "core"],
}


def mpi_of(environ):
    """The environ's MPI (Spack package name): ``extras['mpi']``, openmpi when unset."""
    return environ.extras.get("mpi", "openmpi")


def mpirun_options(mapping, mpi="openmpi"):
    """mpirun options placing the ranks as ``mapping`` says, for ``mpi``'s mpirun."""
    return list((MPICH_MPIRUN_OPTIONS if mpi == "mpich" else MPIRUN_OPTIONS)[mapping])


def nodes_of(partition):
    """Nodes a partition offers: 1 under the local scheduler, else ``extras['nodes']``."""
    if partition.scheduler.registered_name == "local":
        return 1
    return partition.extras.get("nodes") or 0


def skip_reason(partition, mapping, launcher, mpi="openmpi"):
    """Why ``mapping`` cannot run on ``partition`` with ``mpi`` (None when it can)."""
    if mpi not in MPIS:
        return (
            f"the mappings are written for {', '.join(MPIS)}; the environ's MPI is {mpi} "
            f"(add its options to sitebench/run/mapping.py)"
        )
    if launcher not in ("mpirun",):
        return (
            f"the mappings are written for mpirun; {partition.fullname} launches with "
            f"{launcher} (add its options to sitebench/run/mapping.py)"
        )
    proc = partition.processor
    if mapping == "socket" and (proc.num_sockets or 0) < 2:
        return (
            f"mapping socket needs 2 sockets; {partition.fullname} has {proc.num_sockets} "
            f"(it would place the ranks as mapping core does)"
        )
    if mapping == "node" and nodes_of(partition) < 2:
        return (
            f"mapping node needs 2 nodes; {partition.fullname} has "
            f"{nodes_of(partition) or 'no extras[nodes]'}"
        )
    return None


def transport(mapping):
    """The transport carrying the messages: shared memory within a node, TCP across."""
    return "tcp" if mapping == "node" else "shm"


def transport_env(mapping, partition=None, mpi="openmpi"):
    """Environment variables choosing :func:`transport` (as the OSU checks do); across nodes
    TCP uses the partition's ``extras['tcp_interfaces']`` where it names them."""
    if mpi == "mpich":
        return mpich_transport_env(mapping, partition)
    chosen = {
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,tcp" if mapping == "node" else "self,vader",
    }
    interfaces = partition.extras.get("tcp_interfaces") if partition is not None else None
    if mapping == "node" and interfaces:
        chosen["OMPI_MCA_btl_tcp_if_include"] = interfaces
    return chosen


def mpich_transport_env(mapping, partition=None):
    """:func:`transport_env` under MPICH (ch4:ucx). Debian's MPICH 4.0.2 sends even between
    ranks of one host through UCX, so UCX_TLS chooses: ``self,sm`` (UCX's shared-memory
    transports) within a node; ``tcp`` across, with MPIR_CVAR_NOLOCAL=1 so that an MPICH with
    its own shared memory still sends through UCX. HYDRA_TOPO_DEBUG=1 prints the bindings."""
    if mapping != "node":
        return {"HYDRA_TOPO_DEBUG": "1", "UCX_TLS": "self,sm"}
    chosen = {"HYDRA_TOPO_DEBUG": "1", "MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"}
    interfaces = partition.extras.get("tcp_interfaces") if partition is not None else None
    if interfaces:
        chosen["UCX_NET_DEVICES"] = interfaces
    return chosen

"""Where the ranks of an MPI check sit: the ``--map-by`` mappings of the Jacobi and ring checks.

core: consecutive ranks on consecutive cores (a socket filled before the next); socket:
ranks dealt round-robin over the sockets; node: over the nodes. Each rank is bound to a core
and mpirun prints the bindings (``--report-bindings``). A mapping that cannot differ from
``core`` on the partition (one socket, one node) is skipped, saying so.
"""

MAPPINGS = ("core", "socket", "node")

#: mpirun options per mapping (Open MPI).
MPIRUN_OPTIONS = {
    name: ["--map-by", name, "--bind-to", "core", "--report-bindings"] for name in MAPPINGS
}


def nodes_of(partition):
    """Nodes a partition offers: 1 under the local scheduler, else ``extras['nodes']``."""
    if partition.scheduler.registered_name == "local":
        return 1
    return partition.extras.get("nodes") or 0


def skip_reason(partition, mapping, launcher):
    """Why ``mapping`` cannot run on ``partition`` (None when it can)."""
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
    """The Open MPI BTL carrying the messages: shared memory within a node, TCP across."""
    return "tcp" if mapping == "node" else "shm"


def transport_env(mapping, partition=None):
    """Environment variables choosing :func:`transport` (as the OSU checks do); across nodes
    TCP uses the partition's ``extras['tcp_interfaces']`` where it names them."""
    chosen = {
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,tcp" if mapping == "node" else "self,vader",
    }
    interfaces = partition.extras.get("tcp_interfaces") if partition is not None else None
    if mapping == "node" and interfaces:
        chosen["OMPI_MCA_btl_tcp_if_include"] = interfaces
    return chosen

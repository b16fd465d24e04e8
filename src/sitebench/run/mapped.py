"""The ReFrame base of MPI checks whose ranks are placed by a mapping (Jacobi, ring).

Where the ranks sit decides what they measure: :mod:`sitebench.run.mapping` says how each
mapping is launched; this class resolves the rank count on the partition, skips what the
partition cannot place apart (saying why) and sets the job up.
"""

from reframe.core.builtins import parameter, variable

from sitebench.run import mapping as mappings
from sitebench.run.launchers import launcher_name
from sitebench.run.benchmark import SitebenchBenchmark
from sitebench.run.scales import THREAD_LABELS, resolve_threads


class MappedMpiBenchmark(SitebenchBenchmark):
    """Parameters: ``mapping`` (core, socket, node; skipped where the partition cannot place
    the ranks apart), ``ranks`` (labels resolved against the cores of ``max_nodes`` nodes,
    at least 2 nodes for the node mapping). References are indexed by scale, mapping,
    transport and rank count."""

    mapping = parameter(list(mappings.MAPPINGS), loggable=True)
    ranks = parameter(THREAD_LABELS, loggable=True)

    #: Nodes the ranks may span (the node mapping needs at least 2).
    #:
    #: :type: :class:`int`
    max_nodes = variable(int, value=1, loggable=True)

    #: MPI ranks, resolved from ``ranks`` at setup.
    #:
    #: :type: :class:`int`
    num_ranks = variable(int, value=0, loggable=True)

    #: shm (Open MPI's vader; under MPICH, UCX's shared-memory transports) within a node, tcp
    #: across nodes.
    #:
    #: :type: :class:`str`
    transport = variable(str, value="", loggable=True)

    reference_keys = ["scale", "mapping", "transport", "num_ranks"]

    def refused(self, count):
        """Why this check cannot run ``count`` ranks (None: it can); checks override it."""
        return None

    def place_ranks(self):
        """Resolve ``ranks``, skip what cannot run (the mapping, the cores, the check's own
        :meth:`refused`), and launch ``num_ranks`` ranks as ``mapping`` places them."""
        part = self.current_partition
        nodes = max(self.max_nodes, 2 if self.mapping == "node" else 1)
        mpi = mappings.mpi_of(self.current_environ)
        reason = mappings.skip_reason(part, self.mapping, launcher_name(self.job.launcher), mpi)
        self.skip_if(reason is not None, reason)
        count = resolve_threads(self.ranks, self.processor_cores() * nodes)
        self.skip_if(count is None, f"ranks={self.ranks} duplicates or exceeds the cores")
        refused = self.refused(count)
        self.skip_if(refused is not None, f"ranks={self.ranks} ({count}): {refused}")
        self.num_ranks = self.num_tasks = count
        self.num_tasks_per_node = -(-count // nodes) if self.mapping == "node" else count
        self.num_cpus_per_task = 1
        self.transport = mappings.transport(self.mapping)
        self.env_vars = {**mappings.transport_env(self.mapping, part, mpi), **self.env_vars}
        self.job.launcher.options = mappings.mpirun_options(self.mapping, mpi)
        return count

"""sitebench's MPI ring: time per ring step against processes, one series per mapping."""

import os
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    run_after,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, ring  # noqa: E402
from sitebench.run import mapping as mappings  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Timed ring steps per scale (100 warm-up steps before them); 16-byte messages.
STEPS = {"quick": 20000, "full": 200000}


class RingBuild(SpackBuild):
    """The site's mpi_ring (sitebench's own source, built against its MPI)."""

    spack_spec = "mpi-ring"


@rfm.simple_test
class RingCheck(SitebenchBenchmark):
    """mpi_ring: each rank exchanges a message with both ring neighbours per step.

    Parameters: ``scale``, ``mapping`` (core, socket, node; skipped where the partition
    cannot place the ranks apart), ``ranks`` (labels resolved against the cores of
    ``max_nodes`` nodes, 2 for the node mapping).
    Variables: ``message_size`` (B), ``steps`` (0: from the scale), ``max_nodes``.
    Figures: ``time_per_step`` (us, the slowest rank's).
    Sanity: every message arrived with the expected sender, step and direction
    (2 x ranks x steps of them), the rank count is the one asked.
    Fixture: :class:`RingBuild`.
    """

    mapping = parameter(list(mappings.MAPPINGS), loggable=True)
    ranks = parameter(THREAD_LABELS, loggable=True)

    #: Bytes per message.
    #:
    #: :type: :class:`int`
    message_size = variable(int, value=16, loggable=True)

    #: Timed steps; 0: from the scale (:data:`STEPS`).
    #:
    #: :type: :class:`int`
    steps = variable(int, value=0, loggable=True)

    #: Nodes the ranks may span.
    #:
    #: :type: :class:`int`
    max_nodes = variable(int, value=1, loggable=True)

    #: MPI ranks, resolved from ``ranks`` at setup.
    #:
    #: :type: :class:`int`
    num_ranks = variable(int, value=0, loggable=True)

    #: shm within a node, tcp across nodes.
    #:
    #: :type: :class:`str`
    transport = variable(str, value="", loggable=True)

    reference_keys = ["scale", "mapping", "transport", "num_ranks"]
    ring_build = fixture(RingBuild, scope="environment")
    descr = "MPI ring exchange (sitebench's own)"

    @run_after("setup")
    def set_run(self):
        part = self.current_partition
        cores = self.processor_cores()
        nodes = max(self.max_nodes, 2 if self.mapping == "node" else 1)
        reason = mappings.skip_reason(part, self.mapping, self.job.launcher.registered_name)
        self.skip_if(reason is not None, reason)
        count = resolve_threads(self.ranks, cores * nodes)
        self.skip_if(count is None, f"ranks={self.ranks} duplicates or exceeds the cores")
        self.steps = self.steps or STEPS[self.scale]
        self.num_ranks = self.num_tasks = count
        self.num_tasks_per_node = -(-count // nodes) if self.mapping == "node" else count
        self.num_cpus_per_task = 1
        self.transport = mappings.transport(self.mapping)
        self.env_vars = {**mappings.transport_env(self.mapping, part), **self.env_vars}
        self.job.launcher.options = list(mappings.MPIRUN_OPTIONS[self.mapping])
        self.executable = self.binary(self.ring_build, "bin/mpi_ring")
        self.executable_opts = ["-s", str(self.message_size), "-n", str(self.steps)]

    def result(self):
        return ring.parse(self.stdout_text())

    @sanity_function
    def every_message_arrived(self):
        try:
            found = self.result()
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        problems = []
        if not found.passed:
            problems.append(
                f"{found.received} messages arrived intact of {found.expected} expected"
            )
        if found.ranks != self.num_ranks:
            problems.append(f"ran {found.ranks} ranks, asked {self.num_ranks}")
        return sn.assert_true(not problems, msg="; ".join(problems))

    @performance_function("us")
    def time_per_step(self):
        return self.result().time_per_step_us

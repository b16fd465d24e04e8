"""sitebench's MPI ring: time per ring step against processes, one series per mapping."""

import os
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    performance_function,
    run_after,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, ring  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.mapped import MappedMpiBenchmark  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Timed ring steps per scale (100 warm-up steps before them); 16-byte messages.
STEPS = {"quick": 20000, "full": 200000}


class RingBuild(SpackBuild):
    """The site's mpi_ring (sitebench's own source, built against its MPI)."""

    spack_spec = "mpi-ring"


@rfm.simple_test
class RingCheck(MappedMpiBenchmark):
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

    #: Bytes per message.
    #:
    #: :type: :class:`int`
    message_size = variable(int, value=16, loggable=True)

    #: Timed steps; 0: from the scale (:data:`STEPS`).
    #:
    #: :type: :class:`int`
    steps = variable(int, value=0, loggable=True)

    ring_build = fixture(RingBuild, scope="environment")
    descr = "MPI ring exchange (sitebench's own)"

    @run_after("setup")
    def set_run(self):
        self.place_ranks()
        self.steps = self.steps or STEPS[self.scale]
        self.executable = self.binary(self.ring_build, "bin/mpi_ring")
        self.executable_opts = ["-s", str(self.message_size), "-n", str(self.steps)]

    def expected_work_s(self):
        return work_estimates.ring(self.num_ranks, self.steps, self.message_size)

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

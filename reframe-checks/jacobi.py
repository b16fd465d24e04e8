"""sitebench's 3D Jacobi solver: MLUP/s and time per iteration by rank count and mapping.

The performance model set beside it (src/sitebench/results/jacobi_model.py, derivation in
reframe-checks/README.md): T_c = C/B + k*lambda from the site's own OSU ping-pong figures,
MLUP/s est = U / (U / (N * P1 * 1e6) + T_c) / 1e6 with P1 the 1-rank rate of the same grid.
"""

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

from sitebench.parsers import ParseError, jacobi  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.mapped import MappedMpiBenchmark  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Grid edge and timed iterations per scale. quick: 120^3 (two arrays of 27 MB, beyond the
#: caches), 200 iterations, 0.3 s per case here. full: the largest edge among FULL_EDGES whose
#: two arrays fit in a quarter of a node's memory. Edges divisible by 2, 3, 4, 5, 6, 8, 10,
#: 12, 15, 16 so the usual rank counts decompose.
QUICK = (120, 200)
FULL_EDGES = (960, 720, 480, 240)
FULL_ITERATIONS = 100


class JacobiBuild(SpackBuild):
    """The site's jacobi3d (sitebench's own source, built against its MPI)."""

    spack_spec = "jacobi3d"


@rfm.simple_test
class JacobiCheck(MappedMpiBenchmark):
    """jacobi3d on ``num_ranks`` ranks of a fixed grid (strong scaling), mapped as asked.

    Parameters: ``scale``, ``mapping`` (core, socket, node: :mod:`sitebench.run.mapping`;
    skipped where the partition cannot place them apart), ``ranks`` (labels resolved
    against the cores of ``max_nodes`` nodes; counts the decomposition cannot take are
    skipped, saying why).
    Variables: ``edge``, ``iterations`` (0: from the scale), ``max_nodes``.
    Figures: ``mlups`` (MLUP/s), ``time_per_iteration`` (s), ``neighbours`` (k),
    ``halo_mb`` (C, MB sent per process per iteration).
    Sanity: every grid point equals the known solution u* + mu^n e (header of jacobi3d.c),
    the rank count and grid are the ones asked.
    Fixture: :class:`JacobiBuild`.
    """

    #: Grid edge (points per dimension); 0: from the scale.
    #:
    #: :type: :class:`int`
    edge = variable(int, value=0, loggable=True)

    #: Timed iterations; 0: from the scale.
    #:
    #: :type: :class:`int`
    iterations = variable(int, value=0, loggable=True)

    jacobi_build = fixture(JacobiBuild, scope="environment")
    descr = "3D Jacobi with MPI halo exchange (sitebench's own)"

    def refused(self, count):
        if not self.edge:
            self.edge = QUICK[0] if self.scale == "quick" else self.full_edge()
        return jacobi.refused_ranks(count, self.edge)

    @run_after("setup")
    def set_run(self):
        self.place_ranks()
        self.iterations = self.iterations or (
            QUICK[1] if self.scale == "quick" else FULL_ITERATIONS
        )
        self.executable = self.binary(self.jacobi_build, "bin/jacobi3d")
        self.executable_opts = ["-n"] + [str(self.edge)] * 3 + ["-i", str(self.iterations)]

    def full_edge(self):
        memory = self.current_partition.extras.get("memory_bytes")
        if not memory:
            raise ValueError(
                f"partition {self.current_partition.fullname} has no extras['memory_bytes'] "
                f"to size the full Jacobi grid from; set it or pass -S edge=<points>"
            )
        for edge in FULL_EDGES:
            if 2 * 8 * (edge + 2) ** 3 <= memory / 4:
                return edge
        return FULL_EDGES[-1]

    def expected_work_s(self):
        return work_estimates.jacobi(self.edge, self.iterations)

    def stderr_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
            return fp.read()

    def result(self):
        return jacobi.parse(self.stdout_text(), self.stderr_text())

    @sanity_function
    def solved(self):
        try:
            found = self.result()
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        problems = []
        if not found.passed:
            problems.append(f"jacobi3d's known-solution check failed: {found.check[1]}")
        if found.ranks != self.num_ranks or found.grid != (self.edge,) * 3:
            problems.append(
                f"ran {found.ranks} ranks on {found.grid}, asked {self.num_ranks} on "
                f"{(self.edge,) * 3}"
            )
        return sn.assert_true(not problems, msg="; ".join(problems))

    @performance_function("MLUP/s")
    def mlups(self):
        return self.result().mlups

    @performance_function("s")
    def time_per_iteration(self):
        return self.result().time_per_iteration

    @performance_function("count")
    def neighbours(self):
        return self.result().neighbours

    @performance_function("MB")
    def halo_mb(self):
        return self.result().halo_mb

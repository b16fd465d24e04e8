"""HPL: Gflop/s of the site's Spack-built HPL, one MPI rank per core."""

import math
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
    run_before,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, hpl  # noqa: E402
from sitebench.rfm.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.rfm.spack_build import SpackBuild  # noqa: E402

HPL_DAT = """HPLinpack benchmark input file
Written by sitebench for {n} x {n}, NB={nb}, {p} x {q} ranks
HPL.out      output file name (if any)
6            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
"""


def problem_size(memory_bytes, fraction, nb, cap=None):
    """Largest N, a multiple of NB, whose matrix fills ``fraction`` of memory."""
    n = int(math.sqrt(fraction * memory_bytes / 8))
    if cap:
        n = min(n, cap)
    return max(nb, n // nb * nb)


def process_grid(ranks):
    """P x Q = ranks with P <= Q and P as close to sqrt(ranks) as possible."""
    p = max(d for d in range(1, int(math.isqrt(ranks)) + 1) if ranks % d == 0)
    return p, ranks // p


class HplBuild(SpackBuild):
    """The site's HPL (BLAS, optimisation and SIMD flags chosen by its environment)."""

    spack_spec = "hpl"


@rfm.simple_test
class HplCheck(SitebenchBenchmark):
    """HPL on all cores of a node, one rank per core and one BLAS thread per rank.

    Parameters: ``scale``. Variables: ``n`` (0: from memory), ``nb``,
    ``memory_fraction``, ``quick_max_n``.
    Figures: ``gflops`` (Gflop/s of the best test).
    Sanity: every residual check PASSED, none failed or skipped.
    Fixture: :class:`HplBuild`.
    """

    #: Matrix order; 0 derives it from memory (the ~80 % rule).
    #:
    #: :type: :class:`int`
    n = variable(int, value=0, loggable=True)

    #: Block size.
    #:
    #: :type: :class:`int`
    nb = variable(int, value=192, loggable=True)

    #: Share of the node's memory the matrix may take.
    #:
    #: :type: :class:`float`
    memory_fraction = variable(float, value=0.8)

    #: Upper bound of N at the quick scale (about 6 s at 100 Gflop/s).
    #:
    #: :type: :class:`int`
    quick_max_n = variable(int, value=10000)

    #: Process grid, derived from the rank count.
    p = variable(int, value=0, loggable=True)
    q = variable(int, value=0, loggable=True)

    hpl_build = fixture(HplBuild, scope="environment")
    descr = "HPL (Spack-built)"

    @run_after("setup")
    def size_problem(self):
        self.num_tasks = self.processor_cores()
        self.num_tasks_per_node = self.num_tasks
        self.num_cpus_per_task = 1
        self.env_vars = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        self.p, self.q = process_grid(self.num_tasks)
        if not self.n:
            memory = self.current_partition.extras.get("memory_bytes")
            if not memory:
                raise ValueError(
                    f"partition {self.current_partition.fullname} has no "
                    f"extras['memory_bytes'] to size HPL from; set it or pass -S n=<N>"
                )
            cap = self.quick_max_n if self.scale == "quick" else None
            self.n = problem_size(memory, self.memory_fraction, self.nb, cap)
        self.executable = self.binary(self.hpl_build, "bin/xhpl")

    @run_before("run")
    def write_input(self):
        with open(os.path.join(self.stagedir, "HPL.dat"), "w") as fp:
            fp.write(HPL_DAT.format(n=self.n, nb=self.nb, p=self.p, q=self.q))

    def result(self):
        return hpl.parse(self.stdout_text())

    @sanity_function
    def residuals_passed(self):
        try:
            parsed = self.result()
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        return sn.assert_true(
            parsed.all_passed,
            msg=f"HPL residual checks: {parsed.passed} passed, {parsed.failed} failed, "
                f"{parsed.skipped} skipped",
        )

    @performance_function("Gflop/s")
    def gflops(self):
        return self.result().best_gflops

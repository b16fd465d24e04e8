"""HPL: Gflop/s of the site's Spack-built HPL, one MPI rank per core."""

import os
import sys
from pathlib import Path

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

from sitebench.common.errors import SitebenchError  # noqa: E402
from sitebench.parsers import ParseError, hpl  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.monitoring import MessageMonitoring  # noqa: E402
from sitebench.run.hpl_input import hpl_dat, problem_size, process_grid  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402
from sitebench.sites import hpl_settings  # noqa: E402


class HplBuild(SpackBuild):
    """The site's HPL (BLAS, optimisation and SIMD flags chosen by its environment)."""

    spack_spec = "hpl"


@rfm.simple_test
class HplCheck(SitebenchBenchmark, MessageMonitoring):
    """HPL on all cores of a node, one rank per core and one BLAS thread per rank.

    Parameters: ``scale``. Variables: ``n`` (0: from memory), ``nb`` (0: the site's),
    ``memory_fraction``, ``quick_max_n``, ``max_nodes``.
    Input: the site's ``site-configs/<site>/hpl.yaml`` (``./sitebench tune hpl`` writes it;
    a partition's ``extras['hpl_settings']`` may name another file): NB, P x Q and every
    other HPL.dat line; HPL's recommended values where the site has none.
    Figures: ``gflops`` (Gflop/s of the best test); ``gflops_per_watt`` where the
    partition reads power.
    Sanity: every residual check PASSED, none failed or skipped.
    Fixture: :class:`HplBuild`.
    ``monitor_messages`` (False): run under Open MPI's monitoring and log the message
    distribution by channel (sitebench/run/monitoring.py); :class:`HplMessagesCheck` does.
    """

    #: Matrix order; 0 derives it from memory (the ~80 % rule).
    #:
    #: :type: :class:`int`
    n = variable(int, value=0, loggable=True)

    #: Block size; 0 takes the site's tuned NB (hpl.yaml), else HPL's recommended 192.
    #:
    #: :type: :class:`int`
    nb = variable(int, value=0, loggable=True)

    #: Share of the node's memory the matrix may take.
    #:
    #: :type: :class:`float`
    memory_fraction = variable(float, value=0.8)

    #: Upper bound of N at the quick scale (about 6 s at 100 Gflop/s).
    #:
    #: :type: :class:`int`
    quick_max_n = variable(int, value=10000)

    #: Nodes HPL runs on, every core of each (a Slurm partition; the local scheduler runs
    #: on one machine). The matrix is sized from their memory together; the site's tuned
    #: grid is for one node, so a grid for the larger rank count is derived.
    #:
    #: :type: :class:`int`
    max_nodes = variable(int, value=1, loggable=True)

    #: Process grid: the site's tuned grid (hpl.yaml), else derived from the rank count.
    p = variable(int, value=0, loggable=True)
    q = variable(int, value=0, loggable=True)

    #: The site's HPL settings file that was read ("" where the site has none).
    hpl_settings_file = variable(str, value="", loggable=True)

    problem_keys = ["n", "nb", "p", "q"]

    energy_figures = {"gflops": "Gflop/s/W"}
    hpl_build = fixture(HplBuild, scope="environment")
    descr = "HPL (Spack-built)"

    @run_after("setup")
    def size_problem(self):
        if self.max_nodes < 1:
            raise ValueError(f"max_nodes={self.max_nodes}: it must be at least 1")
        if self.max_nodes > 1 and self.current_partition.scheduler.registered_name == "local":
            raise ValueError(
                f"max_nodes={self.max_nodes} on partition {self.current_partition.fullname}, "
                f"whose local scheduler runs on one machine: use max_nodes=1"
            )
        self.num_tasks_per_node = self.processor_cores()
        self.num_tasks = self.num_tasks_per_node * self.max_nodes
        self.num_cpus_per_task = 1
        self.env_vars = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        settings = self.site_hpl_settings()
        if not self.nb:
            self.nb = settings["nb"]
        if not (self.p and self.q):
            self.p, self.q = settings.get("p", 0), settings.get("q", 0)
            if not self.p or self.max_nodes > 1:
                self.p, self.q = process_grid(self.num_tasks)
        if self.p * self.q != self.num_tasks:
            raise ValueError(
                f"HPL grid {self.p} x {self.q} is not the {self.num_tasks} ranks of "
                f"{self.current_partition.fullname} ({self.hpl_settings_file or '-S p, q'}): "
                f"rerun ./sitebench tune hpl, or remove p and q from the file"
            )
        if not self.n:
            memory = self.current_partition.extras.get("memory_bytes")
            if not memory:
                raise ValueError(
                    f"partition {self.current_partition.fullname} has no "
                    f"extras['memory_bytes'] to size HPL from; set it or pass -S n=<N>"
                )
            cap = self.quick_max_n if self.scale == "quick" else None
            self.n = problem_size(memory * self.max_nodes, self.memory_fraction, self.nb, cap)
        self.executable = self.binary(self.hpl_build, "bin/xhpl")

    def site_hpl_settings(self):
        """The site's HPL settings (sitebench/sites/hpl_settings.py), read once per test."""
        if not hasattr(self, "_hpl_settings"):
            given = self.current_partition.extras.get("hpl_settings")
            path = Path(given) if given else hpl_settings.path_of(self.current_system.name)
            if path.is_file():
                self.hpl_settings_file = str(path)
            try:
                self._hpl_settings = hpl_settings.load(path)
            except SitebenchError as err:
                raise ValueError(str(err)) from None
        return self._hpl_settings

    @run_before("run")
    def write_input(self):
        with open(os.path.join(self.stagedir, "HPL.dat"), "w") as fp:
            fp.write(hpl_dat(self.n, self.nb, self.p, self.q, self.site_hpl_settings()))

    def expected_work_s(self):
        return work_estimates.hpl(self.n)

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


@rfm.simple_test
class HplMessagesCheck(HplCheck):
    """The multi-core study's message distribution of HPL: the quick suite's one monitored
    case, apart from the timed :class:`HplCheck` (same input). Figures: ``gflops`` (under
    monitoring) and the distribution by channel (sitebench/run/channels.py). Skipped,
    saying why, under MPICH.
    """

    scale = parameter(["quick"], loggable=True)
    monitor_messages = True
    descr = "HPL under Open MPI's message monitoring"

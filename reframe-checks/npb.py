"""NPB-MPI: Mop/s of CG, EP, FT, IS, LU and MG from one rank to all cores."""

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

from sitebench.parsers import ParseError, npb  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.monitoring import MessageMonitoring  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: NPB problem class per scale. quick: class A, whose 12 cases on 2 cores (1 and
#: 2 ranks) took 34 s of wall time on a quiet machine, LU 21 s of it (fixture README).
#: full: class C, whose resident memory summed over 2 ranks was FT 5.0 GiB,
#: MG 3.4 GiB, IS 1.5 GiB, CG 1.0 GiB, LU 0.7 GiB (tests/fixtures/npb/README.md).
CLASS_BY_SCALE = {"quick": "A", "full": "C"}


class NpbBuild(SpackBuild):
    """The site's NPB-MPI (``bin/<name>.<CLASS>.x``; the process count is chosen at run time)."""

    spack_spec = "npb"


@rfm.simple_test
class NpbCheck(SitebenchBenchmark, MessageMonitoring):
    """One NPB-MPI benchmark on ``num_ranks`` MPI ranks, one rank per core.

    Parameters: ``scale`` (the class, :data:`CLASS_BY_SCALE`), ``benchmark``
    (cg, ep, ft, is, lu, mg), ``ranks`` (label resolved against the cores of
    ``max_nodes`` nodes; counts the benchmark cannot take are skipped, saying why).
    Variables: ``npb_class`` (empty: from the scale), ``max_nodes``.
    Figures: ``mops_total``, ``mops_per_process`` (Mop/s), ``time`` (s).
    Sanity: "Verification = SUCCESSFUL"; the benchmark, class, total and
    active process counts NPB reports are the requested ones.
    Fixture: :class:`NpbBuild`.
    ``monitor_messages`` (False): run under Open MPI's monitoring and log the message
    distribution by channel (sitebench/run/monitoring.py); :class:`NpbMessagesCheck` does.
    """

    benchmark = parameter(npb.BENCHMARKS, loggable=True)
    ranks = parameter(THREAD_LABELS, loggable=True)

    #: NPB problem class (S, W, A, B, C, ...); empty takes it from the scale
    #: (:data:`CLASS_BY_SCALE`). The site's ``npb`` must have built it.
    #:
    #: :type: :class:`str`
    npb_class = variable(str, value="", loggable=True)

    #: Nodes the ranks may span: labels resolve against ``max_nodes`` x the
    #: cores of a node, filled one rank per core, node after node. 1 on the
    #: local scheduler (one machine); on a Slurm partition ``-S max_nodes=4``
    #: runs 'all' on 4 nodes.
    #:
    #: :type: :class:`int`
    max_nodes = variable(int, value=1, loggable=True)

    #: MPI ranks, resolved from ``ranks`` at setup.
    #:
    #: :type: :class:`int`
    num_ranks = variable(int, value=0, loggable=True)

    reference_keys = ["scale", "benchmark", "npb_class", "num_ranks"]
    problem_keys = ["npb_class"]
    energy_figures = {"mops_total": "Mop/s/W"}
    npb_build = fixture(NpbBuild, scope="environment")
    descr = "NPB-MPI (Spack-built)"

    @run_after("setup")
    def set_ranks(self):
        if not self.npb_class:
            self.npb_class = CLASS_BY_SCALE[self.scale]
        if self.npb_class not in npb.CLASSES:
            raise ValueError(
                f"npb_class={self.npb_class!r} is not an NPB class; use one of "
                f"{', '.join(npb.CLASSES)}"
            )
        if self.max_nodes < 1:
            raise ValueError(f"max_nodes={self.max_nodes}: it must be at least 1")
        if self.max_nodes > 1 and self.current_partition.scheduler.registered_name == "local":
            raise ValueError(
                f"max_nodes={self.max_nodes} on partition {self.current_partition.fullname}, "
                f"whose local scheduler runs on one machine: use max_nodes=1"
            )
        cores = self.processor_cores()
        count = resolve_threads(self.ranks, cores * self.max_nodes)
        self.skip_if(
            count is None, f"ranks={self.ranks} duplicates or exceeds the cores of the nodes"
        )
        refused = npb.refused_processes(self.benchmark, self.npb_class, count)
        self.skip_if(refused is not None, f"ranks={self.ranks} ({count}): {refused}")
        self.num_ranks = count
        self.num_tasks = count
        self.num_tasks_per_node = min(count, cores)
        self.num_cpus_per_task = 1
        # Added to, not replaced: `-S env_vars=NAME:value` still reaches the ranks.
        self.env_vars = {**self.env_vars, "OMP_NUM_THREADS": "1"}
        relpath = f"bin/{self.benchmark}.{self.npb_class}.x"
        self.executable = self.binary(self.npb_build, relpath)
        if not os.path.isfile(self.executable):
            raise ValueError(
                f"the site's npb has no {relpath} ({self.executable}): add class "
                f"{self.npb_class} and {self.benchmark} to the npb spec's classes= and names= "
                f"in the site's environments/<site>/spack.yaml"
            )

    def expected_work_s(self):
        return work_estimates.npb(self.benchmark, self.npb_class)

    def result(self):
        return npb.parse(self.stdout_text())

    @sanity_function
    def verified(self):
        try:
            parsed = self.result()
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        found = npb.problems(parsed, self.benchmark, self.npb_class, self.num_ranks)
        return sn.assert_true(not found, msg="; ".join(found))

    @performance_function("Mop/s")
    def mops_total(self):
        return self.result().mops_total

    @performance_function("Mop/s")
    def mops_per_process(self):
        return self.result().mops_per_process

    @performance_function("s")
    def time(self):
        return self.result().time_s


@rfm.simple_test
class NpbMessagesCheck(NpbCheck):
    """The multi-core study's message distribution of every NPB kernel: the quick suite's
    one monitored case per benchmark (all cores), apart from the timed :class:`NpbCheck`.

    Figures: NPB's own (under monitoring: its cost beside NpbCheck's at the same ranks)
    and, per channel (self, socket, node, network), the application's and Open MPI's
    internal messages and bytes, the shares and the counts by size
    (sitebench/run/channels.py). Skipped, saying why, under MPICH.
    """

    scale = parameter(["quick"], loggable=True)
    ranks = parameter(["all"], loggable=True)
    monitor_messages = True
    descr = "NPB-MPI under Open MPI's message monitoring"

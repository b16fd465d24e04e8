"""Page size: NPB and sitebench's memory-access kernel with small (4 KiB) and large (2 MiB)
pages, each run proving from the kernel's own counters which pages it got.

How the large pages are obtained (transparent huge pages, THP):

* memaccess asks for them itself: ``madvise(MADV_HUGEPAGE)`` on its 2 MiB-aligned buffer
  (``MADV_NOHUGEPAGE`` for small pages), and prints the AnonHugePages its buffer gained from
  its own ``/proc/self/smaps_rollup``.
* NPB (gfortran, allocatable arrays) gets them through glibc's malloc:
  ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` makes malloc ``madvise(MADV_HUGEPAGE)`` the
  memory it maps (glibc 2.35 or later). Small pages: ``glibc.malloc.hugetlb=0``. Each NPB rank
  runs under ``pagewatch``, which samples the rank's ``/proc/<pid>/smaps_rollup`` every
  20 ms and prints its peak AnonHugePages and Rss.

Both need THP ``enabled`` to be ``madvise`` or ``always`` (``/sys/kernel/mm/
transparent_hugepage/enabled``); with ``never`` or no THP the large-page cases skip, saying
so, unless the partition says it has large pages (``extras['large_pages']: True``), where
they fail. With ``always``, small pages cannot be forced on NPB and its small-page cases
fail, saying so.
"""

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

from sitebench.parsers import ParseError, npb, pages  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.hugepages import large_pages_unavailable  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402


#: NPB class and memaccess (buffer MiB, random loads, streaming passes) per scale. quick:
#: class A on one rank, a 512 MiB buffer (85 x the 6 MiB a 1536-entry TLB reaches with
#: 4 KiB pages). full: class C, a 4 GiB buffer.
NPB_CLASS = {"quick": "A", "full": "C"}
MEMACCESS = {"quick": (512, 4000000, 10), "full": (4096, 40000000, 10)}

BENCHMARKS = ("cg", "ft", "is", "mg", "memaccess")


class PagesNpbBuild(SpackBuild):
    """The site's NPB-MPI (the same root as NpbCheck's)."""

    spack_spec = "npb"


class MemaccessBuild(SpackBuild):
    """The site's memaccess and pagewatch (sitebench's own source)."""

    spack_spec = "memaccess"


@rfm.simple_test
class PagesCheck(SitebenchBenchmark):
    """One benchmark with small or large pages, the page size proven from the process.

    Parameters: ``scale``, ``benchmark`` (cg, ft, is, mg: NPB-MPI on ``num_ranks`` ranks;
    memaccess: the kernel), ``pages`` (small: 4 KiB, large: 2 MiB transparent huge pages).
    Variables: ``num_ranks`` (NPB ranks, 1), ``npb_class`` (empty: from the scale),
    ``buffer_mib`` (0: from the scale).
    Figures: NPB ``mops_total`` (Mop/s), ``time`` (s); memaccess ``stream_bandwidth``
    (MB/s), ``random_latency`` (ns per dependent load); both ``huge_kb`` (kB in huge pages).
    Sanity: the benchmark's own verification; the pages the kernel gave are the ones asked
    (large: at least half of each rank's peak Rss in huge pages; small: none), else it fails
    saying what the counters showed.
    Fixtures: :class:`PagesNpbBuild`, :class:`MemaccessBuild`.
    """

    uses_mpi = False

    benchmark = parameter(BENCHMARKS, loggable=True)
    pages = parameter(list(pages.PAGE_SIZES), loggable=True)

    #: MPI ranks of the NPB runs.
    #:
    #: :type: :class:`int`
    num_ranks = variable(int, value=1, loggable=True)

    #: NPB class; empty: from the scale (:data:`NPB_CLASS`).
    #:
    #: :type: :class:`str`
    npb_class = variable(str, value="", loggable=True)

    #: memaccess buffer (MiB); 0: from the scale (:data:`MEMACCESS`).
    #:
    #: :type: :class:`int`
    buffer_mib = variable(int, value=0, loggable=True)

    #: The page size in bytes (4096 or 2097152), for plots.
    #:
    #: :type: :class:`int`
    page_bytes = variable(int, value=0, loggable=True)

    reference_keys = ["scale", "benchmark", "pages"]
    npb_build = fixture(PagesNpbBuild, scope="environment")
    memaccess_build = fixture(MemaccessBuild, scope="environment")
    descr = "Page size: small vs large pages (NPB, memaccess)"

    @run_after("setup")
    def set_run(self):
        part = self.current_partition
        self.page_bytes = 2097152 if self.pages == "large" else 4096
        if self.pages == "large":
            missing = large_pages_unavailable()
            if missing and part.extras.get("large_pages"):
                raise ValueError(
                    f"partition {part.fullname} says it has large pages "
                    f"(extras['large_pages']) but {missing}"
                )
            self.skip_if(missing is not None, f"large pages unavailable: {missing}")
        pagewatch = self.binary(self.memaccess_build, "bin/pagewatch")
        self.num_cpus_per_task = 1
        if self.benchmark == "memaccess":
            mib, loads, passes = MEMACCESS[self.scale]
            self.buffer_mib = self.buffer_mib or mib
            self.num_tasks = self.num_tasks_per_node = 1
            self.executable = self.binary(self.memaccess_build, "bin/memaccess")
            self.executable_opts = [
                *("-m", str(self.buffer_mib), "-p", self.pages),
                *("-r", str(loads), "-n", str(passes)),
            ]
            return
        self.npb_class = self.npb_class or NPB_CLASS[self.scale]
        refused = npb.refused_processes(self.benchmark, self.npb_class, self.num_ranks)
        self.skip_if(refused is not None, f"{self.num_ranks} ranks: {refused}")
        self.num_tasks = self.num_tasks_per_node = self.num_ranks
        program = self.binary(self.npb_build, f"bin/{self.benchmark}.{self.npb_class}.x")
        self.executable = pagewatch
        self.executable_opts = [program]
        self.env_vars = {
            **self.env_vars,
            "OMP_NUM_THREADS": "1",
            "GLIBC_TUNABLES": f"glibc.malloc.hugetlb={1 if self.pages == 'large' else 0}",
        }

    def expected_work_s(self):
        if self.benchmark == "memaccess":
            _mib, loads, passes = MEMACCESS[self.scale]
            return work_estimates.memaccess(self.buffer_mib, loads, passes)
        return work_estimates.npb(self.benchmark, self.npb_class)

    def stderr_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
            return fp.read()

    def memaccess(self):
        return pages.parse(self.stdout_text())

    def npb_result(self):
        return npb.parse(self.stdout_text())

    @sanity_function
    def pages_as_asked(self):
        try:
            if self.benchmark == "memaccess":
                found = self.memaccess()
                problems = [] if found.sum_correct else ["memaccess's streaming sum is wrong"]
                if not found.pages_as_asked:
                    problems.append(
                        f"{self.pages} pages asked but {found.huge_percent} % of the buffer "
                        f"was in huge pages (AnonHugePages {found.huge_kb} kB)"
                    )
            else:
                problems = npb.problems(
                    self.npb_result(), self.benchmark, self.npb_class, self.num_ranks
                )
                wrong = pages.huge_page_problem(self.pages, pages.watched(self.stderr_text()))
                problems += [wrong] if wrong else []
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        return sn.assert_true(not problems, msg="; ".join(problems))

    @performance_function("Mop/s")
    def mops_total(self):
        return self.npb_result().mops_total

    @performance_function("s")
    def time(self):
        return self.npb_result().time_s

    @performance_function("MB/s")
    def stream_bandwidth(self):
        return self.memaccess().stream_mbs

    @performance_function("ns")
    def random_latency(self):
        return self.memaccess().random_ns

    @performance_function("kB")
    def huge_kb(self):
        if self.benchmark == "memaccess":
            return self.memaccess().huge_kb
        return min(w.huge_kb for w in pages.watched(self.stderr_text()))

    @run_after("setup")
    def keep_the_figures_of_the_benchmark(self):
        names = (
            ("stream_bandwidth", "random_latency")
            if self.benchmark == "memaccess"
            else (
                "mops_total",
                "time",
            )
        )
        self.perf_variables = {
            name: fn for name, fn in self.perf_variables.items() if name in names + ("huge_kb",)
        }

"""STREAM memory bandwidth: Copy, Scale, Add and Triad from 1 thread to all cores."""

import os
import re
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
from reframe.core.backends import getlauncher  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    run_after,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, stream  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402
from sitebench.sites.topology import last_level_cache_bytes  # noqa: E402

#: STREAM's rule: each array at least four times the last-level cache.
CACHE_FACTOR = 4


class StreamBuild(SpackBuild):
    """The site's STREAM (OpenMP; array size fixed at build time by the site)."""

    spack_spec = "stream"


@rfm.simple_test
class StreamCheck(SitebenchBenchmark):
    """STREAM with ``num_threads`` OpenMP threads, one per core, spread.

    Parameters: ``scale``, ``threads`` (label resolved against the cores).
    Figures: ``Copy``, ``Scale``, ``Add``, ``Triad`` (best rate, MB/s).
    Sanity: "Solution Validates" and arrays >= 4 x the last-level cache.
    Fixture: :class:`StreamBuild`.
    """

    uses_mpi = False

    threads = parameter(THREAD_LABELS, loggable=True)

    #: OpenMP threads, resolved from ``threads`` at setup.
    #:
    #: :type: :class:`int`
    num_threads = variable(int, value=0, loggable=True)

    #: Elements per array: the Spack variant ``stream_array_size`` of the binary, read from
    #: its concrete spec at setup (0 when the spec does not say).
    #:
    #: :type: :class:`int`
    stream_array_size = variable(int, value=0, loggable=True)

    reference_keys = ["scale", "num_threads"]
    problem_keys = ["stream_array_size"]
    stream_build = fixture(StreamBuild, scope="environment")
    num_tasks = 1
    descr = "STREAM memory bandwidth (Spack-built)"

    @run_after("setup")
    def set_threads(self):
        count = resolve_threads(self.threads, self.processor_cores())
        self.skip_if(count is None, f"threads={self.threads} duplicates or exceeds the cores")
        self.num_threads = count
        self.num_cpus_per_task = count
        # OpenMP only: an MPI launcher would bind the one process to one core.
        self.job.launcher = getlauncher("local")()
        self.env_vars = {
            "OMP_NUM_THREADS": str(count),
            "OMP_PROC_BIND": "spread",
            "OMP_PLACES": "cores",
        }
        self.executable = self.binary(self.stream_build, "bin/stream_c.exe")
        size = re.search(r"\bstream_array_size=(\d+)", self.concrete_spec)
        self.stream_array_size = int(size.group(1)) if size else 0

    def expected_work_s(self):
        return work_estimates.stream(self.stream_array_size) if self.stream_array_size else None

    def result(self):
        return stream.parse(self.stdout_text())

    @sanity_function
    def validates(self):
        text = self.stdout_text()
        try:
            parsed = stream.parse(text)
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        llc = last_level_cache_bytes(self.current_partition.processor.info)
        return sn.all(
            [
                sn.assert_true(
                    stream.validates(text), msg="STREAM did not print 'Solution Validates'"
                ),
                sn.assert_eq(
                    parsed.threads,
                    self.num_threads,
                    msg="STREAM counted {0} threads, expected {1}",
                ),
                sn.assert_true(
                    not llc or parsed.array_bytes >= CACHE_FACTOR * llc,
                    msg=f"STREAM arrays ({parsed.array_bytes} B) are smaller than "
                    f"{CACHE_FACTOR} x "
                    f"the last-level cache ({llc} B): rebuild stream with stream_array_size >= "
                    f"{-(-CACHE_FACTOR * llc // parsed.bytes_per_element) if llc else 0}",
                ),
            ]
        )

    @performance_function("MB/s")
    def Copy(self):
        return self.result().best_rate_mbs["Copy"]

    @performance_function("MB/s")
    def Scale(self):
        return self.result().best_rate_mbs["Scale"]

    @performance_function("MB/s")
    def Add(self):
        return self.result().best_rate_mbs["Add"]

    @performance_function("MB/s")
    def Triad(self):
        return self.result().best_rate_mbs["Triad"]

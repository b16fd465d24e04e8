"""NPB in Java beside sitebench's NPB: NASA's NPB3.0-JAV (threads), the public substitute for
the ARM-cluster study's NPB-MPJ (which is on no public repository)."""

import os
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

from sitebench.parsers import ParseError, npb_java  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.spack_build import SpackBuild, site_environment  # noqa: E402
from sitebench.spack import toolchain_roots  # noqa: E402

#: NPB class per scale, as NpbCheck's (quick A, full C).
CLASSES = {"quick": "A", "full": "C"}

#: Benchmarks left out of a scale, and why (measured on the 2-core VM at load 6-10).
TOO_LONG = {("quick", "lu"): "LU class A ran over 100 s here (CG 3 s, FT 12 s, IS 4 s, MG 6 s)"}


def missing_root(partition):
    """Why the site's environment cannot give npb-java (not one of its concretized roots),
    or None: the substitute is optional, a site adds ``npb-java`` to its specs to run it."""
    env = site_environment(partition)
    roots = {name for name, _parts, _hash in toolchain_roots.roots(env)}
    if roots and "npb-java" not in roots:
        return (
            f"npb-java is not a root of {env} (the NPB-MPJ substitute is optional: add "
            f"'npb-java' to its specs to run it)"
        )
    return None


class NpbJavaBuild(SpackBuild):
    """NASA's NPB 3.0 Java version, built with javac (skipped where it is no root)."""

    spack_spec = "npb-java"

    @run_after("setup")
    def only_as_a_root(self):
        reason = missing_root(self.current_partition)
        self.skip_if(bool(reason), reason)


@rfm.simple_test
class NpbJavaCheck(SitebenchBenchmark):
    """NPB3.0-JAV, the kernels it shares with sitebench's NPB: a SUBSTITUTE for NPB-MPJ.

    The study ran NPB-MPJ (MPJ Express, processes); NPB-MPJ is not public, so this is NASA's
    NPB 3.0 Java version, Java threads in one JVM (its own ``-np`` threads), set beside
    ``NpbCheck`` (C/Fortran, MPI ranks) of the same class. EP has no Java version.
    Parameters: ``scale`` (class A quick, C full), ``benchmark`` (cg ft is mg lu; LU only at
    the full scale).
    Variables: ``threads`` (0: every core of the partition).
    Figures: ``mops_total`` (Mop/s), ``time`` (s), as ``NpbCheck``'s.
    Skipped, saying so, where the site's concretized environment has no ``npb-java`` root.
    Sanity: "Verification = Successful"; benchmark, class and threads as asked.
    Fixture: :class:`NpbJavaBuild`.
    """

    benchmark = parameter(["cg", "ft", "is", "mg", "lu"], loggable=True)

    #: Java threads (``-np``); 0: all cores of the partition.
    #:
    #: :type: :class:`int`
    threads = variable(int, value=0, loggable=True)

    #: The NPB problem class (from the scale).
    #:
    #: :type: :class:`str`
    npb_class = variable(str, value="", loggable=True)

    #: What this is: the substitute, logged with every figure.
    #:
    #: :type: :class:`str`
    substitute_for = variable(str, value="NPB-MPJ", loggable=True)

    npb_java_build = fixture(NpbJavaBuild, scope="environment")
    # As NpbCheck's: a reference holds for one class and core count, and the report sets
    # Java beside NPB-MPI by them (seed_tables.npb_java_against_c).
    reference_keys = ["scale", "benchmark", "npb_class", "threads"]
    problem_keys = ["npb_class"]
    uses_mpi = False
    num_tasks = 1
    descr = "NPB 3.0 Java (threads): substitute for the study's NPB-MPJ"

    @run_after("setup")
    def set_command(self):
        reason = TOO_LONG.get((self.scale, self.benchmark))
        self.skip_if(bool(reason), f"{self.benchmark} at the {self.scale} scale: {reason}")
        reason = missing_root(self.current_partition)
        self.skip_if(bool(reason), reason)
        self.npb_class = self.npb_class or CLASSES[self.scale]
        self.threads = self.threads or self.processor_cores()
        self.num_cpus_per_task = self.threads
        self.job.launcher = getlauncher("local")()
        self.executable = self.binary(self.npb_java_build, "bin/npb-java")
        self.executable_opts = [self.benchmark, f"-np{self.threads}", f"CLASS={self.npb_class}"]

    def expected_work_s(self):
        return work_estimates.npb_java(self.benchmark, self.npb_class)

    def result(self):
        return npb_java.parse(self.stdout_text())

    @sanity_function
    def verified(self):
        try:
            found = self.result()
        except ParseError as err:
            stderr = os.path.join(self.stagedir, sn.evaluate(self.stderr))
            with open(stderr) as fp:
                said = [line for line in fp.read().splitlines() if line.startswith("npb-java:")]
            return sn.assert_true(False, msg="; ".join(said + [str(err)]))
        problems = []
        if not found.verified:
            problems.append("verification not successful")
        if (found.benchmark, found.npb_class, found.threads) != (
            self.benchmark.upper(),
            self.npb_class,
            self.threads,
        ):
            problems.append(
                f"ran {found.benchmark} class {found.npb_class} on {found.threads} threads, "
                f"asked {self.benchmark.upper()} {self.npb_class} on {self.threads}"
            )
        return sn.assert_true(not problems, msg="; ".join(problems))

    @performance_function("Mop/s")
    def mops_total(self):
        return self.result().mops_total

    @performance_function("s")
    def time(self):
        return self.result().time

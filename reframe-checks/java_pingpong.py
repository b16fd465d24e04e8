"""Java message passing against C: sitebench's Java ping-pong on MPJ Express (its multicore
and niodev devices) and on Open MPI's Java bindings, with the figures of the OSU checks."""

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
    run_before,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, java_pingpong, osu  # noqa: E402
from sitebench.run import mapping as mappings  # noqa: E402
from sitebench.run.launchers import launcher_name  # noqa: E402
from sitebench.run import time_limits  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.resolution import ResolutionLimited  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Where Open MPI's two Java ranks sit: the OSU checks' mpirun options (reframe-checks/osu.py).

#: (small warm-up, small iterations, large warm-up, large iterations) per scale; "large" is
#: above 8192 B, as in OSU. Full: OSU's own counts, with 10x the small warm-up (a JVM
#: compiles the loop on the fly).
ITERATIONS = {"quick": (200, 1000, 5, 50), "full": (1000, 10000, 10, 1000)}

#: Sizes above this are "large" (JavaPingPong.java's LARGE_ABOVE, as in OSU).
LARGE_ABOVE = 8192

#: The set-ups: MPJ Express's devices and Open MPI's Java bindings.
DEVICES = ["multicore", "niodev", "ompi"]


class JavaPingPongBuild(SpackBuild):
    """sitebench's Java ping-pong for MPJ Express and Open MPI's Java bindings."""

    spack_spec = "java-pingpong"


@rfm.simple_test
class JavaPingPongCheck(SitebenchBenchmark, ResolutionLimited):
    """Java ping-pong: half the round trip of a blocking Send/Recv, 1 B to 4 MiB.

    Parameters: ``scale``, ``device`` (multicore: MPJ Express, both ranks as threads of one
    JVM; niodev: MPJ Express over TCP on loopback, its daemon started for the run in a
    network namespace of its own and stopped after it; ompi: Open MPI's Java bindings, two
    JVMs under Open MPI's mpirun, shared memory), ``mapping`` (core/socket/node as the OSU
    checks; the MPJ devices place nothing and run the core case only, on one host).
    Variables: ``min_size``, ``max_size`` (B), the iteration counts (0: the scale's),
    ``java_home`` (another JDK than the build's).
    Figures, named as the OSU checks' so the report sets them side by side:
    ``latency_small`` (us at ``min_size``), ``latency_large`` (us at ``max_size``),
    ``bandwidth_peak`` (MB/s, message size over one-way time: a ping-pong bandwidth, where
    osu_bw keeps 64 messages in flight), ``bandwidth_peak_size`` (B); niodev also
    ``switch_size`` (B, the size where latency steps up for good: MPJ's switch from the
    eager to the rendezvous protocol, 128 KiB by default).
    Sanity: every size measured, finite and 0 or more (0: under the table's two decimals,
    a figure at the resolution limit, logged in ``at_resolution``), "# done", the "# MPI:"
    line names the API; niodev: the daemon listened on loopback and was stopped; ompi: the
    bindings and the vader BTL as the OSU checks prove them.
    Runs in the Open MPI toolchain's environment (``mpi_openmpi``): MPJ uses no MPI of the
    environment, Open MPI's bindings need that one.
    Fixture: :class:`JavaPingPongBuild`.
    """

    device = parameter(DEVICES, loggable=True)
    mapping = parameter(["core", "socket", "node"], loggable=True)

    #: Smallest message (bytes).
    #:
    #: :type: :class:`int`
    min_size = variable(int, value=1, loggable=True)

    #: Largest message (bytes, a power of two): 4 MiB, the study's.
    #:
    #: :type: :class:`int`
    max_size = variable(int, value=4194304, loggable=True)

    #: Warm-up and timed round trips up to 8 KiB and above; 0: the scale's (ITERATIONS).
    #:
    #: :type: :class:`int`
    small_warmup = variable(int, value=0, loggable=True)
    small_iters = variable(int, value=0, loggable=True)
    large_warmup = variable(int, value=0, loggable=True)
    large_iters = variable(int, value=0, loggable=True)

    #: A JDK to run with instead of the one the package was built with (JAVA_HOME).
    #:
    #: :type: :class:`str`
    java_home = variable(str, value="", loggable=True)

    pingpong_build = fixture(JavaPingPongBuild, scope="environment")
    # references.yaml: $index [$processor.arch, scale, device, mapping]
    reference_keys = ["scale", "device", "mapping"]
    problem_keys = ["min_size", "max_size"]
    num_cpus_per_task = 1
    descr = "Java ping-pong: MPJ Express and Open MPI's Java bindings (sitebench's own)"

    @run_after("init")
    def in_the_open_mpi_environment(self):
        self.valid_prog_environs = ["+sitebench +mpi_openmpi"]

    @run_after("setup")
    def place_ranks(self):
        part = self.current_partition
        if self.device != "ompi":
            self.skip_if(
                self.mapping != "core",
                f"MPJ's {self.device} device places no rank (threads of one JVM, or processes "
                f"its daemon starts on this host): core, one host, only",
            )
            self.job.launcher = getlauncher("local")()
            self.num_tasks = 1
            return
        self.skip_if(
            mappings.mpi_of(self.current_environ) != "openmpi",
            f"Open MPI's Java bindings run under Open MPI; environ "
            f"{self.current_environ.name} uses {mappings.mpi_of(self.current_environ)}",
        )
        proc = part.processor
        self.processor_cores()  # a clear error when the topology is unknown
        self.skip_if(
            self.mapping == "core" and (proc.num_cores_per_socket or 0) < 2,
            f"mapping core needs 2 cores on one socket; {part.fullname} has "
            f"{proc.num_cores_per_socket}",
        )
        # The OSU, Jacobi and ring checks' placement rules and mpirun options (one place).
        reason = mappings.skip_reason(part, self.mapping, launcher_name(self.job.launcher))
        self.skip_if(reason is not None, reason or "")
        self.job.launcher.options = mappings.mpirun_options(self.mapping)
        self.num_tasks = 2
        self.num_tasks_per_node = 1 if self.mapping == "node" else 2
        # Shared memory between the ranks, every process saying which BTL it uses.
        chosen = {
            "OMPI_MCA_pml": "ob1",
            "OMPI_MCA_btl": "self,vader",
            "OMPI_MCA_btl_base_verbose": "1",
        }
        if self.mapping == "node":
            chosen["OMPI_MCA_btl"] = "self,tcp"
        self.env_vars = {**chosen, **self.env_vars}

    @run_after("setup")
    def set_command(self):
        counts = ITERATIONS[self.scale]
        self.small_warmup = self.small_warmup or counts[0]
        self.small_iters = self.small_iters or counts[1]
        self.large_warmup = self.large_warmup or counts[2]
        self.large_iters = self.large_iters or counts[3]
        self.executable = self.binary(self.pingpong_build, "bin/java-pingpong")
        self.executable_opts = [
            self.device,
            str(self.max_size),
            str(self.small_warmup),
            str(self.small_iters),
            str(self.large_warmup),
            str(self.large_iters),
        ]
        if self.java_home:
            self.env_vars = {**self.env_vars, "JAVA_HOME": self.java_home}

    def expected_work_s(self):
        """Both ways of every round trip of every size, at the floor rates."""
        rounds = []
        for k in range(self.max_size.bit_length()):
            size = 1 << k
            if size < self.min_size:
                continue
            small = size <= LARGE_ABOVE
            count = (
                self.small_warmup + self.small_iters
                if small
                else self.large_warmup + self.large_iters
            )
            rounds.append((2 * size * count, 2 * count))
        return time_limits.message_work_s(rounds)

    @run_before("performance")
    def switch_size_for_niodev(self):
        if self.device != "niodev":
            self.perf_variables.pop("switch_size", None)

    def stderr_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
            return fp.read()

    def result(self):
        return java_pingpong.parse(self.stdout_text())

    @sanity_function
    def ran_as_asked(self):
        stderr = self.stderr_text()
        found = java_pingpong.problems(
            self.stdout_text(),
            stderr,
            api="ompi" if self.device == "ompi" else "mpj",
            min_size=self.min_size,
            max_size=self.max_size,
            exitcode=self.job.exitcode,
            niodev=self.device == "niodev",
        )
        if self.device == "ompi" and not found:
            where = osu.mapping_problem(osu.bindings(stderr), self.mapping)
            if where:
                found.append(where)
            btl = "tcp" if self.mapping == "node" else "vader"
            used = osu.transports(stderr)
            if used != {btl}:
                found.append(f"Open MPI used the BTLs {sorted(used)}, not {btl}")
        if not found:
            self.log_resolution_limit(self.result())
        return sn.assert_true(not found, msg="; ".join(found))

    @performance_function("us")
    def latency_small(self):
        return self.result().latency[self.min_size]

    @performance_function("us")
    def latency_large(self):
        return self.result().latency[self.max_size]

    @performance_function("MB/s")
    def bandwidth_peak(self):
        return self.result().bandwidth_peak[1]

    @performance_function("B")
    def bandwidth_peak_size(self):
        return self.result().bandwidth_peak[0]

    @performance_function("B")
    def switch_size(self):
        size = self.result().switch_size()
        if size is None:
            raise ParseError(
                f"no step up in latency of {java_pingpong.SWITCH_FACTOR:g}x or more from "
                f"{java_pingpong.SWITCH_FROM} B on: no eager to rendezvous switch seen"
            )
        return size

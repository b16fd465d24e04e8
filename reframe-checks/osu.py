"""OSU MPI ping-pong: latency and bandwidth of two ranks, by process mapping and transport."""

import os
import re
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

from sitebench.parsers import osu  # noqa: E402
from sitebench.run import mapping as mappings  # noqa: E402
from sitebench.run.launchers import launcher_name  # noqa: E402
from sitebench.run import time_limits  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.resolution import ResolutionLimited  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Where the two ranks sit. Open MPI's mpirun places them with ``--map-by`` and binds each
#: to one core; ``--report-bindings`` prints where they went, which sanity checks.
#: For Slurm's srun the same mappings would be ``--distribution=block:block``,
#: ``--distribution=cyclic:cyclic`` (with ``--ntasks-per-socket=1``) and
#: ``--ntasks-per-node=1``, each with ``--cpu-bind=verbose,cores``; they are not used
#: here because no srun site has run them yet (add them beside these when one does).
MAPPING_OPTIONS = {
    "mpirun": {
        "core": ["--map-by", "core", "--bind-to", "core", "--report-bindings"],
        "socket": ["--map-by", "socket", "--bind-to", "core", "--report-bindings"],
        "node": ["--map-by", "node", "--bind-to", "core", "--report-bindings"],
    },
}

#: The same under MPICH's hydra (``extras['mpi']`` of the environ is mpich). Hydra has no
#: ``--report-bindings``: HYDRA_TOPO_DEBUG=1 (set in choose_transport) prints each process's
#: CPUs on stdout, which sanity places on sockets and cores by the partition's topology. Its
#: lines name no host, so the node mapping (hydra: ``-ppn 1``) cannot be proven and is skipped.
MPICH_MAPPING_OPTIONS = {
    "mpirun": {
        "core": ["-map-by", "core", "-bind-to", "core"],
        "socket": ["-map-by", "socket", "-bind-to", "core"],
    },
}

#: Transport -> the Open MPI BTL that must carry the messages between the two ranks.
#: Chosen by environment variables (not mpirun options), so any launcher passes them on;
#: ``btl_base_verbose=1`` makes every process print which BTL it uses for each peer.
TRANSPORT_BTL = {"shm": "vader", "tcp": "tcp"}

#: Transport -> UCX_TLS under MPICH (ch4:ucx), whose messages between ranks of one host go
#: through UCX too (measured with Debian's MPICH 4.0.2): shm: UCX's shared-memory transports;
#: tcp: UCX's tcp over loopback (UCX_NET_DEVICES=lo), with MPIR_CVAR_NOLOCAL=1 so an MPICH
#: with its own shared memory still sends through UCX. UCX_LOG_LEVEL=info makes UCX print the
#: transports of every endpoint (on stderr: UCX_LOG_FILE), which sanity checks.
MPICH_UCX_TLS = {"shm": "self,sm", "tcp": "tcp"}
#: Why an MPICH OSU over UCX's tcp that printed every size was stopped (reframe-checks/
#: README.md, "MPICH's finalize over UCX's tcp": 3 of 25 osu_bw runs beside a CPU hog).
MPICH_TCP_FINALIZE_HANG = (
    "MPICH before 4.2 can deadlock in MPI_Finalize over UCX's tcp (pmodels/mpich#6596, "
    "fixed in MPICH 4.2.0); not a busy machine: use transport=shm or MPICH 4.2 or later"
)

#: Warm-up and timed iterations (``-x``, ``-i``) at the quick scale; the full scale runs
#: OSU's own defaults (latency 100/10000 below 8 KiB, 10/1000 above; bandwidth 10/100, 2/20).
QUICK_ITERATIONS = {"osu_latency": (20, 200), "osu_bw": (2, 20)}


#: OSU's own (warm-up, timed) iterations up to and above LARGE_MESSAGE_SIZE, which the full
#: scale runs (osu_util.h of OSU 7.2); osu_bw keeps WINDOW_SIZE messages in flight.
OSU_ITERATIONS = {"osu_latency": ((100, 10000), (10, 1000)), "osu_bw": ((10, 100), (2, 20))}
LARGE_MESSAGE_SIZE = 8192
WINDOW_SIZE = 64


class OsuBuild(SpackBuild):
    """The site's OSU Micro-Benchmarks, built against its MPI."""

    spack_spec = "osu-micro-benchmarks"


class OsuPingPong(SitebenchBenchmark, ResolutionLimited):
    """Two ranks of one OSU point-to-point benchmark, mapped and connected as asked.

    Parameters: ``scale``, ``mapping`` (core: both ranks on one socket, different cores;
    socket: on two sockets; node: on two nodes), ``transport`` (shm: Open MPI's
    shared-memory BTL vader; tcp: its TCP BTL, over loopback when both ranks share a host;
    under MPICH, UCX's shared-memory transports or its tcp).
    A mapping the partition cannot offer is skipped, saying why.
    Variables: ``min_size``, ``max_size`` (bytes, powers of two), ``num_warmup_iters``,
    ``num_iters`` (0: the scale's default), ``tcp_interfaces``.
    Sanity: the OSU header and the version of the Spack spec, a finite value of 0 or more
    for every size from ``min_size`` to ``max_size`` (0: under OSU's two decimals, a figure
    at the resolution limit, logged in ``at_resolution`` and warned of, never a failure by
    itself), no Open MPI error, the bindings mpirun reported match the mapping and the
    BTL Open MPI reported is the transport's.
    Under MPICH (the environ's ``extras['mpi']``): no MPICH error, the CPUs hydra bound the
    ranks to match the mapping and UCX connected them with the transport's kind only
    (shared memory, tcp); the node mapping is skipped (hydra's report names no host).
    Fixture: :class:`OsuBuild`.
    """

    mapping = parameter(["core", "socket", "node"], loggable=True)
    transport = parameter(list(TRANSPORT_BTL), loggable=True)

    #: Smallest message (bytes).
    #:
    #: :type: :class:`int`
    min_size = variable(int, value=1, loggable=True)

    #: Largest message (bytes): 16 MiB.
    #:
    #: :type: :class:`int`
    max_size = variable(int, value=16777216, loggable=True)

    #: Warm-up iterations per size (``-x``); 0: the scale's default.
    #:
    #: :type: :class:`int`
    num_warmup_iters = variable(int, value=0, loggable=True)

    #: Timed iterations per size (``-i``); 0: the scale's default.
    #:
    #: :type: :class:`int`
    num_iters = variable(int, value=0, loggable=True)

    #: Network interfaces for TCP between nodes (``btl_tcp_if_include``); on one host TCP
    #: always goes over loopback. Empty: the partition's ``extras['tcp_interfaces']``, else
    #: Open MPI's choice.
    #:
    #: :type: :class:`str`
    tcp_interfaces = variable(str, value="")

    #: The Open MPI BTL the transport must use (vader, tcp); empty under MPICH.
    #:
    #: :type: :class:`str`
    btl = variable(str, value="", loggable=True)

    osu_build = fixture(OsuBuild, scope="environment")
    # references.yaml: $index [$processor.arch, scale, mapping, transport]
    reference_keys = ["scale", "mapping", "transport"]
    problem_keys = ["min_size", "max_size"]
    num_tasks = 2
    num_cpus_per_task = 1
    # A ping-pong of the quick suite takes seconds; under MPICH before 4.2 over UCX's tcp
    # one hangs in MPI_Finalize after its last size (rank 0 spinning in the UCX disconnect,
    # rank 1 asleep in the PMI barrier that follows it: reframe-checks/README.md, "MPICH's
    # finalize over UCX's tcp"). Its launch is stopped at a limit scaled to its sizes and
    # iterations (expected_work_s) and the case fails saying so, the suite goes on.

    #: Set by the subclasses: program name and the title of its output.
    benchmark = ""
    osu_kind = ""

    @run_after("setup")
    def place_ranks(self):
        part = self.current_partition
        proc = part.processor
        self.processor_cores()  # a clear error when the topology is unknown
        if self.mapping == "core":
            self.skip_if(
                (proc.num_cores_per_socket or 0) < 2,
                f"mapping core needs 2 cores on one socket; {part.fullname} has "
                f"{proc.num_cores_per_socket}",
            )
        elif self.mapping == "socket":
            self.skip_if(
                (proc.num_sockets or 0) < 2,
                f"mapping socket needs 2 sockets; {part.fullname} has {proc.num_sockets}",
            )
        else:
            nodes = 1 if part.scheduler.registered_name == "local" else part.extras.get("nodes")
            self.skip_if(
                not nodes or nodes < 2,
                f"mapping node needs 2 nodes; {part.fullname} "
                + (
                    f"has {nodes}"
                    if nodes
                    else "does not say how many it has (set extras['nodes'])"
                ),
            )
            self.skip_if(
                self.transport == "shm", "shared memory does not reach a rank on another node"
            )
        mpi = self.mpi()
        self.skip_if(
            mpi not in mappings.MPIS,
            f"the mappings are written for {', '.join(mappings.MPIS)}; environ "
            f"{self.current_environ.name} uses {mpi} (add its options to osu.py)",
        )
        launcher = launcher_name(self.job.launcher)
        if mpi == "mpich":
            self.skip_if(
                self.mapping == "node",
                "mapping node cannot be proven under MPICH: hydra's binding report "
                "(HYDRA_TOPO_DEBUG) names no host",
            )
            self.skip_if(
                not osu.cpu_places(proc.topology),
                f"MPICH reports bindings as CPU masks; {part.fullname} has no processor "
                f"topology (sockets, cores) to read them with (reframe --detect-host-topology)",
            )
            options = MPICH_MAPPING_OPTIONS.get(launcher)
            self.skip_if(
                options is None,
                f"the MPICH mappings are written for {', '.join(MPICH_MAPPING_OPTIONS)}; "
                f"{part.fullname} launches with {launcher} (add its options to "
                f"MPICH_MAPPING_OPTIONS in osu.py)",
            )
            self.job.launcher.options = list(options[self.mapping])
            self.num_tasks_per_node = 2
            return
        options = MAPPING_OPTIONS.get(launcher)
        self.skip_if(
            options is None,
            f"the mappings are written for {', '.join(MAPPING_OPTIONS)}; {part.fullname} "
            f"launches with {launcher} (add its options to MAPPING_OPTIONS in osu.py)",
        )
        self.job.launcher.options = list(options[self.mapping])
        self.num_tasks_per_node = 1 if self.mapping == "node" else 2

    def mpi(self):
        """The environ's MPI (Spack package name): openmpi or mpich."""
        return mappings.mpi_of(self.current_environ)

    @run_after("setup")
    def choose_transport(self):
        if self.mpi() == "mpich":
            # One host (place_ranks skips the node mapping): tcp over loopback.
            chosen = {
                "HYDRA_TOPO_DEBUG": "1",
                "UCX_TLS": MPICH_UCX_TLS[self.transport],
                "UCX_LOG_LEVEL": "info",
                "UCX_LOG_FILE": "stderr",
            }
            if self.transport == "tcp":
                chosen.update(MPIR_CVAR_NOLOCAL="1", UCX_NET_DEVICES="lo")
            self.env_vars = {**chosen, **self.env_vars}
            return
        self.btl = TRANSPORT_BTL[self.transport]
        chosen = {
            "OMPI_MCA_pml": "ob1",
            "OMPI_MCA_btl": f"self,{self.btl}",
            "OMPI_MCA_btl_base_verbose": "1",
        }
        if self.transport == "tcp":
            interfaces = (
                "lo"
                if self.mapping != "node"
                else (
                    self.tcp_interfaces or self.current_partition.extras.get("tcp_interfaces", "")
                )
            )
            if interfaces:
                chosen["OMPI_MCA_btl_tcp_if_include"] = interfaces
        # A user's -S env_vars=... wins; sanity still checks the BTL actually used.
        self.env_vars = {**chosen, **self.env_vars}

    @run_after("setup")
    def set_command(self):
        warmup, iters = QUICK_ITERATIONS[self.benchmark] if self.scale == "quick" else (0, 0)
        self.num_warmup_iters = self.num_warmup_iters or warmup
        self.num_iters = self.num_iters or iters
        self.executable = self.binary(
            self.osu_build, f"libexec/osu-micro-benchmarks/mpi/pt2pt/{self.benchmark}"
        )
        self.executable_opts = ["-m", f"{self.min_size}:{self.max_size}"]
        if self.num_warmup_iters:
            self.executable_opts += ["-x", str(self.num_warmup_iters)]
        if self.num_iters:
            self.executable_opts += ["-i", str(self.num_iters)]

    def expected_work_s(self):
        """The bytes and messages of every size and iteration, at the floor rates."""
        rounds = []
        for size in osu.sizes(self.min_size, self.max_size):
            if self.num_iters:
                count = self.num_warmup_iters + self.num_iters
            else:
                small, large = OSU_ITERATIONS[self.benchmark]
                count = sum(small if size <= LARGE_MESSAGE_SIZE else large)
            if self.benchmark == "osu_bw":  # a window of messages and one reply
                rounds.append((WINDOW_SIZE * size * count, (WINDOW_SIZE + 1) * count))
            else:  # ping and pong
                rounds.append((2 * size * count, 2 * count))
        return time_limits.message_work_s(rounds)

    def finished_but_not_exited(self):
        try:
            text = self.stdout_text()
        except OSError:
            return ""
        if self.mpi() == "mpich":
            text = osu.without_hydra_bindings(text)
        if not osu.printed_every_size(text, self.min_size, self.max_size):
            return ""
        if self.mpi() == "mpich" and self.transport == "tcp":
            return MPICH_TCP_FINALIZE_HANG
        return "it hung in its exit (MPI_Finalize), not in its measurements"

    def stderr_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
            return fp.read()

    def result(self):
        if self.mpi() == "mpich":
            return osu.parse(osu.without_hydra_bindings(self.stdout_text()))
        return osu.parse(self.stdout_text())

    def spec_version(self):
        """The OSU version of the concrete spec (``@7.2``, ``@git.<commit>=7.2``)."""
        match = re.search(r"@(?:git\.\w+=)?([^\s~+]+)", self.concrete_spec)
        return match.group(1) if match else None

    def note_resolution(self, found):
        """Log the sizes OSU printed as zero (figures at its resolution limit); ``found``
        passes through."""
        if not found:
            self.log_resolution_limit(self.result())
        return found

    @sanity_function
    def ran_as_asked(self):
        if self.mpi() == "mpich":
            found = osu.mpich_problems(
                self.stdout_text(),
                self.stderr_text(),
                kind=self.osu_kind,
                mapping=self.mapping,
                transport=self.transport,
                places=osu.cpu_places(self.current_partition.processor.topology),
                min_size=self.min_size,
                max_size=self.max_size,
                version=self.spec_version(),
                exitcode=self.job.exitcode,
            )
            found = self.note_resolution(found)
            return sn.assert_true(not found, msg="; ".join(found))
        found = osu.problems(
            self.stdout_text(),
            self.stderr_text(),
            kind=self.osu_kind,
            mapping=self.mapping,
            btl=self.btl,
            min_size=self.min_size,
            max_size=self.max_size,
            version=self.spec_version(),
            exitcode=self.job.exitcode,
            cores_per_node=self.current_partition.processor.num_cores,
        )
        found = self.note_resolution(found)
        return sn.assert_true(not found, msg="; ".join(found))


@rfm.simple_test
class OsuLatencyCheck(OsuPingPong):
    """osu_latency: half the round-trip time of a blocking ping-pong.

    Figures: ``latency_small`` (us, at ``min_size``, 1 B by default), ``latency_large``
    (us, at ``max_size``, 16 MiB by default). See :class:`OsuPingPong`.
    """

    benchmark = "osu_latency"
    osu_kind = "Latency"
    descr = "OSU MPI latency (Spack-built)"

    @performance_function("us")
    def latency_small(self):
        return self.result().values[self.min_size]

    @performance_function("us")
    def latency_large(self):
        return self.result().values[self.max_size]


@rfm.simple_test
class OsuBandwidthCheck(OsuPingPong):
    """osu_bw: one-way bandwidth, 64 messages in flight per iteration.

    Figures: ``bandwidth_peak`` (MB/s, the largest over all sizes),
    ``bandwidth_peak_size`` (B, the size where it was reached).
    See :class:`OsuPingPong`.
    """

    benchmark = "osu_bw"
    osu_kind = "Bandwidth"
    descr = "OSU MPI bandwidth (Spack-built)"

    @performance_function("MB/s")
    def bandwidth_peak(self):
        return self.result().peak[1]

    @performance_function("B")
    def bandwidth_peak_size(self):
        return self.result().peak[0]

"""PARSEC blackscholes and fluidanimate: strong scaling from 1 thread to all cores."""

import math
import os
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.core.runtime as rt  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
import reframe.utility.udeps as udeps  # noqa: E402
from reframe.core.backends import getlauncher  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    require_deps,
    run_after,
    run_before,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, parsec  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

PRICES_FILE = "prices.txt"
FLUID_OUTPUT = "out.fluid"
FLUID_INPUTS = "share/parsec-benchmark/inputs/fluidanimate"


def thread_count(label, num_cores):
    """Threads of ``label`` on ``num_cores`` cores, or None to skip it.

    The 1-thread run is the baseline of every speed-up, so it always runs (also
    on one core); another label that comes to 1 thread would repeat it.
    """
    if label == "1":
        return 1
    count = resolve_threads(label, num_cores)
    return None if count == 1 else count


def thread_counts(num_cores):
    """Every thread count the check runs on ``num_cores`` cores."""
    return sorted({c for c in (thread_count(x, num_cores) for x in THREAD_LABELS) if c})


def blackscholes_options(num_cores, per_core, minimum):
    """Options of the blackscholes input: ``per_core`` x cores, at least ``minimum``.

    Rounded up to a multiple of every thread count: blackscholes gives each
    thread options/threads options and skips the remainder.
    """
    step = math.lcm(*thread_counts(num_cores))
    wanted = max(per_core * num_cores, minimum, 1)
    return -(-wanted // step) * step


def fluidanimate_frames(num_cores, per_core, minimum):
    """Frames of the fluidanimate run: ``per_core`` x cores, at least ``minimum``."""
    return max(per_core * num_cores, minimum, 1)


def bindable(topology, count):
    """True when CPUs 0..count-1 lie on ``count`` different cores (ReFrame's topology).

    The hooks bind to a contiguous range from CPU 0; on a machine that numbers
    SMT siblings next to each other that range would share cores.
    """
    cores = (topology or {}).get("cores")
    if not cores:
        return False
    core_of = {}
    for index, mask in enumerate(cores):
        bits = int(mask, 16)
        for cpu in range(bits.bit_length()):
            if bits >> cpu & 1:
                core_of[cpu] = index
    first = [core_of.get(cpu) for cpu in range(count)]
    return None not in first and len(set(first)) == count


class ParsecBuild(SpackBuild):
    """The site's PARSEC blackscholes and fluidanimate (pthreads; +hooks for ROI times)."""

    spack_spec = "parsec-benchmark"


@rfm.simple_test
class ParsecCheck(SitebenchBenchmark):
    """PARSEC ``benchmark`` on ``num_threads`` threads, the same input at every count.

    Parameters: ``scale``, ``benchmark`` (blackscholes, fluidanimate),
    ``threads`` (label resolved against the cores; fluidanimate skips counts
    that are not a power of 2).
    Input: blackscholes ``num_options`` options written by the recipe's
    ``inputgen`` once per session into the build fixture's stage directory
    (deterministic: it cycles through PARSEC's 1000 reference options, there is
    no seed); fluidanimate
    ``fluid_input`` for ``frames`` frames. Sized from the cores so that the
    run on all cores still lasts seconds: work per core is fixed.
    Figures: ``time`` (s, the hooks' ROI time, else the program's wall time),
    ``speedup`` (time of the 1-thread run of the same benchmark and scale in
    this session / time), ``efficiency`` (speedup / threads).
    Sanity: exit status 0; the hooks' ROI begin, end and time; the CPUs the
    hooks bound the run to = threads (the programs do not print their thread
    count); no thread-count refusal or reduction; blackscholes read
    ``num_options`` options and wrote one price per option, each within 1e-4
    of the reference value in its input; fluidanimate wrote every particle,
    finite and inside the simulation box.
    Fixture: :class:`ParsecBuild`. Dependency: the ``threads=1`` variant of
    the same benchmark and scale (pulled in when only other counts are
    selected).
    """

    uses_mpi = False

    benchmark = parameter(parsec.BENCHMARKS, loggable=True)
    threads = parameter(THREAD_LABELS, loggable=True)

    #: Threads, resolved from ``threads`` at setup.
    #:
    #: :type: :class:`int`
    num_threads = variable(int, value=0, loggable=True)

    #: blackscholes options; 0 derives them from the cores and the scale.
    #:
    #: :type: :class:`int`
    num_options = variable(int, value=0, loggable=True)

    #: blackscholes options per core, by scale. 1 M is about 2.6 s of one core of
    #: the 2-core VM (ROI of 13.1 s on 2 threads for 10 M, PARSEC fixtures); each
    #: option takes about 64 B of memory and 63 B of input file in the stage.
    #:
    #: :type: :class:`dict`
    options_per_core = variable(dict, value={"quick": 1_000_000, "full": 2_500_000})

    #: Fewest blackscholes options, by scale (full: PARSEC's native 10 M).
    #:
    #: :type: :class:`dict`
    min_options = variable(dict, value={"quick": 0, "full": 10_000_000})

    #: fluidanimate frames; 0 derives them from the cores and the scale.
    #:
    #: :type: :class:`int`
    frames = variable(int, value=0, loggable=True)

    #: fluidanimate frames per core, by scale. About 0.063 s a frame of in_100K
    #: on one core of the 2-core VM (31.3 s for 500 frames, PARSEC fixtures).
    #:
    #: :type: :class:`dict`
    frames_per_core = variable(dict, value={"quick": 40, "full": 125})

    #: Fewest fluidanimate frames, by scale (full: PARSEC native's 500).
    #:
    #: :type: :class:`dict`
    min_frames = variable(dict, value={"quick": 0, "full": 500})

    #: fluidanimate input, a file installed by the recipe's ``inputs`` variant.
    #:
    #: :type: :class:`str`
    fluid_input = variable(str, value="in_100K.fluid", loggable=True)

    #: Input file of this run (blackscholes: generated in the build fixture's stage).
    #:
    #: :type: :class:`str`
    input_file = variable(str, value="", loggable=True)

    #: Bind the run to CPUs 0..threads-1 through the hooks (PARSEC_CPU_NUM) when
    #: they lie on different cores; the hooks then report the CPU count.
    #:
    #: :type: :class:`bool`
    pin = variable(bool, value=True)

    #: CPUs the run is bound to (0: not bound).
    #:
    #: :type: :class:`int`
    bound_cpus = variable(int, value=0, loggable=True)

    #: Where ``time`` comes from: "roi" (the hooks) or "wall" (set by the sanity check).
    #:
    #: :type: :class:`str`
    timer = variable(str, value="", loggable=True)

    #: Time of the 1-thread run of the same benchmark and scale (s).
    #:
    #: :type: :class:`float`
    baseline_time = variable(float, value=0.0, loggable=True)

    reference_keys = ["scale", "benchmark", "num_threads"]
    # Not input_file: blackscholes generates it in a stage directory, a new path each run.
    problem_keys = ["num_options", "frames", "fluid_input"]
    parsec_build = fixture(ParsecBuild, scope="environment")
    num_tasks = 1
    descr = "PARSEC blackscholes/fluidanimate strong scaling (Spack-built)"

    def why_not_run(self, num_cores):
        """Why this variant does not run on ``num_cores`` cores (None: it runs)."""
        count = thread_count(self.threads, num_cores)
        if count is None:
            return f"threads={self.threads} duplicates or exceeds the cores"
        if self.benchmark == "fluidanimate" and count & (count - 1):
            return f"fluidanimate runs only power-of-2 thread counts, not {count}"
        return None

    @run_after("init")
    def depend_on_one_thread(self):
        # ReFrame cleans up the 1-thread run (copies its output, removes its stage) only
        # after all its dependents passed; one skipped at setup would keep it from that.
        # So the counts that no partition of this scale runs are dropped here already.
        features = {"spack", f"scale_{self.scale}"}
        cores = [
            p.processor.num_cores
            for p in rt.runtime().system.partitions
            if features <= set(p.features) and p.processor.num_cores
        ]
        reasons = [self.why_not_run(n) for n in cores]
        self.skip_if(bool(reasons) and all(reasons), reasons[0] if reasons else "")
        if self.threads == "1":
            return
        cls = type(self)
        (variant,) = cls.get_variant_nums(benchmark=self.benchmark, scale=self.scale, threads="1")
        self._baseline = cls.variant_name(variant)
        # Same partition and environment: the baseline ran on the same machine.
        self.depends_on(self._baseline, udeps.by_case)

    @require_deps
    def read_baseline(self):
        if self.threads != "1":
            self.baseline_time = self.getdep(self._baseline).result().time_s

    @run_after("setup")
    def set_threads(self):
        cores = self.processor_cores()
        reason = self.why_not_run(cores)
        self.skip_if(reason is not None, reason)
        count = thread_count(self.threads, cores)
        self.num_threads = count
        self.num_cpus_per_task = count
        # Threads only: an MPI launcher would bind the one process to one core.
        self.job.launcher = getlauncher("local")()
        hooks = self.hooks()
        if self.pin and hooks and bindable(self.current_partition.processor.topology, count):
            self.bound_cpus = count
            self.env_vars = {"PARSEC_CPU_NUM": str(count), "PARSEC_CPU_BASE": "0"}
        if self.benchmark == "blackscholes":
            self.setup_blackscholes(cores)
        else:
            self.setup_fluidanimate(cores)

    def hooks(self):
        """The binary prints ROI lines (built +hooks)."""
        return "+hooks" in self.parsec_build.concrete_spec()

    def setup_blackscholes(self, cores):
        if not self.num_options:
            self.num_options = blackscholes_options(
                cores, self.options_per_core[self.scale], self.min_options[self.scale]
            )
        for count in thread_counts(cores):
            if self.num_options % count:
                raise ValueError(
                    f"num_options={self.num_options} is not a multiple of {count} threads: "
                    f"blackscholes would leave the last {self.num_options % count} options "
                    f"unpriced; use a multiple of {math.lcm(*thread_counts(cores))}"
                )
        # Every thread count of a session reads the same input: it is generated once (1.35 s
        # and 126 MB for 2 M options), before the timer starts, into the stage of the build
        # fixture they share, which ReFrame keeps until its last dependent has run. Written
        # under a temporary name and renamed, so a run cut short leaves no partial input.
        self.input_file = os.path.join(self.parsec_build.stagedir, f"in_{self.num_options}.txt")
        inputgen = self.binary(self.parsec_build, "bin/inputgen")
        partial = f"{self.input_file}.partial-$$"
        self.prerun_cmds = [
            f'[ -f "{self.input_file}" ] || {{ "{inputgen}" {self.num_options} "{partial}" '
            f'&& mv "{partial}" "{self.input_file}"; }}'
        ]
        self.executable = self.binary(self.parsec_build, "bin/blackscholes")
        self.executable_opts = [str(self.num_threads), self.input_file, PRICES_FILE]

    def setup_fluidanimate(self, cores):
        if not self.frames:
            self.frames = fluidanimate_frames(
                cores, self.frames_per_core[self.scale], self.min_frames[self.scale]
            )
        inputs = self.binary(self.parsec_build, FLUID_INPUTS)
        self.input_file = os.path.join(inputs, self.fluid_input)
        if not os.path.isfile(self.input_file):
            have = sorted(os.listdir(inputs)) if os.path.isdir(inputs) else []
            raise ValueError(
                f"fluidanimate input {self.fluid_input} is not installed in {inputs} "
                f"(installed: {', '.join(have) or 'none'}); pick one with -S fluid_input=... "
                f"or add its set to parsec-benchmark's inputs variant"
            )
        self.executable = self.binary(self.parsec_build, "bin/fluidanimate")
        self.executable_opts = [
            str(self.num_threads),
            str(self.frames),
            self.input_file,
            FLUID_OUTPUT,
        ]

    def expected_work_s(self):
        if self.benchmark == "blackscholes":
            return work_estimates.blackscholes(self.num_options)
        return work_estimates.fluidanimate(self.fluid_input, self.frames)

    @run_before("run")
    def time_the_program(self):
        # The exit status and wall time of the program alone, in the line that
        # sitebench.parsers.parsec reads (wall time: for builds without hooks).
        self.prerun_cmds = self.prerun_cmds + ["sitebench_start=$(date +%s.%N)"]
        self.postrun_cmds = [
            "sitebench_status=$?",
            "sitebench_end=$(date +%s.%N)",
            'echo "[sitebench] exit status $sitebench_status, started $sitebench_start, '
            'ended $sitebench_end"',
            "exit $sitebench_status",
        ]

    def _text(self, name):
        path = os.path.join(self.stagedir, sn.evaluate(name))
        if not os.path.isfile(path):
            return ""
        with open(path, errors="replace") as fp:
            return fp.read()

    def result(self):
        return parsec.parse(
            self._text(self.stdout), self.benchmark, stderr=self._text(self.stderr)
        )

    @sanity_function
    def verified(self):
        try:
            result = self.result()
            self.timer = result.timer
            if self.threads == "1":
                self.baseline_time = result.time_s or 0.0
            found = parsec.problems(
                result,
                self.num_threads,
                hooks=self.hooks(),
                bound_cpus=self.bound_cpus or None,
                options=self.num_options or None,
                stderr=self._text(self.stderr),
            )
            if not found and self.benchmark == "blackscholes":
                parsec.check_prices(
                    os.path.join(self.stagedir, PRICES_FILE),
                    self.num_options,
                    os.path.join(self.stagedir, self.input_file),
                )
            elif not found:
                parsec.check_fluid(os.path.join(self.stagedir, FLUID_OUTPUT), result.particles)
        except ParseError as err:
            return sn.assert_true(False, msg=str(err))
        return sn.assert_true(not found, msg="; ".join(found))

    def _speedup(self):
        return self.baseline_time / self.result().time_s

    @performance_function("s")
    def time(self):
        return self.result().time_s

    @performance_function("x")
    def speedup(self):
        return self._speedup()

    @performance_function("fraction")
    def efficiency(self):
        return self._speedup() / self.num_threads

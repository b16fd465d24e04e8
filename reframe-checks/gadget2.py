"""Gadget-2: the cosmological N-body/SPH code on its lcdm_gas example, strong scaling from
one rank to all cores."""

import os
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import reframe as rfm  # noqa: E402
import reframe.core.runtime as rt  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
import reframe.utility.udeps as udeps  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    require_deps,
    run_after,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, gadget2  # noqa: E402
from sitebench.run import gadget2_input, work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Where Gadget-2 writes (OutputDir of the run's parameter file, in the stage).
OUTPUT_DIR = "output"
PARAM_FILE = "gadget2.param"

#: The scale factor lcdm_gas runs to (TimeMax; it starts at a = 1/11, z = 10). quick: 0.11,
#: 9 steps: 1 rank 14.7 s and 2 ranks 11.5 s of mpirun on the 2-core VM at load 2.6
#: (tests/fixtures/gadget2); 0.2 took 20.4 s on 2 ranks, 0.5 about 80 s. full: None, the
#: parameter file's (lcdm_gas: 1.0, z = 0).
TIME_MAX = {"quick": 0.11, "full": None}


def rank_count(label, num_cores):
    """Ranks of ``label`` on ``num_cores`` cores, or None to skip it. The 1-rank run is the
    baseline of the efficiency, so it always runs; another label that comes to 1 would
    repeat it."""
    if label == "1":
        return 1
    count = resolve_threads(label, num_cores)
    return None if count == 1 else count


class Gadget2Build(SpackBuild):
    """The site's Gadget-2 (``bin/Gadget2``; ICs and parameter files in share/gadget2)."""

    spack_spec = "gadget2"


@rfm.simple_test
class Gadget2Check(SitebenchBenchmark):
    """Gadget-2 on ``num_ranks`` MPI ranks, one a core, the same problem at every count.

    Parameters: ``scale`` (TimeMax, :data:`TIME_MAX`), ``ranks`` (label resolved against the
    cores; 1 always runs).
    Variables: ``problem``, ``param_file``, ``input_dir``, ``time_max``.
    Figures: ``wall_time`` (s, Gadget-2's own wall clock from the start to the last step:
    cpu.txt's total), ``steps_per_second``, ``efficiency`` (the 1-rank run's wall time over
    ranks x this one's; the 1-rank run of the same scale, problem, partition and
    environment in this session, a ReFrame dependency as PARSEC's).
    Sanity: no refusal of Gadget-2's (it exits 0 after most); it ran on ``num_ranks``
    processors; its last step began at TimeMax and the last snapshot was written; cpu.txt
    ends at that step; energy.txt has statistics, every value finite. A rank count Gadget-2
    refuses (NumFilesWrittenInParallel or NumFilesPerSnapshot above it) is skipped, a
    missing initial-conditions file fails at setup, each saying so.
    Fixture: :class:`Gadget2Build`.
    """

    ranks = parameter(THREAD_LABELS, loggable=True)

    #: The problem's name, logged so the report says which one ran: a shipped example
    #: (lcdm_gas, galaxy, gassphere; the gadget2 spec's ``example`` variant must match its
    #: compile-time options) or the site's own, e.g. the study's cluster formation run.
    #:
    #: :type: :class:`str`
    problem = variable(str, value="lcdm_gas", loggable=True)

    #: A Gadget-2 parameter file to run instead of the shipped
    #: ``share/gadget2/parameterfiles/<problem>.param``. Its OutputDir is replaced by the
    #: run's, and its TimeMax by ``time_max`` when set.
    #:
    #: :type: :class:`str`
    param_file = variable(str, value="", loggable=True)

    #: The directory the parameter file's relative InitCondFile and OutputListFilename are
    #: written for; empty: the package's ``share/gadget2`` (the shipped files' layout).
    #:
    #: :type: :class:`str`
    input_dir = variable(str, value="", loggable=True)

    #: TimeMax of the run (the scale factor for cosmological runs); 0: the scale's
    #: (:data:`TIME_MAX`), which for full is the parameter file's own.
    #:
    #: :type: :class:`float`
    time_max = variable(float, value=0.0, loggable=True)

    #: MPI ranks, resolved from ``ranks`` at setup.
    #:
    #: :type: :class:`int`
    num_ranks = variable(int, value=0, loggable=True)

    #: Wall time of the 1-rank run of the same case (s).
    #:
    #: :type: :class:`float`
    baseline_time = variable(float, value=0.0, loggable=True)

    reference_keys = ["scale", "problem", "num_ranks"]
    problem_keys = ["problem", "time_max"]
    gadget_build = fixture(Gadget2Build, scope="environment")
    descr = "Gadget-2 lcdm_gas strong scaling (Spack-built)"

    @run_after("init")
    def depend_on_one_rank(self):
        # As ParsecCheck: counts no partition of this scale runs are dropped here, so the
        # 1-rank run is not kept from its clean-up by a dependent skipped at setup.
        features = {"spack", f"scale_{self.scale}"}
        cores = [
            p.processor.num_cores
            for p in rt.runtime().system.partitions
            if features <= set(p.features) and p.processor.num_cores
        ]
        counts = [rank_count(self.ranks, n) for n in cores]
        self.skip_if(
            bool(counts) and not any(counts),
            f"ranks={self.ranks} duplicates or exceeds the cores",
        )
        if self.ranks == "1":
            return
        cls = type(self)
        (variant,) = cls.get_variant_nums(scale=self.scale, ranks="1")
        self._baseline = cls.variant_name(variant)
        self.depends_on(self._baseline, udeps.by_case)

    @require_deps
    def read_baseline(self):
        if self.ranks != "1":
            self.baseline_time = self.getdep(self._baseline).cpu_log().total_s

    def expected_work_s(self):
        # The problem's particles are known for the shipped ones only: another parameter
        # file gets the scale's bound.
        if self.param_file:
            return None
        return work_estimates.gadget2(self.problem, self._time_begin, self.time_max)

    @run_after("setup")
    def set_run(self):
        cores = self.processor_cores()
        count = rank_count(self.ranks, cores)
        self.skip_if(count is None, f"ranks={self.ranks} duplicates or exceeds the cores")
        self.num_ranks = count
        self.num_tasks = count
        self.num_tasks_per_node = count
        self.num_cpus_per_task = 1
        self.executable = self.binary(self.gadget_build, "bin/Gadget2")
        share = self.binary(self.gadget_build, "share/gadget2")
        path = self.param_file or os.path.join(share, "parameterfiles", f"{self.problem}.param")
        if not os.path.isfile(path):
            raise ValueError(f"Gadget-2 parameter file {path} not found (param_file, problem)")
        if not self.time_max and TIME_MAX[self.scale] is not None:
            self.time_max = TIME_MAX[self.scale]
        with open(path) as fp:
            run = gadget2_input.run_params(
                fp.read(), self.input_dir or share, OUTPUT_DIR, self.time_max or None
            )
        self.time_max = float(run.params["TimeMax"])
        self._time_begin = float(run.params.get("TimeBegin", "0"))
        refused = gadget2_input.refusal(run, count)
        if refused and refused.startswith("Gadget-2 refuses"):
            self.skip(f"ranks={self.ranks} ({count}): {refused}")
        if refused:
            raise ValueError(f"{path}: {refused}")
        self.write_run_directory(run)
        self.executable_opts = [PARAM_FILE]
        self.keep_files = [
            os.path.join(OUTPUT_DIR, name) for name in ("cpu.txt", "energy.txt", "timings.txt")
        ]

    def write_run_directory(self, run):
        """The parameter file, the input links and OutputDir, in the stage."""
        os.makedirs(os.path.join(self.stagedir, OUTPUT_DIR), exist_ok=True)
        with open(os.path.join(self.stagedir, PARAM_FILE), "w") as fp:
            fp.write(run.text)
        for name, source in run.links.items():
            link = os.path.join(self.stagedir, name)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(source, link)

    def _text(self, *parts):
        path = os.path.join(self.stagedir, *parts)
        if not os.path.isfile(path):
            return None
        with open(path, errors="replace") as fp:
            return fp.read()

    def cpu_log(self):
        return gadget2.parse_cpu(self._text(OUTPUT_DIR, "cpu.txt") or "")

    @sanity_function
    def completed(self):
        found = gadget2.problems(
            self._text(sn.evaluate(self.stdout)) or "",
            self._text(OUTPUT_DIR, "cpu.txt"),
            self._text(OUTPUT_DIR, "energy.txt"),
            self.num_ranks,
            self.time_max,
        )
        if not found and self.ranks == "1":
            self.baseline_time = self.cpu_log().total_s
        return sn.assert_true(not found, msg="; ".join(found))

    @performance_function("s")
    def wall_time(self):
        return self.cpu_log().total_s

    @performance_function("steps/s")
    def steps_per_second(self):
        return self.cpu_log().steps_per_second

    @performance_function("fraction")
    def efficiency(self):
        if not self.baseline_time:
            raise ParseError("no wall time of the 1-rank run")
        return self.baseline_time / (self.num_ranks * self.cpu_log().total_s)

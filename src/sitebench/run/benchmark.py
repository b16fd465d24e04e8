"""Base of every run-only sitebench check: scale, references, provenance, energy."""

import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, ReferenceParseError, SanityError

from sitebench.sites import host
from sitebench.run import disturbance
from sitebench.run.energy import EnergyError
from sitebench.run.energy.config import power_config
from sitebench.parsers import slurm
from sitebench.run.energy.measure import SACCT_FILE, SAMPLES_FILE, measure, sampler_commands
from sitebench.run import loading, time_limits
from sitebench.run.scales import SCALES


#: Where the job writes "<start> <end> <exit status>" of the launched benchmark (epoch s).
LAUNCH_FILE = "sitebench-launch.txt"

#: (prerun, postrun) commands timing the launch; the exit status passes through, for the
#: checks' own postrun commands (parsec reads $?) and for the job's exit code.
LAUNCH_TIMER = (
    ["sitebench_launch_start=$(date +%s.%N)"],
    [
        "sitebench_launch_status=$?",
        'echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > ' + LAUNCH_FILE,
        "(exit $sitebench_launch_status)",
    ],
)


class SitebenchBenchmark(rfm.RunOnlyRegressionTest):
    """Common parts of the checks.

    Parameters: ``scale`` (tag and partition feature ``scale_<name>``).
    References: the site's ``references.yaml``, named by the partitions'
    ``extras['references']`` (ReFrame's ``$ref`` format, indexed by CPU
    microarchitecture and scale, parsed once per process: ``set_site_references``);
    a figure without a reference is logged and never fails.
    Logged with every figure: the concrete Spack spec of the binary.
    Energy: where the partition reads power (``extras['power']``), the
    figures named in ``energy_figures`` get a ``<figure>_per_watt``
    companion, beside ``energy_j`` and ``power_w`` of the run; a configured
    source that gives no reading fails the check after the benchmark's own
    figures were logged and judged. Without ``extras['power']`` nothing changes.
    """

    scale = parameter(SCALES, loggable=True)

    #: Concrete spec (name, version, variants, target, hash) of the binary.
    #:
    #: :type: :class:`str`
    concrete_spec = variable(str, value="", loggable=True)

    #: The variables this check's references are indexed by, after
    #: ``$processor.arch`` (the ``$index`` of its block in references.yaml).
    #: Logged, so ``sitebench references`` can propose references from runs.
    #:
    #: :type: :class:`List[str]`
    reference_keys = variable(typ.List[str], value=["scale"], loggable=True)

    #: The variables that size the problem (HPL's N, NB and grid, NPB's class...): figures
    #: are compared, judged against history and proposed as references only between cases
    #: with the same values of these (the store's ``problem`` column). Logged.
    #:
    #: :type: :class:`List[str]`
    problem_keys = variable(typ.List[str], value=[], loggable=True)

    #: Where the partition's references and history belong to one host
    #: (``extras['host_references']``, set for ``local``): this host's fingerprint id
    #: (sitebench/sites/host.py); empty where they are site-wide. Logged.
    #:
    #: :type: :class:`str`
    host_fingerprint = variable(str, value="", loggable=True)

    #: The host the references file says its references were made on (its ``$host`` id;
    #: empty when it names none). Logged beside ``host_fingerprint``.
    #:
    #: :type: :class:`str`
    references_host = variable(str, value="", loggable=True)

    #: The toolchain the benchmark was built and run with: the ReFrame environment's name
    #: (sitebench/sites/toolchains.py), set after setup. A references block may index by it
    #: where a figure depends on the MPI or compiler (``$index: [$processor.arch, scale,
    #: toolchain, ...]``): ReFrame resolves the index when it judges the figures. Logged.
    #:
    #: :type: :class:`str`
    toolchain = variable(str, value="", loggable=True)

    #: Figures that get a per-watt companion ``<figure>_per_watt`` where the
    #: partition reads power: figure name -> unit, e.g. ``{"gflops": "Gflop/s/W"}``.
    #: A class attribute, not a variable: a property of the check, kept out of perflogs.
    #:
    #: :type: :class:`Dict[str, str]`
    energy_figures = {}

    #: Where ``energy_j``, ``power_w`` and the per-watt figures came from:
    #: ``rapl`` (CPU packages and DRAM), ``ipmi`` (the node, from its BMC),
    #: ``slurm`` (the job's nodes, as Slurm accounts them) or empty (none).
    #: Figures of different sources are not comparable.
    #:
    #: :type: :class:`str`
    power_source = variable(str, value="", loggable=True)

    #: CPU other work took while the benchmark ran, in cores (sitebench/run/disturbance.py);
    #: -1 where not measured (jobs not started by ReFrame's local scheduler).
    #:
    #: :type: :class:`float`
    foreign_cores = variable(float, value=-1.0, loggable=True)

    #: Whether other work took more than ``disturbance.DISTURBED_SHARE`` of the machine's
    #: CPUs while the benchmark ran: its figures are not this machine's alone.
    #:
    #: :type: :class:`bool`
    disturbed = variable(bool, value=False, loggable=True)

    #: The launch's time limit in seconds, set before the run where neither the check, the
    #: command line (``-S time_limit=...``) nor the partition set ``time_limit``: the check's
    #: estimate of its work (``expected_work_s``) or its scale's bound, with a start-up
    #: allowance, times the load factor, capped (sitebench/run/time_limits.py). 0: not
    #: limited here.
    #: Logged.
    #:
    #: :type: :class:`int`
    launch_limit_s = variable(int, value=0, loggable=True)

    #: Whether the benchmark runs MPI: it then runs in every toolchain of the site (one
    #: ReFrame environment each); one that does not (STREAM, PARSEC, sysbench) runs once
    #: per compiler set, in the environment with the feature ``no_mpi_checks``
    #: (sitebench/sites/toolchains.py). A class attribute, a property of the check.
    uses_mpi = True

    valid_prog_environs = ["+sitebench"]
    maintainers = ["sitebench"]

    @run_before("sanity", always_last=False)
    def scheduler_ended_the_job(self):
        """A job the scheduler ended (a node lost, its time limit reached) fails with the
        scheduler's word, not with whatever its cut-short output lacks."""
        try:
            with open(os.path.join(self.stagedir, self.job.stderr)) as fp:
                stderr = fp.read()
        except (OSError, TypeError):
            stderr = ""
        reason = scheduler_verdict(self.job, stderr)
        if reason:
            raise SanityError(reason)

    @run_before("sanity", always_last=False)
    def launch_reached_its_limit(self):
        """A launch that ``timeout`` stopped at its limit fails saying so, and whether
        other work held the CPU meanwhile (the snapshots after the launch still ran)."""
        if not self.launch_limit_s:
            return
        try:
            with open(os.path.join(self.stagedir, LAUNCH_FILE)) as fp:
                status = int(fp.read().split()[2])
        except (OSError, ValueError, IndexError):
            return
        if status not in time_limits.TIMED_OUT:
            return
        share = None
        if self.measures_disturbance():
            try:
                with open(os.path.join(self.stagedir, disturbance.CPU_FILE)) as fp:
                    share = disturbance.parse(fp.read())
            except (OSError, ValueError):
                share = None
        if share is not None:
            self.foreign_cores = round(share.foreign_cores, 3)
            self.disturbed = share.disturbed
        raise SanityError(
            time_limits.timed_out_reason(
                self.launch_limit_s, self._limit_how, share, self.finished_but_not_exited()
            )
        )

    def finished_but_not_exited(self):
        """Why a launch stopped at its limit had already printed every figure (a hang in its
        exit), or "": checks that can tell from their output say it here."""
        return ""

    #: Seconds the launch takes to start (mpirun, JVMs) before any work, for its time
    #: limit; a class attribute (time_limits.STARTUP_S unless a check knows better).
    launch_startup_s = time_limits.STARTUP_S

    def expected_work_s(self):
        """Seconds of benchmark work at floor rates (time_limits.py), or None: the scale's
        bound. Checks that can count their work (sizes, iterations) say it here."""
        return None

    @run_before("run", always_last=True)
    def limit_the_launch(self):
        part = self.current_partition
        configured = rt.runtime().get_option(f"systems/0/partitions/@{part.name}/time_limit")
        if self.time_limit is not None or configured or self.job.launcher.modifier:
            return
        work = self.expected_work_s()
        how = (
            f"{work:.0f} s of work at floor rates"
            if work is not None
            else f"the {self.scale} scale's bound"
        )
        if work is None:
            work = time_limits.SCALE_BOUND_S.get(self.scale, time_limits.SCALE_BOUND_S["full"])
        factor = time_limits.load_factor() if self.measures_disturbance() else 1.0
        startup = self.launch_startup_s
        self.launch_limit_s = time_limits.launch_limit_s(work, factor, startup)
        self._limit_how = f"{how}, start-up {startup} s, {time_limits.factor_said(factor)}"
        self.job.launcher.modifier = "timeout"
        # --foreground: the launch stays in the job's process group, where the scheduler
        # ends whatever it leaves behind; TERM goes to the launcher (mpirun, srun,
        # mpj-niodev-run), which stops its ranks or daemon.
        self.job.launcher.modifier_options = [
            "--foreground",
            "-k",
            f"{time_limits.KILL_AFTER_S}s",
            f"{self.launch_limit_s}s",
        ]
        self.time_limit = self.launch_limit_s + time_limits.KILL_AFTER_S + time_limits.JOB_MARGIN_S

    @run_after("init")
    def select_by_scale(self):
        # Hardware by features, never by system name. A partition with the feature
        # `checks_listed` runs only the checks it names: `check_<name>` (e.g. check_hpl) or
        # `check_<name>_<benchmark>` (e.g. check_npb_ep), see selection_features().
        base = f"+spack +scale_{self.scale}"
        self.valid_systems = [f"{base} -checks_listed"] + [
            f"{base} +{feature}" for feature in self.selection_features()
        ]
        self.tags |= {self.scale, "sitebench"}
        if not self.uses_mpi:
            self.valid_prog_environs = ["+sitebench +no_mpi_checks"]
            # A partition with `mpi_checks_only` is another launcher on nodes that a partition
            # without it also has: there a check without MPI would measure them again.
            self.valid_systems = [f"{s} -mpi_checks_only" for s in self.valid_systems]
        self.set_site_references()

    def set_site_references(self):
        """This check's block of the site's references, as ReFrame's ``$ref`` would give it
        (the same ``$index``, values, tolerances and errors), from one parse of the file
        per process (sitebench/run/loading.py) instead of one per test instance."""
        ref_file = site_references()
        ref_prefix = rt.runtime().get_option("general/0/reference_prefix")
        if ref_prefix is None:
            ref_prefix = self.prefix
        reference = loading.check_reference(
            os.path.join(ref_prefix, ref_file), type(self).__name__
        )
        try:
            self.reference = reference
        except TypeError as err:
            raise ReferenceParseError(f"{ref_file}: {err}") from err

    @run_after("init")
    def check_energy_figures(self):
        unknown = sorted(set(self.energy_figures) - set(self.perf_variables))
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.energy_figures names {', '.join(unknown)}, which are "
                f"not figures of the check ({', '.join(self.perf_variables)})"
            )

    @run_after("setup")
    def record_toolchain(self):
        self.toolchain = self.current_environ.name

    @run_after("setup")
    def references_of_this_host(self):
        """Where the partition's references belong to one host (``extras['host_references']``):
        on another host none applies, every figure is logged and none fails on them."""
        part = self.current_partition
        if not part.extras.get("host_references"):
            return
        here = host.detect()
        self.host_fingerprint = here["id"]
        path = part.extras.get("references")
        data = {}
        if path and os.path.isfile(path):
            data = loading.parsed(path) or {}
        made_on = host.references_host(data, path)
        self.references_host = (made_on or {}).get("id", "")
        if not host.references_verdict(self.current_system.name, made_on, here)[0]:
            self.reference = {}

    @run_after("setup")
    def configure_power(self):
        part = self.current_partition
        self._power = power_config(part.fullname, part.extras.get("power"))
        self._power_error = None
        if not self._power:
            return
        self.power_source = self._power.source
        scheduler = part.scheduler.registered_name
        if self._power.source == "slurm" and scheduler not in ("slurm", "squeue"):
            raise ValueError(
                f"partition {part.fullname}: extras['power']['source'] is 'slurm' but its "
                f"scheduler is {scheduler!r}; Slurm energy needs jobs run by Slurm"
            )

    @run_before("run", always_last=True)
    def wrap_the_launch(self):
        # Innermost, right around the launch: the benchmark's own wall time, which
        # `sitebench perf harness` sets against the whole run's (the harness overhead).
        if self._power:
            self.sample_power()
        if self.measures_disturbance():
            # Outside the launch timer, which the harness's overhead figure reads.
            self.prerun_cmds = self.prerun_cmds + [disturbance.SNAPSHOT] + LAUNCH_TIMER[0]
            after = LAUNCH_TIMER[1][:2] + [disturbance.SNAPSHOT] + LAUNCH_TIMER[1][2:]
            self.postrun_cmds = after + self.postrun_cmds
            self.keep_files = self.keep_files + [LAUNCH_FILE, disturbance.CPU_FILE]
            return
        self.prerun_cmds = self.prerun_cmds + LAUNCH_TIMER[0]
        self.postrun_cmds = LAUNCH_TIMER[1] + self.postrun_cmds
        self.keep_files = self.keep_files + [LAUNCH_FILE]

    def measures_disturbance(self):
        # The job's session is the benchmark's only where ReFrame starts it on this machine.
        return self.current_partition.scheduler.registered_name == "local"

    @run_before("performance", always_last=True)
    def judge_disturbance(self):
        if self.is_dry_run():
            return
        shared = self.current_partition.extras.get("shared_cores")
        if shared:
            # Ranks share cores by the partition's making (cluster start --cpus-per-node):
            # placement and traffic are real, no timing is this machine's.
            self.disturbed = True
            self.logger.warning(
                f"{self.name}: disturbed: partition {self.current_partition.fullname} "
                f"declares {self.current_partition.processor.num_cpus} CPUs a node on "
                f"{shared} core(s); its timings are not this machine's"
            )
            return
        if not self.measures_disturbance():
            return
        try:
            with open(os.path.join(self.stagedir, disturbance.CPU_FILE)) as fp:
                share = disturbance.parse(fp.read())
        except (OSError, ValueError) as err:
            self.logger.warning(f"{self.name}: other work's CPU not measured: {err}")
            return
        self.foreign_cores = round(share.foreign_cores, 3)
        self.disturbed = share.disturbed
        if share.disturbed:
            self.logger.warning(
                f"{self.name}: disturbed: other work took {share.foreign_cores:.2f} of the "
                f"{share.cpus} CPUs while it ran; its figures are not this machine's alone"
            )

    def sample_power(self):
        # Last before the benchmark and first after it, around the checks' own commands.
        prerun, postrun = sampler_commands(self._power, self.stagedir)
        per_node = self.num_tasks_per_node
        if prerun and per_node and self.num_tasks > per_node:
            raise ValueError(
                f"extras['power']['source'] {self._power.source!r} of partition "
                f"{self.current_partition.fullname} reads one node and this run spans "
                f"several: use source 'slurm' for multi-node runs"
            )
        self.prerun_cmds = self.prerun_cmds + prerun
        self.postrun_cmds = postrun + self.postrun_cmds
        # The samples stay with the run's output, where the figures can be checked.
        self.keep_files = self.keep_files + [SAMPLES_FILE if prerun else SACCT_FILE]

    @run_before("performance", always_last=True)
    def add_energy_figures(self):
        if not self._power or self.is_dry_run():
            return
        try:
            energy = measure(self._power, self.stagedir, self.job.jobid)
        except EnergyError as err:
            self._power_error = str(err)
            return
        power = energy.power_w
        figures = {
            name: sn.make_performance_function(self.perf_variables[name] / power, unit)
            for name, unit in self.energy_figures.items()
        }
        self.perf_variables["energy_j"] = sn.make_performance_function(
            lambda: energy.energy_j, "J"
        )
        self.perf_variables["power_w"] = sn.make_performance_function(lambda: power, "W")
        for name, figure in figures.items():
            self.perf_variables[f"{name}_per_watt"] = figure

    @run_after("performance", always_last=True)
    def fail_on_power_error(self):
        # After the benchmark's own figures were logged and judged, so they are kept.
        if self._power and self._power_error:
            raise PerformanceError(
                f"no energy figures from extras['power'] source {self._power.source!r} of "
                f"partition {self.current_partition.fullname}: {self._power_error}"
            )

    def selection_features(self):
        """The partition features that select this check where a partition lists its checks:
        ``check_<name>`` (class name without ``Check``, lower case: hpl, stream, npb,
        osulatency, ...) and, for a check with a ``benchmark`` parameter, also
        ``check_<name>_<benchmark>`` (check_npb_ep, check_parsec_blackscholes)."""
        name = type(self).__name__.removesuffix("Check").lower()
        features = [f"check_{name}"]
        benchmark = getattr(self, "benchmark", None)
        if isinstance(benchmark, str) and benchmark:
            features.append(f"check_{name}_{benchmark}")
        return features

    def processor_cores(self):
        proc = self.current_partition.processor
        if not proc.num_cores:
            raise ValueError(
                f"partition {self.current_partition.fullname} has no processor topology: "
                f"let ReFrame detect it (reframe --detect-host-topology) or set 'processor'"
            )
        return proc.num_cores

    def binary(self, build, relpath):
        """Path of a file in a build fixture's prefix; records the concrete spec."""
        self.concrete_spec = build.concrete_spec()
        return os.path.join(build.install_prefix(), relpath)

    def stdout_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stdout))) as fp:
            return fp.read()


# The checks inherit ReFrame's `variables` alias without its per-instance deprecation walk.
loading.without_deprecated_aliases(SitebenchBenchmark)


def scheduler_verdict(job, stderr=""):
    """Why the scheduler ended ``job`` (its state, else slurmstepd's line in ``stderr``)."""
    return slurm.verdict(
        getattr(job, "state", None), job.jobid, job.nodelist, stderr, job.time_limit
    )


def site_references():
    """The references file of the current system (an absolute path)."""
    for part in rt.runtime().system.partitions:
        path = part.extras.get("references")
        if path:
            return path
    # ReFrame looks it up under $RFM_REFERENCE_PREFIX or the check's directory.
    return "references.yaml"

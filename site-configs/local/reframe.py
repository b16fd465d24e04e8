"""ReFrame configuration of the local site: this machine, one partition.

Nothing to edit: the processor topology is the one `sitebench detect` stored
in topology.json (ReFrame detects it itself when that file is absent), the
memory is read here, and the scales run are taken from $SITEBENCH_SCALES
(default: quick). References: references.yaml next to this file (partition extras).
Programming environments: one per toolchain `sitebench detect` found
(toolchains.yaml next to this file; $SITEBENCH_TOOLCHAINS selects some).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCALES = os.environ.get("SITEBENCH_SCALES", "quick").split(",")

# Plain `reframe -C site-configs/local/reframe.py` works without installing sitebench.
sys.path.insert(0, os.path.join(ROOT, "src"))
from sitebench.run import launchers  # noqa: E402
from sitebench.sites import toolchains  # noqa: E402

ENVIRONS, ENVIRONMENTS = toolchains.for_reframe(
    "local",
    config_dir=HERE,
    # Open MPI refuses to start as root without these (containers, CI).
    env_vars=[["OMPI_ALLOW_RUN_AS_ROOT", "1"], ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"]],
)
# Toolchains detected behind environment modules load them (toolchains.yaml's `modules:`):
# job scripts purge, then load the environment's modules. Else nomod.
MODULES = toolchains.modules_for_reframe("local", config_dir=HERE)


def _processor():
    try:
        with open(os.path.join(HERE, "topology.json")) as fp:
            return json.load(fp)
    except FileNotFoundError:
        return {}  # ReFrame detects it


_partition = {
    "name": "default",
    "descr": "this machine, one job at a time so benchmarks do not disturb each other",
    "scheduler": "local",
    # ReFrame's mpirun, giving a single-task check the cores it asked for and a flexible
    # one a task count that is the same under Open MPI and MPICH (sitebench/run/launchers.py).
    "launcher": launchers.NAME,
    "environs": ENVIRONS,
    "max_jobs": 1,
    "prepare_cmds": MODULES["prepare_cmds"],
    "features": ["spack", "mpi", "openmp"] + [f"scale_{s.strip()}" for s in SCALES],
    "extras": {
        "spack_environment": os.path.join(ROOT, "environments", "local"),
        # SITEBENCH_REFERENCES: another file, e.g. an empty one where only sanity is tested.
        "references": os.environ.get("SITEBENCH_REFERENCES")
        or os.path.join(HERE, "references.yaml"),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        # `local` is this machine: its references and history apply to this host only
        # (src/sitebench/sites/host.py; another site's partition opts in the same way).
        "host_references": True,
    },
}
if _processor():
    _partition["processor"] = _processor()

#: Every site's general settings (the local site's entry adds its polling to them).
_GENERAL = {"topology_prefix": os.path.join(ROOT, ".sitebench", "reframe-topology")}

site_configuration = {
    "systems": [
        {
            "name": "local",
            "descr": "the machine sitebench runs on (embedded default site)",
            "hostnames": [".*"],
            "modules_system": MODULES["modules_system"],
            "partitions": [_partition],
        }
    ],
    "environments": ENVIRONMENTS,
    "general": [
        {
            # Only this site's jobs, each polled by a wait on its process, every 20 ms: a job's
            # end is noticed within 20 ms, not ReFrame's decaying 0.1 s or more (the checks'
            # jobs outside their launches: 7.2 s -> 3.4 s of a 60-job quick suite). Sites
            # that copy these settings (local-slurm, onboarded ones) fall through to the entry
            # below and keep ReFrame's default rates: there each poll is squeue or sacct.
            "target_systems": ["local"],
            **_GENERAL,
            "poll_rate_max": 50,
            "poll_rate_min": 50,
        },
        _GENERAL,
    ],
    "logging": [
        {
            # ReFrame's logger passes everything by default, and its log file handler formats
            # each record with all of the check's variables, on the CPUs the benchmark runs
            # on: 3 debug2 and 1 debug record a poll. Quick suites, one round each: at debug,
            # the benchmarks' own time fell from 199.5 to 195.3 s; at verbose, ReFrame's
            # process used 5.3 s of CPU, not 13.0 s, and the benchmarks took 189.2 s. To debug
            # a check, SITEBENCH_REFRAME_LOG_LEVEL=debug2 logs every record again.
            "level": os.environ.get("SITEBENCH_REFRAME_LOG_LEVEL", "verbose"),
            "handlers_perflog": [
                {
                    "type": "filelog",
                    "prefix": "%(check_system)s/%(check_partition)s",
                    "level": "info",
                    "format": "%(check_result)s|%(check_job_completion_time)s|%(check_#ALL)s",
                    "ignore_keys": [
                        "check_build_locally",
                        "check_build_time_limit",
                        "check_display_name",
                        "check_executable_opts",
                        "check_hashcode",
                        "check_keep_files",
                        "check_local",
                        "check_maintainers",
                        "check_max_pending_time",
                        "check_outputdir",
                        "check_prebuild_cmds",
                        "check_prefix",
                        "check_prerun_cmds",
                        "check_postbuild_cmds",
                        "check_postrun_cmds",
                        "check_readonly_files",
                        "check_sourcepath",
                        "check_sourcesdir",
                        "check_stagedir",
                        "check_strict_check",
                        "check_variables",
                        "check_build_system",
                        "check_exclusive_access",
                        "check_use_multithreading",
                    ],
                    "format_perfvars": (
                        "%(check_perf_value)s|%(check_perf_unit)s|%(check_perf_ref)s|"
                        "%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|"
                    ),
                    "datefmt": "%FT%T%:z",
                    "append": True,
                }
            ],
        }
    ],
}

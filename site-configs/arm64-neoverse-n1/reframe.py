"""ReFrame configuration of the site 'arm64-neoverse-n1': an aarch64 Debian root under QEMU.

The site is an arm64 Debian 12 root run on an x86_64 machine through QEMU user emulation
(``./sitebench qemu-run --site arm64-neoverse-n1``, README.md next to this file). ReFrame
runs inside the root, where it would detect the emulator's view of the CPU (QEMU shows the
host's x86 /proc/cpuinfo, so archspec finds a generic aarch64): the processor is stated
instead, from topology.json — a Neoverse N1 (``arch: neoverse_n1``) with the host's 2 CPUs.
QEMU is told to emulate that CPU (QEMU_CPU from site.yaml), so a binary using SVE, which a
Neoverse N1 lacks, dies with SIGILL.

One partition, which runs only the checks listed in its features (``checks_listed`` and
``check_<name>``, see reframe-checks/README.md): HPL, STREAM and NPB EP. Timings are the
emulator's; references.yaml holds none, the benchmarks' own verification is what is judged.
"""

import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The checkout is mounted at the same path in the root: ReFrame there imports sitebench's
# launcher as the local site's configuration does.
sys.path.insert(0, os.path.join(ROOT, "src"))
from sitebench.run import launchers  # noqa: E402

SITE = os.path.basename(HERE)
STATE = os.environ.get("SITEBENCH_STATE_DIR") or os.path.join(ROOT, ".sitebench")
SCALES = os.environ.get("SITEBENCH_SCALES", "quick").split(",")

with open(os.path.join(HERE, "topology.json")) as _fp:
    _processor = json.load(_fp)
with open(os.path.join(HERE, "site.yaml")) as _fp:
    _emulation = (yaml.safe_load(_fp) or {}).get("emulation") or {}

site_configuration = {
    "systems": [
        {
            "name": SITE,
            "descr": "aarch64 Neoverse N1 (stated), an arm64 Debian 12 root under QEMU user "
            "emulation: builds and verification are real, timings are the emulator's",
            "hostnames": [".*"],
            "modules_system": "nomod",
            "partitions": [
                {
                    "name": "default",
                    "descr": "the emulated node, one job at a time",
                    "scheduler": "local",
                    # ReFrame's mpirun, giving a single-task check (STREAM) the cores it
                    # asked for and a flexible one a task count, as on the local site
                    # (sitebench/run/launchers.py).
                    "launcher": launchers.NAME,
                    "environs": ["gnu"],
                    "max_jobs": 1,
                    "features": ["spack", "mpi", "openmp", "emulated", "checks_listed"]
                    # What runs here: HPL, STREAM and the EP kernel of NPB.
                    + ["check_hpl", "check_stream", "check_npb_ep"]
                    + [f"scale_{s.strip()}" for s in SCALES],
                    "processor": _processor,
                    "extras": {
                        "spack_environment": os.path.join(ROOT, "environments", SITE),
                        "references": os.environ.get("SITEBENCH_REFERENCES")
                        or os.path.join(HERE, "references.yaml"),
                        # The memory the emulated programs get: the host's.
                        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                    },
                }
            ],
        }
    ],
    "environments": [
        {
            # The site's one toolchain (site.yaml), GCC with Open MPI; its environment
            # keeps the name of the runs stored before toolchains.
            "name": "gnu",
            "features": ["sitebench", "openmp", "mpi", "mpi_openmpi", "no_mpi_checks"],
            "extras": {
                "mpi": "openmpi",
                "compilers": {"c": "gcc", "cxx": "gcc", "fortran": "gcc"},
                "launcher": "mpirun",
                # ReFrame's convention for '+openmp' checks (src/sitebench/sites/
                # reframe_conventions.py): the flag they add to their cflags.
                "omp_flag": "-fopenmp",
            },
            "cc": "mpicc",
            "cxx": "mpicxx",
            "ftn": "mpifort",
            "env_vars": [
                ["OMPI_ALLOW_RUN_AS_ROOT", "1"],
                ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"],
                # Open MPI's shared-memory single copy uses process_vm_readv, which
                # qemu-user does not implement (errno 38 on every message otherwise).
                ["OMPI_MCA_btl_vader_single_copy_mechanism", "none"],
                # The CPU QEMU emulates for every benchmark (also when ReFrame is run by hand).
                ["QEMU_CPU", _emulation.get("qemu_cpu", "neoverse-n1")],
            ],
        }
    ],
    "general": [{"topology_prefix": os.path.join(STATE, "reframe-topology")}],
}


def _local_logging():
    """The local site's perflog handler (same format, so the store reads both alike)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "sitebench_local_site_config", os.path.join(ROOT, "site-configs", "local", "reframe.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration["logging"]


site_configuration["logging"] = _local_logging()

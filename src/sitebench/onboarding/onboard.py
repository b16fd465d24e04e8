"""A new site in one command: ``./sitebench onboard NAME [--slurm] [--mirror URL]``.

Run on the machine itself (or, with ``--slurm``, on a cluster's login node), it writes

* ``site-configs/<name>/``: ``reframe.py`` (the partitions as data: one local partition, or
  one per Slurm partition read from ``sinfo``/``scontrol``; one programming environment per
  toolchain), ``site.yaml`` (the toolchains proposed from what was found:
  :func:`sitebench.discovery.local_site.propose_toolchains`), ``spack/packages.yaml`` (the
  compilers, MPI, BLAS, MariaDB and build tools found as Spack externals, the STREAM size),
  ``spack/toolchains.yaml`` and ``spack/definitions.yaml`` (the toolchains for Spack:
  :func:`sitebench.sites.toolchains.spack_files`), ``spack/mirrors.yaml`` (the source
  mirror, if any), ``topology.json`` (ReFrame's detection), an empty ``references.yaml`` and
  a ``README.md`` saying what each file is for;
* ``environments/<name>/spack.yaml``: the local site's specs and settings on that config.

Detection is a :class:`Detection`: made by running the tools (:meth:`Detection.from_machine`)
or loaded from recorded outputs (:meth:`Detection.load`, the tests). Both directories are
built beside their final place and renamed into it: a failure leaves nothing half-made.
An existing site is never overwritten, and a machine where no toolchain (C, C++ and
Fortran compilers and an MPI with its launcher) is found is refused before anything is written.
"""

import copy
import json
import os
import pprint
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import yaml

from sitebench.sites import modules, toolchains
from sitebench.discovery import local_site, module_externals
from sitebench.onboarding import pairing
from sitebench.spack import buildcache

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.common.names import check_name

#: ``sinfo`` fields, one line per partition and node shape: partition, nodes, CPUs per node,
#: sockets:cores:threads, memory per node (MB), availability, time limit.
SINFO_ARGS = ["sinfo", "-h", "-o", "%R|%D|%c|%z|%m|%a|%l"]
SCONTROL_ARGS = ["scontrol", "show", "partition", "-o"]
TEMPLATE = paths.ROOT / "site-configs" / "TEMPLATE-README.md"

#: Recorded detection, one file per tool output (tests/fixtures/onboarding/).
FILES = {
    "packages": "packages.yaml",  # spack compiler find + spack external find, as Spack wrote it
    "extras": "extra-externals.yaml",  # local_site.extra_externals()
    "topology": "topology.json",  # reframe --detect-host-topology
    "meminfo": "meminfo",  # /proc/meminfo
    "sinfo": "sinfo.txt",  # SINFO_ARGS
    "scontrol": "scontrol.txt",  # SCONTROL_ARGS
    "hostname": "hostname",
    "modules": "modules.yaml",  # the modules system, externals found behind modules, notes
}


@dataclass
class Detection:
    """What the detectors found on the machine; nothing here is interpreted yet."""

    packages: dict  # packages: of Spack's detection
    extras: dict  # externals Spack cannot detect (autoconf-archive, netlib-lapack, mariadb)
    topology: dict  # ReFrame's host topology
    meminfo: str  # /proc/meminfo
    sinfo: str = ""  # sinfo output (Slurm sites)
    scontrol: str = ""  # scontrol show partition -o
    hostname: str = field(default_factory=socket.gethostname)
    #: {"system": modules: setting, "packages": externals behind modules, "notes": [...],
    #: "meta": meta-modules and what they load (module_externals.detect)}
    modules: dict = field(default_factory=dict)

    @classmethod
    def from_machine(cls, spack, slurm=False):
        """Run the detectors here: Spack, ReFrame, /proc/meminfo, (slurm) the scheduler and
        the environment modules (:mod:`sitebench.discovery.module_externals`)."""
        sinfo = scontrol = ""
        if slurm:  # first: a login node without Slurm fails before the slow steps
            sinfo, scontrol = _run_tool(SINFO_ARGS), _run_tool(SCONTROL_ARGS)
        return cls(
            modules=detect_modules(spack),
            packages=local_site.spack_external_find(spack),
            extras=local_site.extra_externals(),
            topology=local_site.detect_topology(),
            meminfo=Path("/proc/meminfo").read_text(),
            sinfo=sinfo,
            scontrol=scontrol,
        )

    @classmethod
    def load(cls, directory):
        """Recorded outputs (see tests/fixtures/onboarding/README.md)."""
        d = Path(directory)

        def text(key):
            path = d / FILES[key]
            return path.read_text() if path.is_file() else ""

        return cls(
            packages=(yaml.safe_load(text("packages")) or {}).get("packages", {}),
            extras=yaml.safe_load(text("extras")) or {},
            topology=json.loads(text("topology")),
            meminfo=text("meminfo"),
            sinfo=text("sinfo"),
            scontrol=text("scontrol"),
            hostname=text("hostname").strip() or "recorded",
            modules=yaml.safe_load(text("modules")) or {},
        )

    def save(self, directory):
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / FILES["packages"]).write_text(yaml.safe_dump({"packages": self.packages}))
        (d / FILES["extras"]).write_text(yaml.safe_dump(self.extras, sort_keys=False))
        (d / FILES["topology"]).write_text(json.dumps(self.topology, indent=2) + "\n")
        (d / FILES["meminfo"]).write_text(self.meminfo)
        (d / FILES["hostname"]).write_text(self.hostname + "\n")
        for key in ("sinfo", "scontrol"):
            if getattr(self, key):
                (d / FILES[key]).write_text(getattr(self, key))
        if self.modules:
            (d / FILES["modules"]).write_text(yaml.safe_dump(self.modules, sort_keys=False))

    def memory_bytes(self):
        match = re.search(r"^MemTotal:\s+(\d+)\s*kB", self.meminfo, re.M)
        return int(match.group(1)) * 1024 if match else None


def detect_modules(spack):
    """What the environment modules of this shell offer: {} where there are none
    (:func:`sitebench.discovery.module_externals.from_shell`)."""
    system, packages, notes, metas = module_externals.from_shell(spack)
    if system is None:
        return {}
    found = {"system": modules.as_settings(system), "packages": packages, "notes": notes}
    return found | ({"meta": metas} if metas else {})


def _run_tool(args):
    if not shutil.which(args[0]):
        raise SitebenchError(
            f"`{args[0]}` is not on PATH: cannot read the Slurm partitions",
            "run onboarding on the cluster's login node (with SLURM_CONF set if needed), "
            "or leave out --slurm",
        )
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SitebenchError(
            f"`{' '.join(args)}` failed: {proc.stderr.strip()[-500:]}",
            "check that slurmctld answers (`sinfo`), then rerun",
        )
    return proc.stdout


# -- Slurm partitions ------------------------------------------------------------------


@dataclass
class SlurmPartition:
    name: str
    nodes: int
    cpus: int  # per node
    sockets: int
    cores: int  # per socket
    threads: int  # per core
    memory_mb: int  # per node
    available: str
    time_limit: str
    default: bool = False
    state: str = "UP"
    shapes: int = 1  # node shapes seen (>1: heterogeneous, the smallest is used)


def parse_slurm(sinfo, scontrol=""):
    """Partitions of ``sinfo -h -o '%R|%D|%c|%z|%m|%a|%l'`` and ``scontrol show partition -o``."""
    parts = {}
    for lineno, line in enumerate(sinfo.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.strip().split("|")
        try:
            name, nodes, cpus, sct, memory, avail, limit = fields
            sockets, cores, threads = (int(x) for x in sct.split(":"))
            row = SlurmPartition(
                name,
                int(nodes),
                int(cpus.rstrip("+")),
                sockets,
                cores,
                threads,
                int(memory.rstrip("+")),
                avail,
                limit,
            )
        except ValueError:
            raise SitebenchError(
                f"sinfo line {lineno} is not '%R|%D|%c|%z|%m|%a|%l': {line!r}",
                f"check `{' '.join(SINFO_ARGS)}` by hand",
            ) from None
        if name in parts:  # another node shape in the same partition: keep the smallest
            old = parts[name]
            smaller = row if row.cpus < old.cpus else old
            smaller.nodes = old.nodes + row.nodes
            smaller.memory_mb = min(old.memory_mb, row.memory_mb)
            smaller.shapes = old.shapes + 1
            parts[name] = smaller
        else:
            parts[name] = row
    for line in scontrol.splitlines():
        fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        part = parts.get(fields.get("PartitionName"))
        if part:
            part.default = fields.get("Default") == "YES"
            part.state = fields.get("State", part.state)
    return list(parts.values())


# -- what is written -------------------------------------------------------------------


class _Code(str):
    """A name written into reframe.py as code, not as a string (``pprint`` uses its repr)."""

    def __repr__(self):
        return str(self)


#: Every partition's programming environments: the site's toolchains (see REFRAME_PY).
ENVIRONS = _Code("ENVIRONS")


def _spec_of(packages, name):
    ext = (packages.get(name) or {}).get("externals") or []
    return re.match(r"[^~+\s]+", ext[0]["spec"]).group(0) if ext else None


def site_packages(detection):
    """``packages:`` of the site: Spack's detection completed as the local site's is."""
    found, _notes = module_externals.merge(
        copy.deepcopy(detection.packages), copy.deepcopy(detection.modules.get("packages") or {})
    )
    packages = local_site.complete_packages(found, copy.deepcopy(detection.extras))
    # A virtual without a provider found here must stay buildable: Spack builds one.
    for virtual, providers, _hint in local_site.TOOLCHAIN:
        if not local_site.found_providers(packages, providers):
            for name in (virtual, "lapack") if virtual == "blas" else (virtual,):
                packages.pop(name, None)
    packages["stream"] = {"require": [local_site.stream_requirement(detection.topology)]}
    return packages


def _processor_from_slurm(part, topology):
    """A node's processor from sinfo's counts, with this (login) node's microarchitecture."""
    proc = {k: topology[k] for k in ("arch", "vendor", "model", "platform") if k in topology}
    proc.update(
        num_cpus=part.cpus,
        num_cpus_per_core=part.threads,
        num_sockets=part.sockets,
        num_cpus_per_socket=part.cores * part.threads,
    )
    return proc


def _same_shape(part, topology):
    return (
        topology.get("num_cpus") == part.cpus
        and topology.get("num_sockets") == part.sockets
        and topology.get("num_cpus_per_core") == part.threads
    )


def partitions(detection, slurm):
    """The partitions of reframe.py as data (scales and paths are added by reframe.py)."""
    if not slurm:
        return [
            {
                "name": "default",
                "descr": "this machine, one job at a time so benchmarks do not disturb each other",
                "scheduler": "local",
                # ReFrame's mpirun, giving a single-task check its cores and a flexible one a
                # task count alike under Open MPI and MPICH (sitebench/run/launchers.py).
                "launcher": "sitebench-mpirun",
                "environs": ENVIRONS,
                "max_jobs": 1,
                "features": ["spack", "mpi", "openmp"],
                "processor": "topology.json",
                "extras": {"memory_bytes": detection.memory_bytes()},
            }
        ]
    found = parse_slurm(detection.sinfo, detection.scontrol)
    if not found:
        raise SitebenchError(
            "sinfo lists no partition", "check `sinfo` on this node; or onboard without --slurm"
        )
    result = []
    for part in found:
        result.append(
            {
                "name": part.name,
                "descr": f"Slurm partition {part.name}: {part.nodes} nodes of {part.cpus} CPUs",
                "scheduler": "slurm",
                "launcher": "srun",
                "access": [f"--partition={part.name}"],
                "environs": ENVIRONS,
                "max_jobs": 1,
                "features": ["spack", "mpi", "openmp", "slurm"],
                "processor": (
                    "topology.json"
                    if _same_shape(part, detection.topology)
                    else _processor_from_slurm(part, detection.topology)
                ),
                "extras": {"memory_bytes": part.memory_mb * 1024 * 1024, "nodes": part.nodes},
            }
        )
    return result


REFRAME_PY = '''"""ReFrame configuration of the site '${site}'.

Written by `./sitebench onboard` on ${host} (${date}). The partitions are data: edit
PARTITIONS below (see site-configs/README.md, "A partition's contract with the checks");
the rest is the same for every onboarded site.

"processor": "topology.json" reads this site's topology.json (ReFrame's detection); the scales
run come from $$SITEBENCH_SCALES (default quick). Programming environments: one per toolchain
of site.yaml (`toolchains:`; $$SITEBENCH_TOOLCHAINS selects some), each partition's
"environs" is all of them (ENVIRONS) or a list of their names. Perflogs are the local site's.
"""

import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SITE = ${site_repr}
SCALES = os.environ.get("SITEBENCH_SCALES", "quick").split(",")

# Plain `reframe -C site-configs/${site}/reframe.py` works without installing sitebench.
sys.path.insert(0, os.path.join(ROOT, "src"))
from sitebench.run import launchers  # noqa: E402,F401 (registers sitebench-mpirun)
from sitebench.sites import toolchains  # noqa: E402

ENVIRONS, ENVIRONMENTS = toolchains.for_reframe(
    SITE,
    config_dir=HERE,
    # Open MPI refuses to start as root without these (containers, CI).
    env_vars=[["OMPI_ALLOW_RUN_AS_ROOT", "1"], ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"]],
)
# The modules system of site.yaml (`modules:`), or nomod; job scripts purge, then load each
# environment's modules.
MODULES = toolchains.modules_for_reframe(SITE, config_dir=HERE)

PARTITIONS = ${partitions}


def _local():
    """The local site's configuration: its perflog format is what the results store reads.
    Only its general and logging settings are used: its toolchains and modules are not
    read (the local site need not be detected where this site runs)."""
    spec = importlib.util.spec_from_file_location(
        "sitebench_local_site", os.path.join(ROOT, "site-configs", "local", "reframe.py")
    )
    module = importlib.util.module_from_spec(spec)
    for_reframe, modules_for = toolchains.for_reframe, toolchains.modules_for_reframe
    toolchains.for_reframe = lambda *args, **kwargs: ([], [])
    toolchains.modules_for_reframe = lambda *args, **kwargs: {
        "modules_system": "nomod",
        "prepare_cmds": [],
    }
    try:
        spec.loader.exec_module(module)
    finally:
        toolchains.for_reframe, toolchains.modules_for_reframe = for_reframe, modules_for
    return module.site_configuration


def _partition(spec):
    part = dict(spec)
    part["features"] = list(spec["features"]) + [f"scale_{s.strip()}" for s in SCALES]
    part["prepare_cmds"] = MODULES["prepare_cmds"] + list(spec.get("prepare_cmds", []))
    part["extras"] = {
        "spack_environment": os.path.join(ROOT, "environments", SITE),
        # SITEBENCH_REFERENCES: another file, e.g. an empty one where only sanity is tested.
        "references": os.environ.get("SITEBENCH_REFERENCES")
        or os.path.join(HERE, "references.yaml"),
        **spec.get("extras", {}),
    }
    if spec.get("processor") == "topology.json":
        with open(os.path.join(HERE, "topology.json")) as fp:
            part["processor"] = json.load(fp)
    return part


_base = _local()
site_configuration = {
    "systems": [
        {
            "name": SITE,
            "descr": ${descr_repr},
            "hostnames": [".*"],
            "modules_system": MODULES["modules_system"],
            "partitions": [_partition(p) for p in PARTITIONS],
        }
    ],
    "environments": ENVIRONMENTS,
    "general": _base["general"],
    "logging": _base["logging"],
}
'''

REFERENCES = """\
# References of the site '{site}': empty until the site has runs to take them from.
# After 3 or more runs (./sitebench run --site {site}):
#   ./sitebench references {site}            # shows the proposed references as a diff
#   ./sitebench references {site} --write    # writes them here
# Format and rule: site-configs/README.md ("references.yaml", "References from history").
# Until then every figure is logged without a reference and none fails.
{{}}
"""


def environment_yaml(site):
    """environments/<site>/spack.yaml: the local site's specs and settings on <site>'s config."""
    local = yaml.safe_load((paths.ROOT / "environments" / "local" / "spack.yaml").read_text())
    spack = dict(local["spack"])
    spack["include"] = [f"../../site-configs/{site}/spack"]
    return (
        f"# The site '{site}' (written by `./sitebench onboard`): the local site's specs and\n"
        f"# settings on this site's Spack config, site-configs/{site}/spack/. spack.lock is\n"
        f"# made by `./sitebench run --site {site}`; commit it with this file.\n"
        + yaml.safe_dump({"spack": spack}, sort_keys=False)
    )


def mirror_url(mirror):
    """A Spack mirror URL from --mirror or $SITEBENCH_MIRROR (a path becomes file://)."""
    mirror = mirror or os.environ.get("SITEBENCH_MIRROR")
    if not mirror:
        return None
    if "://" in mirror:
        return mirror
    path = Path(mirror).expanduser().resolve()
    if not path.is_dir():
        raise SitebenchError(
            f"mirror {mirror} is not a directory",
            "give a Spack source mirror (made with `./sitebench mirror DIR`) or a URL",
        )
    return f"file://{path}"


# -- the report --------------------------------------------------------------------------


@dataclass
class Report:
    site: str
    site_dir: Path
    env_dir: Path
    found: list
    review: list

    def render(self):
        lines = [f"site '{self.site}' onboarded:"]
        lines += [f"  {paths.shown(self.site_dir)}/", f"  {paths.shown(self.env_dir)}/", ""]
        lines += ["found:"] + [f"  {item}" for item in self.found] + [""]
        lines += ["review:"] + [f"  - {item}" for item in self.review] + [""]
        lines += [f"next: ./sitebench run --site {self.site}"]
        return "\n".join(lines)


def _gib(n):
    return f"{n / 2**30:.1f} GiB" if n else "unknown"


def findings(site, detection, packages, parts, mirror, slurm, chosen=(), notes=()):
    """(found, review) lines of the report; ``chosen`` the toolchains proposed, ``notes``
    what :func:`~sitebench.discovery.local_site.propose_toolchains` said about the others."""
    raw = detection.packages
    compilers = [_spec_of(raw, n) for n in local_site.found_compilers(raw)]
    mpi = [_spec_of(raw, n) for n in local_site.found_providers(raw, ("openmpi", "mpich"))]
    blas = [_spec_of(raw, n) for n in local_site.found_providers(raw, ("openblas",))]
    mariadb = _spec_of(packages, "mariadb")
    reference = _spec_of(packages, "netlib-lapack")
    topo = detection.topology
    stream = re.search(r"stream_array_size=(\d+)", packages["stream"]["require"][0]).group(1)
    found = [
        f"compilers: {', '.join(compilers) or 'none'}",
        f"MPI: {', '.join(mpi) or 'none'}",
        f"BLAS: {', '.join(blas) or 'none'}"
        + (f" (reference BLAS: {reference})" if reference else ""),
        f"MariaDB: {mariadb or 'none'}",
        f"CPU: {topo.get('arch')} {topo.get('model', '')}, {topo.get('num_cpus')} CPUs "
        f"({topo.get('num_sockets')} sockets x {topo.get('num_cpus_per_socket')} CPUs, "
        f"{topo.get('num_cpus_per_core')} per core); STREAM arrays of {int(stream):,} elements",
        f"memory: {_gib(detection.memory_bytes())}",
        f"source mirror: {mirror or 'none'}",
    ]
    system = detection.modules.get("system")
    if system:
        behind = [
            f"{ext['spec'].split()[0]} ({', '.join(ext['modules'])})"
            for cfg in (detection.modules.get("packages") or {}).values()
            for ext in cfg.get("externals") or []
        ]
        found.append(
            f"modules: {system['system']} ({system['command']}); behind modules: "
            f"{', '.join(behind) or 'no compiler, MPI or BLAS'}"
        )
    for tc in chosen:
        found.append(
            f"toolchain {tc.name}: c {tc.compilers['c']}, cxx {tc.compilers['cxx']}, "
            f"fortran {tc.compilers['fortran']}, mpi {tc.mpi}"
            + (f", loads: {tc.load_command()}" if tc.loads_modules else "")
            + ("" if tc.default else " (not default: --toolchain NAME runs it)")
        )
    for part in parts:
        extras = part["extras"]
        found.append(
            f"partition {part['name']}: scheduler {part['scheduler']}, launcher "
            f"{part['launcher']}"
            + (f", {extras['nodes']} nodes" if "nodes" in extras else "")
            + f", {_gib(extras.get('memory_bytes'))} per node"
        )
    review = [f"toolchains: {note}" for note in notes]
    review += [f"modules: {note}" for note in detection.modules.get("notes") or []]
    if system and any(tc.loads_modules for tc in chosen):
        loader = modules.from_settings({"modules": system}, "")
        missing = modules.reframe_command_problem(loader)
        if missing:
            review.append(f"modules: {missing[0]}; {missing[1]}")
        elif loader.kind == "envmod" and not shutil.which("modulecmd"):
            review.append(
                f"modules: `modulecmd`, which ReFrame runs, is not on PATH: the site's "
                f"reframe.py gives ReFrame {loader.command} (modules.command in site.yaml) "
                "as `modulecmd`; nothing to add to PATH"
            )
    if chosen:
        review.append(
            f"toolchains in site-configs/{site}/site.yaml: every benchmark is built and run "
            f"with each ({', '.join(tc.name for tc in chosen)}); drop or add some there"
        )
    for farms in buildcache.externals_dirs():
        moved = [
            name
            for name in ("openmpi", "mpich")
            for ext in (packages.get(name) or {}).get("externals") or []
            if Path(str(ext.get("prefix", ""))).parent == farms
        ]
        if moved:
            shared = farms == buildcache.externals_dirs()[0]
            review.append(
                f"{', '.join(moved)}: in /usr behind Debian's alternatives, given a prefix of "
                f"its own under {paths.shown(farms)}/ (spack/packages.yaml), "
                + (
                    "the machine's: every user's builds hash alike and share binaries"
                    if shared
                    else "this user's own, since the machine's "
                    f"{buildcache.externals_dirs()[0]} could not be used: other users' "
                    "builds hash apart (make it as root, mode 0755, and onboard again)"
                )
            )
    if not blas:
        review.append(
            "no BLAS found: HPL will build OpenBLAS from source (Debian: apt-get install "
            "libopenblas-dev, then onboard again)"
        )
    if not mariadb:
        review.append(
            "no MariaDB found: sysbench will build MariaDB from source, a long build "
            "(Debian: apt-get install mariadb-server libmariadb-dev libmariadb-dev-compat)"
        )
    if not mirror:
        review.append(
            "no source mirror: Spack downloads the sources (offline: --mirror DIR or "
            "SITEBENCH_MIRROR)"
        )
    if slurm:
        for part in parts:
            if isinstance(part["processor"], dict):
                review.append(
                    f"partition {part['name']}: processor from sinfo's counts with this "
                    f"login node's microarchitecture ({topo.get('arch')}); check it on a "
                    f"compute node (reframe --detect-host-topology) and put it in reframe.py"
                )
        review.append(
            "launcher srun: Open MPI needs Slurm's PMIx (set SLURM_MPI_TYPE=pmix in the "
            "environment's env_vars) or use launcher 'mpirun'; add --account=... to access "
            "if the site needs one"
        )
        for part in parse_slurm(detection.sinfo, detection.scontrol):
            if part.state != "UP" or part.available != "up":
                review.append(f"partition {part.name} is {part.state}/{part.available}")
            if part.shapes > 1:
                review.append(
                    f"partition {part.name} has {part.shapes} node shapes: the smallest "
                    f"({part.cpus} CPUs) is described"
                )
    review.append(
        f"references.yaml is empty: after 3+ runs, `./sitebench references {site} --write`"
    )
    review.append(
        f"commit site-configs/{site}/ and environments/{site}/ (and spack.lock after the "
        f"first run); spack/packages.yaml names this machine's paths"
    )
    return found, review


# -- onboarding ------------------------------------------------------------------------


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


SITE_YAML = """\
# The site '{site}' (written by `./sitebench onboard` on {host}, {date}).
# Its toolchains: every benchmark is built and run with each (compilers by Spack package
# name: gcc, llvm for Clang; the MPI an external of spack/packages.yaml). Proposed from what
# was found here; edit freely, then `./sitebench validate {site}` (it rewrites
# spack/toolchains.yaml and spack/definitions.yaml). See site-configs/README.md.
{modules}toolchains:
{toolchains}"""

MODULES_YAML = """\
# The environment modules system the toolchains' modules are loaded with (builds and runs
# purge first, then load exactly a toolchain's modules).
"""


def site_yaml(site, host, date, chosen, modules_system=None):
    listed = "".join(
        "- " + yaml.safe_dump(tc.as_dict(), default_flow_style=True, sort_keys=False, width=200)
        for tc in chosen
    )
    system = ""
    if modules_system and any(tc.loads_modules for tc in chosen):
        system = MODULES_YAML + yaml.safe_dump({"modules": modules_system}, sort_keys=False)
    return SITE_YAML.format(site=site, host=host, date=date, toolchains=listed, modules=system)


def _write_site(tmp, site, detection, packages, parts, mirror, slurm, chosen):
    host, date = detection.hostname, time.strftime("%Y-%m-%d", time.gmtime())
    descr = f"Slurm cluster onboarded from {host}" if slurm else f"the machine {host} (onboarded)"
    _write(
        tmp / "reframe.py",
        Template(REFRAME_PY).substitute(
            site=site,
            site_repr=repr(site),
            host=host,
            date=date,
            descr_repr=repr(descr),
            partitions=pprint.pformat(parts, indent=4, width=95, sort_dicts=False),
        ),
    )
    _write(
        tmp / "spack" / "packages.yaml",
        f"# Detected on {host} by `./sitebench onboard` ({date}): Spack's compiler and\n"
        f"# external detection, plus MariaDB, autoconf-archive and the reference BLAS.\n"
        f"# STREAM arrays: {local_site.STREAM_CACHE_FACTOR} x last-level cache. Edit freely.\n"
        + yaml.safe_dump({"packages": packages}, sort_keys=False),
    )
    _write(tmp / "site.yaml", site_yaml(site, host, date, chosen, detection.modules.get("system")))
    toolchains.write_spack_files(chosen, tmp / "spack")
    if mirror:
        mirrors = {
            "mirrors": {f"sitebench-{site}": {"url": mirror, "source": True, "binary": False}}
        }
        _write(
            tmp / "spack" / "mirrors.yaml",
            "# The site's source mirror (`./sitebench onboard --mirror`).\n"
            + yaml.safe_dump(mirrors, sort_keys=False),
        )
    _write(tmp / "topology.json", json.dumps(detection.topology, indent=2) + "\n")
    _write(tmp / "references.yaml", REFERENCES.format(site=site))
    write_readme(tmp, site, host, date)


def write_readme(tmp, site, host, date):
    text = Template(TEMPLATE.read_text()).safe_substitute(site=site, host=host, date=date)
    _write(tmp / "README.md", text)


def _fill(final, build):
    """Build ``final`` in a temporary directory beside it, then rename it into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".onboard-{final.name}-", dir=final.parent))
    try:
        build(tmp)
        return tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def proposed_toolchains(packages, metas=(), searched=""):
    """(toolchains, notes) proposed for the completed ``packages`` (and the meta-modules
    ``metas``); a clear error when none can build the suite (nothing is written then),
    naming what was ``searched`` and what was found."""
    proposed, notes = local_site.propose_toolchains(packages, metas)
    chosen, problems = toolchains.parse(proposed, "onboarding") if proposed else ([], [])
    if problems:  # propose_toolchains makes valid ones; a bug if not
        _key, problem, fix = problems[0]
        raise SitebenchError(problem, fix)
    if not chosen:
        raise SitebenchError(
            "no toolchain found: C, C++ and Fortran compilers and an MPI with its launcher "
            "(mpirun or mpiexec) are needed to build the suite. Searched: "
            f"{searched or 'PATH'}. Found: {found_summary(packages)}"
            + (f" ({'; '.join(notes)})" if notes else ""),
            "install what is missing (Debian: apt-get install gcc g++ gfortran openmpi-bin "
            "libopenmpi-dev), or, if the site offers them as modules, onboard from a shell "
            "whose MODULEPATH reaches them (its Core/ is enough: the hierarchy is walked)",
        )
    return chosen, notes


def found_summary(packages):
    """What detection found, for an error: compilers, MPIs and BLAS by spec (and
    module)."""
    items = []
    for name, cfg in packages.items():
        for ext in (cfg or {}).get("externals") or []:
            is_compiler = (ext.get("extra_attributes") or {}).get("compilers")
            if is_compiler or name in ("openmpi", "mpich", "mvapich2", "openblas"):
                spec = ext.get("spec", name).split()[0]
                where = f" (module {' '.join(ext['modules'])})" if ext.get("modules") else ""
                items.append(spec + where)
    return ", ".join(items) or "no compiler, MPI or BLAS"


def searched_places(detection):
    """Where detection looked, for an error."""
    places = ["PATH (spack compiler find, spack external find)"]
    system = detection.modules.get("system")
    if system:
        places.append(
            f"{system['system']} modules under {':'.join(system.get('use') or []) or 'MODULEPATH'}"
            " (the whole tree, hierarchy included)"
        )
    else:
        places.append("no environment modules (no modules system with a MODULEPATH here)")
    return "; ".join(places)


def proved(chosen, packages, detection):
    """(the toolchains whose modules load what they name, notes on the others):
    :func:`sitebench.onboarding.pairing.problems` on each that loads modules."""
    setting = detection.modules.get("system")
    if not setting or not any(tc.loads_modules for tc in chosen):
        return chosen, []
    system = modules.from_settings({"modules": setting}, "onboarding")
    kept, notes = [], []
    for tc in chosen:
        found = pairing.problems(tc, packages, system) if tc.loads_modules else []
        if found:
            notes.append(f"{tc.name} not proposed: {found[0][0]} ({found[0][1]})")
        else:
            kept.append(tc)
    if chosen and not kept:
        raise SitebenchError(
            f"no proposed toolchain loads what it names: {'; '.join(notes)}",
            "fix the modules as each says, then onboard again",
        )
    return kept, notes


def onboard(name, slurm=False, mirror=None, detection=None, spack=None):
    """Create ``site-configs/<name>/`` and ``environments/<name>/``; return a :class:`Report`."""
    check_name("site", name)
    site_dir, env_dir = paths.site_config_dir(name), paths.environment_dir(name)
    for existing in (site_dir, env_dir):
        if existing.exists():
            raise SitebenchError(
                f"{paths.shown(existing)} already exists: onboarding never overwrites a site",
                f"choose another name, or remove {paths.shown(existing)} first "
                f"(`./sitebench onboard {name}-2 ...`)",
            )
    mirror = mirror_url(mirror)
    if detection is None:
        if spack is None:
            from sitebench.spack import pinned as spack_mod

            spack = spack_mod.setup()
        detection = Detection.from_machine(spack, slurm=slurm)
    merged, _ = module_externals.merge(
        copy.deepcopy(detection.packages), copy.deepcopy(detection.modules.get("packages") or {})
    )
    gaps = local_site.toolchain_gaps(merged)
    if gaps and gaps[0][0] == "compiler":
        raise SitebenchError(f"{gaps[0][1]} (searched: {searched_places(detection)})", gaps[0][2])
    packages = site_packages(detection)
    chosen, notes = proposed_toolchains(
        packages, detection.modules.get("meta") or (), searched_places(detection)
    )
    chosen, unproved = proved(chosen, packages, detection)
    notes = notes + unproved
    parts = partitions(detection, slurm)
    found, review = findings(name, detection, packages, parts, mirror, slurm, chosen, notes)
    for parent in (site_dir.parent, env_dir.parent):
        parent.mkdir(parents=True, exist_ok=True)
    site_tmp = env_tmp = None
    try:
        site_tmp = _fill(
            site_dir,
            lambda t: _write_site(t, name, detection, packages, parts, mirror, slurm, chosen),
        )
        env_tmp = _fill(env_dir, lambda t: _write(t / "spack.yaml", environment_yaml(name)))
        os.rename(site_tmp, site_dir)
        site_tmp = None
        try:
            os.rename(env_tmp, env_dir)
            env_tmp = None
        except BaseException:
            shutil.rmtree(site_dir, ignore_errors=True)
            raise
    finally:
        for tmp in (site_tmp, env_tmp):
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
    return Report(name, site_dir, env_dir, found, review)

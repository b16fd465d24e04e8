"""A site's toolchains: the compilers per language and the MPI every benchmark is built with.

Declared in ``site-configs/<site>/site.yaml`` (the local site's are detected, in
``site-configs/local/toolchains.yaml``, not in git)::

    toolchains:
    - {name: gcc-openmpi, c: gcc, cxx: gcc, fortran: gcc, mpi: openmpi}
    - {name: gcc-mpich, c: gcc, cxx: gcc, fortran: gcc, mpi: mpich}
    - {name: clang-openmpi, c: llvm, cxx: llvm, fortran: gcc, mpi: openmpi}   # no Fortran in clang

Compilers and MPI are Spack package names (Clang is ``llvm``), with a version where the
site has several (``gcc@12.2.0``); ``cxx`` and ``fortran`` default to ``c``. ``modules``
names the environment modules the toolchain loads (``modules: [gcc/12, openmpi/4.1.4]``,
on a site whose ``site.yaml`` names its ``modules:`` system: :mod:`modules`); builds and
runs load exactly those, after ``module purge``. ``collection: NAME`` restores a module
collection first (``module restore NAME``; ReFrame's ``{'name': NAME, 'collection':
True}``); a meta-module (``foss/2023a``) is simply a module. ``default: false`` leaves a
toolchain out of a plain ``run`` and the nightly (``--toolchain NAME`` or ``--toolchain all``
takes it).

Each toolchain becomes, with what Spack and ReFrame already do:

* a Spack toolchain (``toolchains.yaml`` of the site's Spack scope: ``%c=gcc`` when the
  package uses C, ... ``%mpi=mpich`` when it uses MPI) and one entry of the ``toolchains``
  definition, which the environment's spec matrix crosses with its benchmarks;
  ``spack.lock`` covers the toolchains a run takes (``default: false`` ones only when
  named) and a package that uses no MPI is one build for every toolchain with its compilers;
* a ReFrame programming environment of that name (:func:`reframe_environments`), whose PATH
  starts with its MPI's own ``bin/`` (its ``mpirun``), with the feature ``mpi_<mpi>``; the
  first toolchain of each compiler set also has the feature ``no_mpi_checks``, where the
  checks that use no MPI (STREAM, PARSEC, sysbench) run once per compiler set; and what
  ReFrame's own checks expect of an environment (:mod:`reframe_conventions`): ``openmp``
  with ``extras['omp_flag']``, ``mpi``, wrappers calling the toolchain's compilers.

Figures are keyed by toolchain through the environment's name (perflogs, the store).
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.common.names import check_name
from sitebench.sites import reframe_conventions

LANGUAGES = ("c", "cxx", "fortran")
KEYS = ("name", *LANGUAGES, "mpi", "launcher", "modules", "collection", "default")

#: ReFrame launchers a toolchain may name; without one, its MPI's default.
LAUNCHERS = ("mpirun", "mpiexec", "srun")
#: MPIs sitebench knows how to launch and prove (run/mapping.py, reframe-checks/osu.py).
DEFAULT_LAUNCHER = {"openmpi": "mpirun", "mpich": "mpirun"}

#: The environment variable that restricts a run to some toolchains (``--toolchain``).
SELECTED = "SITEBENCH_TOOLCHAINS"

#: Feature of the environment where the checks that use no MPI run.
NO_MPI_CHECKS = "no_mpi_checks"

EXAMPLE = "toolchains: [{name: gcc-openmpi, c: gcc, cxx: gcc, fortran: gcc, mpi: openmpi}]"
GENERATED = (
    "# Made by sitebench from the site's toolchains (site.yaml or the local site's detected\n"
    "# toolchains.yaml); rewritten by `./sitebench validate` and `./sitebench run`.\n"
)


@dataclass(frozen=True)
class Toolchain:
    name: str
    compilers: dict = field(compare=False)  # language -> Spack compiler package
    mpi: str
    launcher: str = ""
    modules: tuple = ()  # environment modules loaded (after a purge) to build and run
    default: bool = True  # taken by a plain run and the nightly
    collection: str = ""  # a module collection restored (``module restore``) before them

    @property
    def loads_modules(self):
        return bool(self.modules or self.collection)

    def reframe_modules(self):
        """The ReFrame environment's ``modules``: a collection in ReFrame's collection
        form (``module restore``), then the modules."""
        first = [{"name": self.collection, "collection": True}] if self.collection else []
        return first + list(self.modules)

    def load_command(self):
        """What loading it runs, for messages."""
        parts = [f"module restore {self.collection}"] if self.collection else []
        return "; ".join(
            parts + ([f"module load {' '.join(self.modules)}"] if self.modules else [])
        )

    @property
    def compiler_set(self):
        return tuple(self.compilers[lang] for lang in LANGUAGES)

    def spack(self):
        """Spack's toolchain: each part applied only where the package uses it."""
        parts = [
            {"spec": f"%{lang}={pkg}", "when": f"%{lang}"} for lang, pkg in self.compilers.items()
        ]
        return parts + [{"spec": f"%mpi={self.mpi}", "when": "%mpi"}]

    @property
    def mpi_name(self):
        """The MPI's Spack package name, without a version."""
        return self.mpi.split("@")[0]

    def extras(self):
        """The ReFrame environment's ``extras``: what a build fixture finds its root by
        (sitebench/spack/toolchain_roots.py) and the checks launch and prove with."""
        return {
            "mpi": self.mpi_name,
            "compilers": dict(self.compilers),
            "launcher": self.launcher or DEFAULT_LAUNCHER.get(self.mpi_name, ""),
        }

    def as_dict(self):
        data = {"name": self.name, **self.compilers, "mpi": self.mpi}
        if self.launcher:
            data["launcher"] = self.launcher
        if self.modules:
            data["modules"] = list(self.modules)
        if self.collection:
            data["collection"] = self.collection
        if not self.default:
            data["default"] = False
        return data


def parse(data, rel):
    """([Toolchain], [(key, problem, fix)]) of a ``toolchains:`` list read from ``rel``."""
    if not isinstance(data, list) or not data:
        return [], [
            ("toolchains", f"{rel}: toolchains must be a non-empty list", f"e.g. {EXAMPLE}")
        ]
    found, problems, names = [], [], set()
    for i, item in enumerate(data):
        key = f"toolchains[{i}]"
        if not isinstance(item, dict):
            problems.append(
                (key, f"{rel}: {key} is {item!r}, expected a mapping", f"e.g. {EXAMPLE}")
            )
            continue
        unknown = [k for k in item if k not in KEYS]
        if unknown:
            problems.append(
                (
                    f"{key}.{unknown[0]}",
                    f"{rel}: {key}: unknown key {unknown[0]!r}",
                    f"keys: {', '.join(KEYS)}",
                )
            )
            continue
        missing = [k for k in ("name", "c", "mpi") if k not in item]
        if missing:
            problems.append(
                (
                    f"{key}.{missing[0]}",
                    f"{rel}: {key}: {missing[0]} is missing",
                    f"e.g. {EXAMPLE}",
                )
            )
            continue
        problem = _modules_problem(item, key, rel)
        if problem:
            problems.append(problem)
            continue
        bad = [
            k
            for k, v in item.items()
            if k not in ("modules", "default", "collection")
            and (not isinstance(v, str) or not v.strip())
        ]
        if bad:
            problems.append(
                (
                    f"{key}.{bad[0]}",
                    f"{rel}: {key}: {bad[0]} is {item[bad[0]]!r}, expected a Spack package name",
                    f"e.g. {EXAMPLE}",
                )
            )
            continue
        try:
            check_name("toolchain", item["name"])
        except SitebenchError as err:
            problems.append((f"{key}.name", f"{rel}: {key}: {err.problem}", err.fix))
            continue
        if item["name"] in names:
            problems.append(
                (
                    f"{key}.name",
                    f"{rel}: toolchain {item['name']!r} is declared twice",
                    "give each toolchain its own name (it names ReFrame environments, figures)",
                )
            )
            continue
        launcher = item.get("launcher", "")
        if launcher and launcher not in LAUNCHERS:
            problems.append(
                (
                    f"{key}.launcher",
                    f"{rel}: {key}: launcher {launcher!r} is not one sitebench runs",
                    f"use one of {', '.join(LAUNCHERS)}, or leave it out for the MPI's own",
                )
            )
            continue
        if not launcher and item["mpi"].split("@")[0] not in DEFAULT_LAUNCHER:
            problems.append(
                (
                    f"{key}.launcher",
                    f"{rel}: {key}: MPI {item['mpi']!r} has no launcher sitebench knows",
                    f"name it: launcher: srun (or mpirun, mpiexec); known MPIs: "
                    f"{', '.join(DEFAULT_LAUNCHER)}",
                )
            )
            continue
        names.add(item["name"])
        compilers = {lang: item.get(lang, item["c"]) for lang in LANGUAGES}
        modules = tuple(item.get("modules") or ())
        found.append(
            Toolchain(
                item["name"],
                compilers,
                item["mpi"],
                launcher,
                modules,
                item.get("default", True),
                item.get("collection", ""),
            )
        )
    return found, problems


def _modules_problem(item, key, rel):
    """(key, problem, fix) of a toolchain's bad ``modules``/``default``, or None."""
    modules = item.get("modules", [])
    if not isinstance(modules, list) or not all(
        isinstance(m, str) and m.strip() and " " not in m for m in modules
    ):
        return (
            f"{key}.modules",
            f"{rel}: {key}: modules is {modules!r}, expected a list of module names",
            "e.g. modules: [gcc/12, openmpi/4.1.4] (as `module avail` lists them)",
        )
    collection = item.get("collection", "")
    if not isinstance(collection, str) or " " in collection or "/" in collection:
        return (
            f"{key}.collection",
            f"{rel}: {key}: collection is {collection!r}, expected a collection's name",
            "e.g. collection: foss (as `module savelist` lists it; `module save foss` "
            "makes it)",
        )
    if not isinstance(item.get("default", True), bool):
        return (
            f"{key}.default",
            f"{rel}: {key}: default is {item['default']!r}, expected true or false",
            "default: false leaves the toolchain out of a plain run and the nightly",
        )
    return None


#: The local site's detected toolchains, beside its topology (not in git).
DETECTED = "toolchains.yaml"


def detected_file():
    """The local site's detected toolchains to read: under the sites' root, else this
    checkout's (a site of a moved root that builds with the local environment, whose Spack
    configuration that environment includes from this checkout)."""
    here = paths.site_config_dir("local") / DETECTED
    own = paths.ROOT / "site-configs" / "local" / DETECTED
    return here if here.is_file() or not own.is_file() else own


def declared(site_name, settings):
    """(toolchains, problems) of a site: its environment's owner declares them (site.yaml),
    the local environment's are detected."""
    owner = settings.get("environment", site_name)
    if owner == site_name and settings.get("toolchains") is not None:
        return parse(
            settings["toolchains"], paths.shown(paths.site_config_dir(site_name) / "site.yaml")
        )
    if owner != site_name:
        from sitebench.sites import site_settings

        return declared(owner, site_settings.load(owner))
    if owner == "local":
        path = detected_file()
        if not path.is_file():
            return [], [
                (
                    "toolchains",
                    f"{paths.shown(path)} is missing: the local site's toolchains are detected",
                    "run `./sitebench detect` (the first `./sitebench run` does it)",
                )
            ]
        data = yaml.safe_load(path.read_text()) or {}
        return parse(data.get("toolchains"), paths.shown(path))
    rel = paths.shown(paths.site_config_dir(site_name) / "site.yaml")
    return [], [
        (
            "toolchains",
            f"{rel}: the site declares no toolchains",
            f"add them, e.g. {EXAMPLE} (`./sitebench onboard` proposes the ones it finds)",
        )
    ]


def load(site):
    """The toolchains of a resolved :class:`~sitebench.sites.site.Site`, or a clear error."""
    found, problems = declared(site.name, site.settings)
    if problems:
        _key, problem, fix = problems[0]
        raise SitebenchError(problem, fix)
    return found


def select(names):
    """Run only these toolchains in this process and what it starts: the site's reframe.py
    reads them (its environments) and the runner checks them."""
    os.environ[SELECTED] = ",".join(names)


def selected_names():
    """The toolchain names ``$SITEBENCH_TOOLCHAINS`` gives (``--toolchain`` sets it)."""
    return [n for n in os.environ.get(SELECTED, "").split(",") if n]


#: ``--toolchain all``: every toolchain of the site, ``default: false`` ones too.
ALL = "all"


def selected(toolchains, names=None):
    """The toolchains named (``--toolchain``, or ``$SITEBENCH_TOOLCHAINS``), in declared
    order; without names, the default ones (all but ``default: false``)."""
    if names is None:
        names = selected_names()
    if not names:
        return [t for t in toolchains if t.default] or list(toolchains)
    if ALL in names:
        return list(toolchains)
    known = [t.name for t in toolchains]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SitebenchError(
            f"toolchain {unknown[0]!r} is not one of the site's",
            f"use one of: {', '.join(known)} (declared in site.yaml, or detected for local)",
        )
    return [t for t in toolchains if t.name in names]


def availability_problems(toolchains, packages, rel, root=""):
    """[(key, problem, fix)] for toolchains whose compiler or MPI the site's Spack
    configuration (``packages:`` of its scope, read from ``rel``) does not have, or whose
    MPI prefix holds no launcher. ``root``: where the site's prefixes live (an emulated
    site's Debian root); a prefix not on this machine is not looked into."""
    problems = []
    for tc in toolchains:
        for lang, pkg in tc.compilers.items():
            name = pkg.split("@")[0]
            langs = [
                lang_
                for ext in (packages.get(name) or {}).get("externals") or []
                for lang_ in (ext.get("extra_attributes") or {}).get("compilers") or {}
            ]
            if lang not in langs:
                problems.append(
                    (
                        f"toolchains.{tc.name}.{lang}",
                        f"toolchain {tc.name!r}: {rel} has no {name} compiler for {lang}",
                        f"install it and rerun detection (`spack compiler find`), or change "
                        f"{lang}: of {tc.name} to a compiler the site has"
                        + (
                            " (Debian's clang has no Fortran: fortran: gcc)"
                            if lang == "fortran"
                            else ""
                        ),
                    )
                )
        mpi = tc.mpi_name
        prefixes = mpi_prefixes(packages, mpi)
        if not prefixes:
            problems.append(
                (
                    f"toolchains.{tc.name}.mpi",
                    f"toolchain {tc.name!r}: {rel} has no {mpi} MPI (no external of it)",
                    f"install it (Debian: {_DEBIAN_MPI.get(mpi, mpi)}) and rerun "
                    "`./sitebench detect --redetect`, or add it as an external of the site",
                )
            )
            continue
        here = [Path(f"{root}{p}") for p in prefixes if Path(f"{root}{p}").is_dir()]
        if here and not tc.launcher and not any(_launcher_in(p / "bin") for p in here):
            problems.append(
                (
                    f"toolchains.{tc.name}.mpi",
                    f"toolchain {tc.name!r}: the {mpi} prefix {prefixes[0]} holds no launcher "
                    "(bin/mpirun or bin/mpiexec)",
                    "point the external at the MPI's own prefix (Debian installs several MPIs "
                    "in /usr: ./sitebench detect --redetect gives each its own), or name the "
                    "toolchain's launcher (launcher: srun)",
                )
            )
    return problems


_DEBIAN_MPI = {
    "openmpi": "apt-get install openmpi-bin libopenmpi-dev",
    "mpich": "apt-get install mpich libmpich-dev",
}


def mpi_prefixes(packages, mpi):
    return [
        ext["prefix"]
        for ext in (packages.get(mpi) or {}).get("externals") or []
        if ext.get("prefix")
    ]


def _launcher_in(bindir):
    return any((Path(bindir) / exe).exists() for exe in ("mpirun", "mpiexec"))


def mpi_bin(packages, mpi):
    """The ``bin/`` of the MPI external ``mpi`` holding its launcher, or None."""
    for prefix in mpi_prefixes(packages, mpi):
        if _launcher_in(Path(prefix) / "bin"):
            return str(Path(prefix) / "bin")
    return None


def spack_scope_packages(scope_dir):
    path = Path(scope_dir) / "packages.yaml"
    if not path.is_file():
        return {}
    return (yaml.safe_load(path.read_text()) or {}).get("packages") or {}


def spack_files(toolchains):
    """{file name: text} of the Spack scope: toolchains.yaml (every toolchain) and
    definitions.yaml, whose ``toolchains`` are the default ones and those ``--toolchain``
    names now (:func:`selected`): a ``default: false`` toolchain is built only while named,
    so a plain ``run`` (or ``spack install``) builds no more than it runs, and naming some
    of the default ones (the nightly per toolchain) keeps the lock as it is."""
    tcs = {"toolchains": {tc.name: tc.spack() for tc in toolchains}}
    chosen = selected(toolchains)
    built = [tc for tc in toolchains if tc.default or tc in chosen]
    defs = {"definitions": [{"toolchains": [f"%{tc.name}" for tc in built]}]}
    return {
        "toolchains.yaml": GENERATED + yaml.safe_dump(tcs, sort_keys=False),
        "definitions.yaml": GENERATED + yaml.safe_dump(defs, sort_keys=False),
    }


def write_spack_files(toolchains, scope_dir):
    """Write the Spack scope's files where they differ; return the names written."""
    written = []
    for name, text in spack_files(toolchains).items():
        path = Path(scope_dir) / name
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)
            written.append(name)
    return written


def reframe_environments(toolchains, packages, env_vars=()):
    """ReFrame environments, one per toolchain (see the module's docstring)."""
    environs, firsts = [], set()
    for tc in toolchains:
        # ReFrame's conventions (reframe_conventions.py): '+openmp' checks add omp_flag.
        flag = reframe_conventions.omp_flag(tc.compilers)
        features = ["sitebench"] + (["openmp"] if flag else []) + ["mpi", f"mpi_{tc.mpi_name}"]
        if tc.compiler_set not in firsts:
            firsts.add(tc.compiler_set)
            features.append(NO_MPI_CHECKS)
        # The module sets PATH.
        bindir = None if tc.loads_modules else mpi_bin(packages, tc.mpi_name)
        variables = [["PATH", f"{bindir}:$PATH"]] if bindir else []
        variables += reframe_conventions.wrapper_variables(packages, tc.compilers, tc.mpi_name)
        blas = reframe_conventions.blas_ldflags(packages)
        features += ["blas"] if blas else []
        environs.append(
            {
                "name": tc.name,
                "features": features,
                # ReFrame loads them (its modules_system) after the partition's purge.
                **({"modules": tc.reframe_modules()} if tc.loads_modules else {}),
                "cc": "mpicc",
                "cxx": "mpicxx",
                "ftn": "mpifort",
                "env_vars": variables + [list(v) for v in env_vars],
                **({"ldflags": blas} if blas else {}),
                "extras": {**tc.extras(), **({"omp_flag": flag} if flag else {})},
            }
        )
    return environs


def _owner_dir(config_dir):
    """The folder of the site whose environment ``config_dir``'s site builds with, and its
    settings (``site.yaml``), read next to each other: a site's ``reframe.py`` reads them
    from where it lies, whatever the sites' root."""
    config_dir = Path(config_dir)
    path = config_dir / "site.yaml"
    settings = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    owner = settings.get("environment", config_dir.name)
    if owner != config_dir.name:
        for place in (
            config_dir.parent,
            paths.site_config_dir(owner).parent,
            paths.ROOT / "site-configs",
        ):
            if (place / owner).is_dir():
                return _owner_dir(place / owner)
        return _owner_dir(config_dir.parent / owner)
    return config_dir, settings


def for_reframe(site_name, env_vars=(), config_dir=None):
    """(environment names, ReFrame environments) of a site, for its ``reframe.py``: the
    toolchains selected by ``$SITEBENCH_TOOLCHAINS`` (all by default). ``config_dir``: the
    folder of that ``reframe.py`` (default: the site's under the sites' root)."""
    check_name("site", site_name)
    owner, settings = _owner_dir(config_dir or paths.site_config_dir(site_name))
    if settings.get("toolchains") is not None:
        found, problems = parse(settings["toolchains"], paths.shown(owner / "site.yaml"))
    elif (owner / "toolchains.yaml").is_file():
        data = yaml.safe_load((owner / "toolchains.yaml").read_text()) or {}
        found, problems = parse(data.get("toolchains"), paths.shown(owner / "toolchains.yaml"))
    else:
        found, problems = [], [
            (
                "toolchains",
                f"{paths.shown(owner)} declares no toolchains (site.yaml) and has none detected "
                "(toolchains.yaml)",
                "run `./sitebench detect` for the local site, or declare them in site.yaml, "
                f"e.g. {EXAMPLE}",
            )
        ]
    if problems:
        raise SitebenchError(problems[0][1], problems[0][2])
    chosen = selected(found)
    environs = reframe_environments(chosen, spack_scope_packages(owner / "spack"), env_vars)
    return [e["name"] for e in environs], environs


def modules_settings(owner, settings):
    """(settings holding the site's ``modules:``, the file they are read from): its
    ``site.yaml``, else the local site's detected ``toolchains.yaml``."""
    if settings.get("modules") is None and (owner / DETECTED).is_file():
        data = yaml.safe_load((owner / DETECTED).read_text()) or {}
        if data.get("modules") is not None:
            return data, paths.shown(owner / DETECTED)
    return settings, paths.shown(owner / "site.yaml")


def modules_for_reframe(site_name, config_dir=None):
    """The site's modules system for its ``reframe.py``: ``{"modules_system": ...,
    "prepare_cmds": [...]}`` (the partitions' job scripts define ``module``, use the
    site's directories and purge before the environment's modules are loaded). It sets
    what ReFrame's own backend reads in this process (``$LMOD_CMD``, ``$MODULEPATH``, and
    for the Tcl modules a ``modulecmd`` first on PATH that runs the site's command)."""
    from sitebench.sites import modules

    check_name("site", site_name)
    owner, settings = _owner_dir(config_dir or paths.site_config_dir(site_name))
    settings, rel = modules_settings(owner, settings)
    system = modules.from_settings(settings, rel)
    config, prepare = modules.reframe_system(system)
    if system is not None:
        env = system.environ()
        for name in (modules.COMMAND_VARIABLE[system.kind], "MODULEPATH"):
            if env.get(name):
                os.environ[name] = env[name]
    if system is not None and system.kind == "envmod":
        # ReFrame's Tcl backend runs `modulecmd` from PATH: the site's, first.
        folder = str(modules.reframe_modulecmd_dir(system))
        if os.environ.get("PATH", "").split(":")[0] != folder:
            os.environ["PATH"] = f"{folder}:{os.environ.get('PATH', '')}"
    return {**config, "prepare_cmds": prepare}

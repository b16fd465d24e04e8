"""The embedded default site, ``local``: this machine, detected, nothing to edit.

Detection writes the git-ignored files of ``site-configs/local/``:

* ``spack/packages.yaml``: the compilers, MPI, BLAS and build tools found on
  the machine as Spack externals (``spack compiler find``, ``spack external
  find``), plus the STREAM array size derived from the last-level cache;
* ``topology.json``: the CPU topology as ReFrame detects it.

It runs once; ``sitebench detect --redetect`` (or deleting the files) redoes it.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import (
    one_at_a_time,
    publish_shared,
    reframe_executable,
    write_atomic,
)
from sitebench.services import programs
from sitebench.sites import toolchains
from sitebench.discovery import module_externals, module_tree, mpi_prefix
from sitebench.discovery.spack_detection import spack_detection
from sitebench.sites.topology import last_level_cache_bytes
from sitebench.spack import buildcache

SITE = "local"

#: MPI, BLAS and what building HPL/STREAM needs. Each found one becomes a
#: non-buildable external, so the suite builds without compiling a toolchain.
DETECTED_PACKAGES = (
    "openmpi mpich "
    "autoconf automake libtool m4 pkgconf gmake cmake perl diffutils findutils tar xz bzip2 "
    "gzip sed grep gawk file gettext libiconv zlib ncurses libxml2 zstd"
).split()

#: BLAS libraries Spack finds only when told the directory: distributions keep
#: the versioned file (libopenblasp-r0.3.21.so) in a private directory behind
#: an alternatives symlink (Debian: .../openblas-pthread/).
BLAS_LIBRARIES = {"openblas": "libopenblas.so"}

#: STREAM's rule: each array at least four times the last-level cache.
STREAM_CACHE_FACTOR = 4


def spack_dir():
    return paths.site_config_dir(SITE) / "spack"


def topology_file():
    return paths.site_config_dir(SITE) / "topology.json"


def is_detected():
    return (
        (spack_dir() / "packages.yaml").is_file()
        and topology_file().is_file()
        and (paths.site_config_dir(SITE) / toolchains.DETECTED).is_file()
    )


def detect_topology():
    """ReFrame's host topology (the same detection its local partitions use)."""
    reframe = reframe_executable()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "topology.json"
        proc = subprocess.run(
            [reframe, f"--detect-host-topology={out}"], capture_output=True, text=True, cwd=tmp
        )
        if proc.returncode != 0 or not out.is_file():  # includes "reframe" not installed
            raise SitebenchError(
                f"ReFrame could not detect this host's topology: {proc.stderr.strip()[-500:]}",
                "check that /sys/devices/system/cpu is readable",
            )
        return json.loads(out.read_text())


#: Static data GCC's default (small) code model addresses on x86_64, less a margin for the
#: rest of the program: STREAM's three arrays at 4 x a 260 MiB L3 (137 million elements,
#: 3.3 GB) failed to link there ("relocation truncated to fit: R_X86_64_PC32").
SMALL_CODE_MODEL_BYTES = 2**31 - 2**26


def stream_requirement(topology, bytes_per_element=8):
    """The site's Spack requirement on STREAM: its array size, and GCC's medium code model
    where its three arrays are too large for the default one (x86_64)."""
    elements = stream_array_elements(topology, bytes_per_element)
    spec = f"stream_array_size={elements}"
    if 3 * elements * bytes_per_element > SMALL_CODE_MODEL_BYTES and _family(topology) == "x86_64":
        spec += ' cflags="-mcmodel=medium"'
    return spec


def _family(topology):
    """The CPU family (x86_64, aarch64...) of a ReFrame topology's ``arch``."""
    try:
        import archspec.cpu  # ReFrame's dependency

        return archspec.cpu.TARGETS[topology["arch"]].family.name
    except (ImportError, KeyError):
        return topology.get("arch") if topology.get("arch") in ("x86_64", "aarch64") else None


def stream_array_elements(topology, bytes_per_element=8):
    """Elements per STREAM array: >= 4 x LLC, rounded up to a whole million."""
    llc = last_level_cache_bytes(topology)
    if not llc:
        return 80_000_000  # no cache info: large enough for any LLC below 160 MiB
    need = STREAM_CACHE_FACTOR * llc / bytes_per_element
    return int(math.ceil(need / 1e6) * 1_000_000)


def library_dirs(soname):
    """Real directories of a shared library known to the dynamic linker."""
    # /sbin/ldconfig: not on an ordinary user's PATH, hence programs.require.
    ldconfig = programs.require("ldconfig", "libc-bin", "finding BLAS libraries")
    proc = subprocess.run([ldconfig, "-p"], capture_output=True, text=True)
    dirs = []
    for line in proc.stdout.splitlines():
        name, _, target = line.strip().partition(" => ")
        if name.split(" ")[0] == soname and target:
            real = os.path.dirname(os.path.realpath(target))
            if real not in dirs:
                dirs.append(real)
    return dirs


def _autoconf_archive_external():
    """Debian/RPM autoconf-archive (Spack has no detection for it)."""
    for prefix in ("/usr", "/usr/local"):
        if not Path(prefix, "share/aclocal/ax_prog_cc_mpi.m4").is_file():
            continue
        for cmd in (
            ["dpkg-query", "-W", "-f=${Version}", "autoconf-archive"],
            ["rpm", "-q", "--qf", "%{VERSION}", "autoconf-archive"],
        ):
            if not shutil.which(cmd[0]):
                continue
            proc = subprocess.run(cmd, capture_output=True, text=True)
            raw = proc.stdout.strip().split("-")[0]
            if proc.returncode == 0 and len(raw) == 8 and raw.isdigit():
                version = f"{raw[:4]}.{raw[4:6]}.{raw[6:]}"
                return {
                    "externals": [{"spec": f"autoconf-archive@{version}", "prefix": prefix}],
                    "buildable": False,
                }
    return None


def _mariadb_external():
    """Distribution MariaDB (Spack's mariadb recipe has no detection), for ``sysbench ^mariadb``.

    The version comes from the server (``mariadbd --version``: "Ver 10.11.19-MariaDB-0+deb12u1")
    or the client (``mariadb --version``: "Distrib 10.11.19-MariaDB"); the prefix is the one
    above the program's bin/ or sbin/. Building sysbench against it also needs the client
    headers and ``mysql_config`` (Debian: libmariadb-dev libmariadb-dev-compat).
    """
    for program in ("mariadbd", "mariadb"):
        exe = programs.which(program)
        if not exe:
            continue
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
        match = re.search(r"\b(\d+\.\d+\.\d+)-MariaDB", proc.stdout)
        if proc.returncode == 0 and match:
            prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
            return {
                "externals": [{"spec": f"mariadb@{match.group(1)}", "prefix": prefix}],
                "buildable": False,
            }
    return None


def spack_external_find(spack):
    """Run Spack's own detection in a scratch scope; return the ``packages:`` it wrote.

    That is what ``spack compiler find`` and ``spack external find`` (MPI, BLAS, build
    tools) report, untouched: :func:`complete_packages` turns it into a site's config.
    """
    steps = [
        ["compiler", "find", "--scope", "user"],
        ["external", "find", "--scope", "user", "--not-buildable", *DETECTED_PACKAGES],
    ]
    for package, soname in BLAS_LIBRARIES.items():
        search = [arg for d in library_dirs(soname) for arg in ("--path", d)]
        if search:
            steps.append(
                ["external", "find", "--scope", "user", "--not-buildable", *search, package]
            )
    print(
        "==> detecting compilers (spack compiler find), MPI, BLAS and build tools "
        "(spack external find)",
        file=sys.stderr,
    )
    return spack_detection(spack, steps)


#: What the suite needs from the machine: (what, Spack packages that provide it, Debian hint).
TOOLCHAIN = (
    ("mpi", ("openmpi", "mpich"), "apt-get install openmpi-bin libopenmpi-dev"),
    ("blas", ("openblas",), "apt-get install libopenblas-dev"),
)


def found_compilers(packages):
    """Names of the packages Spack found as compilers (``gcc``, ``llvm``, ...)."""
    return [
        name
        for name, cfg in packages.items()
        for ext in cfg.get("externals", [])
        if ext.get("extra_attributes", {}).get("compilers")
    ]


def found_providers(packages, providers):
    """Those of ``providers`` Spack found as externals."""
    return [p for p in providers if packages.get(p, {}).get("externals")]


def toolchain_gaps(packages):
    """What the machine lacks (C compiler, MPI, BLAS), as (virtual, problem, fix), in order."""
    gaps = []
    if not found_compilers(packages):
        gaps.append(
            (
                "compiler",
                "Spack found no C compiler on this machine",
                "install gcc (Debian: apt-get install gcc g++ gfortran) and rerun",
            )
        )
    for virtual, providers, hint in TOOLCHAIN:
        if not found_providers(packages, providers):
            gaps.append(
                (
                    virtual,
                    f"Spack found no {virtual.upper()} library on this machine "
                    f"({', '.join(providers)})",
                    f"install one (Debian: {hint}) and rerun, or describe the site by hand "
                    f"in site-configs/<site>/",
                )
            )
    return gaps


def extra_externals():
    """Externals Spack cannot detect itself: autoconf-archive, reference BLAS, MariaDB."""
    extras = {}
    for name, find in (
        ("autoconf-archive", _autoconf_archive_external),
        ("netlib-lapack", _reference_blas_external),
        ("mariadb", _mariadb_external),
    ):
        found = find()
        if found:
            extras[name] = found
    return extras


def own_mpi_prefixes(packages, farm_roots):
    """Give each MPI external installed beside another in one prefix (Debian's
    alternatives) a prefix of its own (:mod:`sitebench.discovery.mpi_prefix`) in the first
    of ``farm_roots`` where it can be shared. Returns [why a root was passed over]."""
    passed = []
    for mpi in TOOLCHAIN[0][1]:
        for ext in (packages.get(mpi) or {}).get("externals") or []:
            if ext.get("prefix") in ("/usr", "/usr/"):
                farm, why = mpi_prefix.make_shared(mpi, farm_roots)
                passed += [w for w in why if w not in passed]
                if farm:
                    ext["prefix"] = str(farm)
    return passed


_SAID = set()


def say_private_prefixes(passed):
    """Tell the user once why its externals' prefixes are its own, not the machine's."""
    if passed and tuple(passed) not in _SAID:
        _SAID.add(tuple(passed))
        print(
            f"==> external prefixes not shared with other users ({'; '.join(passed)}): "
            "this user's MPI builds hash apart from theirs and miss their binaries; make "
            f"{buildcache.externals_dirs()[0]} (or $SITEBENCH_EXTERNALS_DIR) a root-owned "
            "directory of mode 0755 and run `./sitebench detect --redetect` as root first",
            file=sys.stderr,
        )


def complete_packages(packages, extras):
    """Spack's detection (``packages``) made a site's config: every MPI in a prefix of its
    own, the first found preferred (a toolchain requires its own), the machine's
    BLAS preferred, ``extras`` (:func:`extra_externals`) added, python dropped."""
    mpi_found = found_providers(packages, TOOLCHAIN[0][1])
    if mpi_found:
        # Not in the checkout: the prefix is part of every MPI spec's hash (buildcache.py).
        say_private_prefixes(own_mpi_prefixes(packages, buildcache.externals_dirs()))
        # A soft preference: a spec without a toolchain gets the first MPI found (Spack's
        # provider order alone chose MPICH here), a toolchain's %mpi=... overrides it.
        packages["mpi"] = {"prefer": [mpi_found[0]]}
    blas_found = found_providers(packages, TOOLCHAIN[1][1])
    if blas_found:
        # Prefer the machine's BLAS, but keep the virtual buildable: a spec may
        # still ask for another provider (hpl level=1 builds the reference BLAS).
        preferred = packages.setdefault("all", {}).setdefault("providers", {})
        for name in ("blas", "lapack"):
            packages.pop(name, None)
            preferred[name] = [blas_found[0]]
    packages.update(extras)
    # Debian's python shims (pyenv) and similar are not wanted; nothing here needs python.
    packages.pop("python", None)
    return packages


def detect_modules(spack):
    """(externals behind environment modules, the ``modules:`` setting) where this shell
    has a modules system with a MODULEPATH, else ({}, None)."""
    from sitebench.sites import modules

    system, found, notes, _metas = module_externals.from_shell(spack)
    for note in notes:
        print(f"==> modules: {note}", file=sys.stderr)
    return found, (modules.as_settings(system) if found else None)


def detect_spack_packages(spack, module_packages=None):
    """Run Spack's own detection in a scratch scope and return packages: {...}, with the
    externals found behind modules (:func:`detect_modules`) merged in."""
    packages = spack_external_find(spack)
    packages, notes = module_externals.merge(packages, module_packages or {})
    for note in notes:
        print(f"==> modules: {note}", file=sys.stderr)
    gaps = toolchain_gaps(packages)
    if gaps:
        raise SitebenchError(gaps[0][1], gaps[0][2])
    return complete_packages(packages, extra_externals())


def write_environment(env_dir, specs, our_repo=True, **settings):
    """Write ``env_dir/spack.yaml``: ``specs`` on the local site's Spack config.

    ``our_repo`` registers the sitebench package repository (off to get Spack's
    builtin recipes only); ``settings`` are further keys of the ``spack:`` section
    (``concretizer``, ``packages``, ``config``, ...).
    """
    config = {"include": [str(spack_dir())], "specs": list(specs), "view": False, **settings}
    if our_repo:
        config["repos"] = {"sitebench": str(paths.ROOT / "spack-repo/spack_repo/sitebench")}
    env_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(env_dir / "spack.yaml", yaml.safe_dump({"spack": config}, sort_keys=False))
    return env_dir


#: Spack compiler package -> the name it gives a toolchain, in the order proposed.
COMPILER_NAMES = {"gcc": "gcc", "llvm": "clang"}


def compiles_openmp(compiler):
    """Whether ``compiler`` builds and links an OpenMP program (Debian's clang needs
    libomp-dev; the suite's STREAM is OpenMP)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "omp.c")
        src.write_text("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        proc = subprocess.run(
            [compiler, "-fopenmp", str(src), "-o", str(Path(tmp, "omp"))], capture_output=True
        )
        return proc.returncode == 0


def propose_toolchains(packages, metas=()):
    """(toolchains, notes): every compiler set that can build the suite with every MPI found.

    GCC gives C, C++ and Fortran; Clang (Spack's ``llvm``) C and C++ with GCC's Fortran,
    and only where it compiles OpenMP. The first is GCC with the first MPI found. Compilers
    and MPIs offered as environment modules (externals with ``modules:``) make toolchains of
    their own that load them (:func:`_module_toolchains`); a second compiler set is proposed
    with the first MPI only and ``default: false`` (a plain run and the nightly take the
    first compiler set's toolchains; ``--toolchain NAME`` or ``all`` the others).
    ``metas``: meta-modules and what they load (:func:`module_externals.detect`)."""
    sets, notes = [], []
    compilers = {}
    for name in COMPILER_NAMES:
        # The newest on PATH, as Spack prefers it: Debian's gcc-11 beside gcc (12) is not it.
        for ext in _newest_first(packages, name):
            if not ext.get("modules"):
                compilers.setdefault(name, ext.get("extra_attributes", {}).get("compilers", {}))
    gcc = compilers.get("gcc", {})
    for name, langs in compilers.items():
        if "c" not in langs or "cxx" not in langs:
            continue
        fortran = name if "fortran" in langs else ("gcc" if "fortran" in gcc else None)
        if fortran is None:
            notes.append(f"{name}: no Fortran compiler beside it (NPB is Fortran): not proposed")
            continue
        if not compiles_openmp(langs["c"]):
            notes.append(
                f"{COMPILER_NAMES[name]} found but it cannot build OpenMP programs (Debian: "
                f"apt-get install libomp-dev): no {COMPILER_NAMES[name]} toolchain proposed"
            )
            continue
        sets.append((COMPILER_NAMES[name], {"c": name, "cxx": name, "fortran": fortran}))
    found = []
    mpis = [
        mpi
        for mpi in found_providers(packages, TOOLCHAIN[0][1])
        if any(not ext.get("modules") for ext in packages[mpi]["externals"])
    ]
    for i, (label, compilers_) in enumerate(sets):
        for mpi in mpis if i == 0 else mpis[:1]:
            if toolchains.mpi_bin(packages, mpi):
                found.append(
                    {
                        "name": f"{label}-{mpi}",
                        **compilers_,
                        "mpi": mpi,
                        **({} if i == 0 else {"default": False}),
                    }
                )
    module_found, module_notes = _module_toolchains(packages, gcc)
    meta_found, meta_notes = _meta_toolchains(packages, metas, bool(found + module_found))
    return found + module_found + meta_found, notes + module_notes + meta_notes


def _version(spec):
    """The version of an external's spec (``openmpi@4.1.4~cuda+cxx ...`` -> ``4.1.4``)."""
    match = re.match(r"[^@\s]+@([0-9A-Za-z._-]+)", spec)
    return match.group(1) if match else ""


def _module_compilers(packages):
    """[(package, external, languages)] of the compilers offered as modules, GCC before
    Clang, the newest first."""
    compilers = []
    for name in COMPILER_NAMES:
        for ext in _newest_first(packages, name):
            langs = ext.get("extra_attributes", {}).get("compilers", {})
            if ext.get("modules") and "c" in langs and "cxx" in langs:
                compilers.append((name, ext, langs))
    return compilers


def _module_mpis(packages):
    return [
        (mpi, ext)
        for mpi in TOOLCHAIN[0][1]
        for ext in (packages.get(mpi) or {}).get("externals") or []
        if ext.get("modules")
    ]


def _module_toolchains(packages, path_gcc):
    """Toolchains of the compilers and MPIs offered as modules. In a hierarchy (an MPI
    module that loads only after a compiler module: its external's ``modules`` start with
    that compiler's), each compiler with each MPI built with it, loading the MPI's
    parents and the MPI in order. A flat tree's MPIs: the first compiler module (GCC
    before Clang, the newest version first, as Spack prefers) with each, each further
    compiler with the first only. Toolchains of a compiler after the first have ``default:
    false``, as for compilers on PATH (``--toolchain NAME`` or ``all`` takes them). A
    compiler without Fortran (Clang) takes GCC's: the one on PATH, else the first GCC
    module's, which the toolchain then loads too."""
    compilers, mpis, notes = _module_compilers(packages), _module_mpis(packages), []
    gcc_modules = [e for n, e, langs in compilers if n == "gcc" and "fortran" in langs]
    found = []
    for name, ext, langs in compilers:
        version = _version(ext["spec"])
        spec = f"{name}@{version}" if version else name
        fortran, fortran_modules = _fortran_beside(spec, langs, path_gcc, gcc_modules)
        if fortran is None:
            notes.append(f"module {ext['modules'][-1]}: no Fortran compiler: not proposed")
            continue
        label = f"{COMPILER_NAMES[name]}{version.split('.')[0]}"
        first = not found
        own = [(mpi, m) for mpi, m in mpis if m["modules"][:-1] and _below(m, ext["modules"])]
        flat = [(mpi, m) for mpi, m in mpis if not m["modules"][:-1]]
        for mpi, mext in own + (flat if first else flat[:1]):
            mversion = _version(mext["spec"])
            tc_name = f"{label}-{mpi}{mversion.split('.')[0]}"
            if any(t["name"] == tc_name for t in found):
                tc_name = f"{label}-{mpi}{mversion}"
            found.append(
                {
                    "name": tc_name,
                    "c": spec,
                    "cxx": spec,
                    "fortran": fortran,
                    "mpi": f"{mpi}@{mversion}" if mversion else mpi,
                    "modules": list(
                        dict.fromkeys([*ext["modules"], *fortran_modules, *mext["modules"]])
                    ),
                    **({} if first else {"default": False}),
                }
            )
    return found, notes


def _below(mpi_ext, compiler_modules):
    """Whether an MPI module of a hierarchy loads below these compiler modules."""
    return set(mpi_ext["modules"][:-1]) <= set(compiler_modules)


def _meta_toolchains(packages, metas, others):
    """Toolchains of meta-modules (EasyBuild's ``foss/2023a``, Cray's ``PrgEnv-gnu``)
    that load a compiler and an MPI found as externals: the toolchain loads the
    meta-module alone. ``default: false`` where ``others`` were proposed (the same
    compilers and MPI as one of them: Spack builds once for both)."""
    compilers, mpis = _module_compilers(packages), _module_mpis(packages)
    found, notes = [], []
    for meta in metas:
        loads = set(meta["loads"])
        with_c = [(n, e, langs) for n, e, langs in compilers if e["modules"][-1] in loads]
        with_mpi = [(mpi, m) for mpi, m in mpis if m["modules"][-1] in loads]
        fortran = [c for c in with_c if "fortran" in c[2]]
        if not (fortran and with_mpi):
            what = "collection" if meta.get("collection") else "meta-module"
            notes.append(
                f"{what} {meta['module']} loads {', '.join(meta['loads']) or 'nothing'}:"
                " no C, C++ and Fortran compiler and MPI found behind those: not proposed"
            )
            continue
        (name, ext, _), (mpi, mext) = fortran[0], with_mpi[0]
        version, mversion = _version(ext["spec"]), _version(mext["spec"])
        spec = f"{name}@{version}" if version else name
        if meta.get("collection"):  # restored, in ReFrame's collection form
            label, loads = f"collection-{meta['module']}", {"collection": meta["module"]}
        else:
            parts = meta["module"].split("/")
            label = "-".join([module_tree.family_of(meta["module"]), *parts[-1:]])
            loads = {"modules": list(meta["modules"])}
        found.append(
            {
                "name": re.sub(r"[^A-Za-z0-9._-]", "-", label)[:64],
                "c": spec,
                "cxx": spec,
                "fortran": spec,
                "mpi": f"{mpi}@{mversion}" if mversion else mpi,
                **loads,
                **({"default": False} if others else {}),
            }
        )
    return found, notes


def _fortran_beside(spec, langs, path_gcc, gcc_modules):
    """(the Fortran compiler of a toolchain whose C compiler is ``spec``, the modules it
    needs loaded), or (None, []) when there is none."""
    if "fortran" in langs:
        return spec, []
    if "fortran" in path_gcc:
        return "gcc", []
    if gcc_modules:
        return f"gcc@{_version(gcc_modules[0]['spec'])}", list(gcc_modules[0]["modules"])
    return None, []


def _newest_first(packages, name):
    """The externals of package ``name``, the newest version first."""
    externals = (packages.get(name) or {}).get("externals") or []
    return sorted(externals, key=lambda e: _version_key(_version(e["spec"])), reverse=True)


def _version_key(version):
    """``12.2.0`` -> (12, 2, 0), for ordering versions; parts that are not numbers sort
    first."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def write_toolchains(packages, modules_setting=None):
    """Write the local site's detected toolchains (and, where some load modules, the
    modules system they are loaded with) and their Spack files; return them."""
    proposed, notes = propose_toolchains(packages)
    for note in notes:
        print(f"==> {note}", file=sys.stderr)
    parsed, problems = toolchains.parse(proposed, "detection")
    if problems or not parsed:
        raise SitebenchError(
            "no toolchain found: a C, C++ and Fortran compiler and an MPI with its launcher",
            "install them (Debian: apt-get install gcc g++ gfortran openmpi-bin "
            "libopenmpi-dev) and rerun `./sitebench detect --redetect`",
        )
    data = {"toolchains": [tc.as_dict() for tc in parsed]}
    if modules_setting and any(tc.loads_modules for tc in parsed):
        data = {"modules": modules_setting, **data}
    write_atomic(
        paths.site_config_dir(SITE) / toolchains.DETECTED,
        "# Detected on this machine by `sitebench detect`; not in git. Each toolchain is\n"
        "# built and run, a `default: false` one only when `--toolchain` names it\n"
        "# (sitebench/sites/toolchains.py); edit to drop one.\n"
        + yaml.safe_dump(data, sort_keys=False),
    )
    toolchains.write_spack_files(parsed, spack_dir())
    print(f"==> toolchains: {', '.join(tc.name for tc in parsed)}", file=sys.stderr)
    return parsed


def detect(spack, redetect=False):
    """Detect the local site once; return the topology.

    Two first commands at once in one checkout (two terminals, or the test suite's
    workers) detect one after the other: the second waits on the lock, then finds the
    files the first wrote instead of rewriting them half-way through."""
    # The lock beside the detected files, git-ignored with them.
    with one_at_a_time(spack_dir() / ".detect.lock"):
        if is_detected() and not redetect:
            return json.loads(topology_file().read_text())
        return _detect(spack)


def _detect(spack):
    topology = detect_topology()
    module_packages, modules_setting = detect_modules(spack)
    packages = detect_spack_packages(spack, module_packages)
    packages["stream"] = {"require": [stream_requirement(topology)]}
    spack_dir().mkdir(parents=True, exist_ok=True)
    write_atomic(
        spack_dir() / "packages.yaml",
        "# Detected on this machine by `sitebench detect`; not in git. Redo with\n"
        "# `./sitebench detect --redetect`. STREAM arrays: "
        f"{STREAM_CACHE_FACTOR} x last-level cache.\n"
        + yaml.safe_dump({"packages": packages}, sort_keys=False),
    )
    write_toolchains(packages, modules_setting)
    write_atomic(topology_file(), json.dumps(topology, indent=2) + "\n")
    return topology


def _reference_blas_external():
    """Debian's reference BLAS/LAPACK (libblas3, liblapack3) as netlib-lapack.

    Debian installs them in private directories behind the libblas.so.3
    alternative, which usually points at OpenBLAS: linking -lblas from /usr
    would run OpenBLAS. The external's prefix is a directory of symlinks to
    the reference libraries, and binaries get an RPATH to it.
    """
    triplet = subprocess.run(
        ["gcc", "-print-multiarch"], capture_output=True, text=True
    ).stdout.strip()
    libdir = Path("/usr/lib", triplet)
    blas, lapack = libdir / "blas" / "libblas.so.3", libdir / "lapack" / "liblapack.so.3"
    if not (triplet and blas.is_file() and lapack.is_file() and shutil.which("dpkg-query")):
        return None
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "libblas3"], capture_output=True, text=True
    )
    version = proc.stdout.strip().split("-")[0]
    if proc.returncode != 0 or not version:
        return None

    def fill(fresh):
        (fresh / "lib").mkdir()
        for name, target in (
            ("libblas.so", blas),
            ("libblas.so.3", blas),
            ("liblapack.so", lapack),
            ("liblapack.so.3", lapack),
        ):
            (fresh / "lib" / name).symlink_to(target.resolve())

    # The machine's (it is in the hashes); other checkouts build against it meanwhile.
    farm, passed = publish_shared("netlib-lapack", buildcache.externals_dirs(), fill)
    say_private_prefixes(passed)
    if farm is None:
        return None
    return {
        "externals": [
            {"spec": f"netlib-lapack@{version}~external-blas+shared~lapacke", "prefix": str(farm)}
        ],
        "buildable": False,
    }

"""A module tree whose compilers and MPIs live in prefixes of their own, for both module
systems (tests/test_modules.py).

* ``gcc/12``: a prefix whose ``bin/`` holds ``gcc``, ``g++`` and ``gfortran`` (Debian's
  GCC 12 under its versioned names);
* ``openmpi/<v>`` and ``mpich/<v>``: each MPI's own prefix (``sitebench.discovery.mpi_prefix``,
  as detection makes them for Debian's side-by-side MPIs), versions as Debian's packages;
* ``broken/1`` fails to load, ``ghost/1`` puts a directory that does not exist on PATH;
* beside it (:func:`build_compilers_shared`), ``gcc/12``, ``gcc/11`` (Debian's GCC 11,
  unpacked), ``clang/14`` (Debian's Clang, with OpenMP from ``libomp-dev``) and Open MPI,
  for compiler against compiler.

Modulefiles are Tcl (``#%Module``): Lmod reads them too. None of the prefixes is on PATH.

The Tcl Environment Modules (``envmod``) conflict with Lmod as Debian packages; where Lmod
is installed, the test suite runs Debian's ``environment-modules`` unpacked beside it
(:func:`envmod_command`; ``debian_unpacked`` fetches and unpacks it once per user).
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import debian_unpacked
from sitebench.discovery import mpi_prefix
from sitebench.spack import buildcache

LMOD = "/usr/share/lmod/lmod/libexec/lmod"
#: Where Debian's environment-modules puts its command (installed, or in the unpacked tree).
MODULECMD = "usr/lib/x86_64-linux-gnu/modulecmd.tcl"


#: A compiler prefix's programs (Debian names them with a version suffix: gcc-12).
COMPILER_PROGRAMS = ("gcc", "g++", "gfortran")
CLANG_PROGRAMS = ("clang", "clang++")
#: The program Spack's detection of each MPI looks for (its recipe's ``executables``).
DETECTED_BY = {"openmpi": ("ompi_info",), "mpich": ("mpichversion",)}


class Missing(Exception):
    """A module system this machine lacks and the tests cannot prepare: why, and the fix."""


def envmod_command():
    """The Tcl Environment Modules' command: installed, else Debian's package unpacked in
    the user's cache (fetched by the first test that asks); :class:`Missing` says why not."""
    if not shutil.which("tclsh"):
        raise Missing("no tclsh, which the Tcl Environment Modules run in: apt-get install lmod")
    installed = Path("/") / MODULECMD
    if installed.is_file():
        return str(installed)
    try:
        return str(debian_unpacked.envmod() / MODULECMD)
    except debian_unpacked.Unavailable as err:
        raise Missing(f"the Tcl Environment Modules: {err}") from None


def lmod_command():
    if not Path(LMOD).is_file():
        raise Missing("Lmod is not installed: apt-get install lmod (README's line for the tests)")
    return LMOD


def gcc11_bin():
    """Debian's GCC 11 unpacked (off PATH: installed, ``/usr/bin/gcc-11`` would become a
    second compiler of the local site); :class:`Missing` says why not."""
    try:
        return debian_unpacked.gcc11() / "usr" / "bin"
    except debian_unpacked.Unavailable as err:
        raise Missing(f"Debian's GCC 11: {err}") from None


def debian_version(package):
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
    )
    return proc.stdout.split("-")[0].split(":")[-1] if proc.returncode == 0 else ""


def _modulefile(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#%Module\n" + "".join(f"{line}\n" for line in lines))


def shared_root():
    """Where the tree lives for every checkout and test run of this user: its prefixes are
    in the hashes of whatever is built with them, so the same place lets the machine's
    binary cache serve those builds again (a fresh place rebuilt OSU twice: 314 s)."""
    return buildcache.externals_dir() / "test-module-tree"


def build_shared():
    """The tree at :func:`shared_root`, made once."""
    return _made_once(shared_root(), lambda tmp, final: build(tmp, final=final))


def _made_once(final, make):
    """The world.json of the tree at ``final``, made by ``make(tmp, final)`` (which returns
    it) in a directory beside ``final`` and renamed into place when missing: two test runs
    at once both end with one whole tree."""
    if not (final / "world.json").is_file():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        (tmp / "world.json").write_text(json.dumps(make(tmp, final)))
        try:
            tmp.rename(final)
        except OSError:  # another run made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return json.loads((final / "world.json").read_text())


def _compiler_prefix(prefix, programs):
    """``prefix/bin`` holding a compiler's programs as links to ``programs`` ({name: path})."""
    (prefix / "bin").mkdir(parents=True)
    for name, program in programs.items():
        (prefix / "bin" / name).symlink_to(program)


def build(root, final=None):
    """Make the tree under ``root`` (whose paths name ``final``, where it will be renamed
    to, default ``root``); return {"modulepath", "gcc", "openmpi", "mpich"} (module names)."""
    root = Path(root)
    final = Path(final or root)
    tree = root / "modulefiles"
    world = {"modulepath": str(final / "modulefiles")}
    _compiler_prefix(root / "gcc-12", {n: shutil.which(f"{n}-12") for n in COMPILER_PROGRAMS})
    _modulefile(tree / "gcc" / "12", [f"prepend-path PATH {final}/gcc-12/bin"])
    world["gcc"] = "gcc/12"
    for mpi, package in (("openmpi", "libopenmpi-dev"), ("mpich", "libmpich-dev")):
        version = debian_version(package)
        prefix = mpi_prefix.make(mpi, root / f"{mpi}-{version}")
        # What Spack's detection runs to find and version each MPI, as in a real prefix.
        for program in DETECTED_BY[mpi]:
            (prefix / "bin" / program).symlink_to(shutil.which(program))
        _modulefile(
            tree / mpi / version,
            [f"prepend-path PATH {final / prefix.name}/bin", f"setenv SITEBENCH_TEST_MPI {mpi}"],
        )
        world[mpi] = f"{mpi}/{version}"
    _modulefile(tree / "broken" / "1", ['error "broken on purpose"'])
    _modulefile(tree / "ghost" / "1", [f"prepend-path PATH {final}/not-installed/bin"])
    return world


def build_compilers_shared():
    """A second module path beside :func:`build_shared`'s tree, for compiler against
    compiler: ``gcc/12`` and Open MPI as in that tree (the same prefixes, so what was built
    with them comes from the binary cache), ``gcc/11``, Debian's GCC 11 unpacked, and
    ``clang/14``, Debian's Clang (each a prefix of its own); made once, beside and renamed,
    as the tree. Returns {"modulepath", "gcc", "gcc11", "clang", "openmpi"} (module
    names)."""
    shared = build_shared()
    gcc11 = gcc11_bin()

    def make(tmp, final):
        _compiler_prefix(tmp / "gcc-11", {n: gcc11 / f"{n}-11" for n in COMPILER_PROGRAMS})
        _compiler_prefix(tmp / "clang-14", {n: f"/usr/bin/{n}-14" for n in CLANG_PROGRAMS})
        tree = tmp / "modulefiles"
        _modulefile(tree / "gcc" / "11", [f"prepend-path PATH {final}/gcc-11/bin"])
        _modulefile(tree / "clang" / "14", [f"prepend-path PATH {final}/clang-14/bin"])
        for module in (shared["gcc"], shared["openmpi"]):
            (tree / module).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(shared["modulepath"]) / module, tree / module)
        world = {"modulepath": str(final / "modulefiles"), "gcc11": "gcc/11", "clang": "clang/14"}
        return world | {k: shared[k] for k in ("gcc", "openmpi")}

    # Named by what it holds: a tree made before clang/14 was added is not reused. Not
    # "...-clang": Spack's LLVM detection drops any path matching "-cl" (clang-cl).
    return _made_once(shared_root() / "compilers-llvm", make)


def environ(kind, command, modulepath, base=None):
    """A shell's environment where ``kind``'s module system is initialized with the tree:
    what a login shell of the site gives (``$LMOD_CMD`` or ``$MODULES_CMD``, MODULEPATH),
    and for envmod a ``modulecmd`` on PATH (ReFrame's envmod backend runs it)."""
    env = dict(os.environ if base is None else base)
    env.pop("LMOD_CMD", None)
    env.pop("MODULES_CMD", None)
    env["MODULEPATH"] = modulepath
    if kind == "lmod":
        env["LMOD_CMD"] = command
    else:
        env["MODULES_CMD"] = command
        shim = Path(modulepath).parent / "envmod-bin"
        shim.mkdir(exist_ok=True)
        # Written beside and renamed: test runs at once share the tree.
        text = f'#!/bin/sh\nexec tclsh {command} "$@"\n'
        target = shim / "modulecmd"
        if not target.is_file() or target.read_text() != text:
            fd, name = tempfile.mkstemp(dir=shim)
            os.close(fd)  # an executable still open for writing cannot run (ETXTBSY)
            Path(name).write_text(text)
            Path(name).chmod(0o755)
            Path(name).rename(target)
        env["PATH"] = f"{shim}:{env['PATH']}"
    return env


def _luafile(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def build_hierarchy_shared(kind):
    """A hierarchical tree as production clusters lay it out, over the prefixes of
    :func:`build_shared` (so builds with them come from the binary cache), made once per
    module system. ``MODULEPATH`` is ``Core/`` alone:

    * ``gcc/12`` (the default: ``default`` marker) adds ``Compiler/gcc/12/`` to MODULEPATH,
      where ``mpi/openmpi/<v>`` (a category-style name) and ``mpich/<v>`` (with a
      ``prereq`` on ``gcc/12``) live, both of the ``mpi`` family;
    * ``aocc/4`` (Lmod), of the ``compiler`` family like ``gcc/12``: loading it swaps GCC
      out; it offers no compiler Spack finds;
    * ``foss/2023a``: EasyBuild's meta-module, loading ``gcc/12`` and Open MPI;
    * ``StdEnv/1`` (Lmod): sticky, as a site's default modules are.

    Lmod's files are Lua (``family``, ``prereq``, sticky are Lmod's); the Tcl tree's are
    Tcl (``prereq``, ``conflict``). Returns {"modulepath", "gcc", "openmpi", "mpich",
    "foss", "core"}."""
    shared = build_shared()
    flat = Path(shared["modulepath"]).parent
    versions = {mpi: shared[mpi].split("/")[1] for mpi in ("openmpi", "mpich")}

    def make(tmp, final):
        core, below = tmp / "Core", tmp / "Compiler" / "gcc" / "12"
        final_below = final / "Compiler" / "gcc" / "12"
        ompi, mpich = f"mpi/openmpi/{versions['openmpi']}", f"mpich/{versions['mpich']}"
        ompi_bin = f"{flat}/openmpi-{versions['openmpi']}/bin"
        mpich_bin = f"{flat}/mpich-{versions['mpich']}/bin"
        if kind == "lmod":
            _luafile(
                core / "gcc" / "12.lua",
                [
                    'family("compiler")',
                    f'prepend_path("PATH", "{flat}/gcc-12/bin")',
                    f'prepend_path("MODULEPATH", "{final_below}")',
                ],
            )
            (core / "gcc" / "default").symlink_to("12.lua")
            _luafile(core / "aocc" / "4.lua", ['family("compiler")', 'setenv("AOCC", "4")'])
            _luafile(
                below / f"{ompi}.lua",
                ['family("mpi")', f'prepend_path("PATH", "{ompi_bin}")'],
            )
            _luafile(
                below / f"{mpich}.lua",
                ['family("mpi")', 'prereq("gcc/12")', f'prepend_path("PATH", "{mpich_bin}")'],
            )
            _luafile(core / "foss" / "2023a.lua", ['load("gcc/12")', f'load("{ompi}")'])
            _luafile(
                core / "StdEnv" / "1.lua",
                ['add_property("lmod", "sticky")', 'setenv("SITEBENCH_STDENV", "1")'],
            )
        else:
            _modulefile(
                core / "gcc" / "12",
                [f"prepend-path PATH {flat}/gcc-12/bin", f"prepend-path MODULEPATH {final_below}"],
            )
            (core / "gcc" / ".version").write_text('#%Module\nset ModulesVersion "12"\n')
            _modulefile(below / ompi, ["conflict mpi", f"prepend-path PATH {ompi_bin}"])
            _modulefile(
                below / mpich, ["conflict mpi", "prereq gcc/12", f"prepend-path PATH {mpich_bin}"]
            )
            _modulefile(core / "foss" / "2023a", ["module load gcc/12", f"module load {ompi}"])
        return {
            "modulepath": str(final / "Core"),
            "core": str(final / "Core"),
            "gcc": "gcc/12",
            "openmpi": ompi,
            "mpich": mpich,
            "foss": "foss/2023a",
        }

    return _made_once(shared_root() / f"hierarchy-{kind}", make)

"""Which root of an environment's ``spack.lock`` is a benchmark built with one toolchain.

An environment's spec matrix crosses its benchmarks with its toolchains (``hpl`` x
``%gcc-openmpi``, ``%gcc-mpich``), so a package can be two roots. Spack expands a toolchain
when it reads the spec and keeps the expansion in the lock, e.g.
``hpl %[when='%c'] c=gcc %[when='%cxx'] cxx=gcc ... %[when='%mpi'] mpi=mpich``; a build
fixture finds its root by the package name and its toolchain's compilers and MPI (the
ReFrame environment's ``extras``), and installs it by hash. An environment without
toolchains has one root per package, found by name as before.
"""

import json
import re
from pathlib import Path

from sitebench.common.errors import SitebenchError

#: One applied part of a toolchain in a root's abstract spec: (when-virtual, virtual, provider).
_PART = re.compile(r"%\[when='%(\w+)'\]\s+(\w+)=([\w.@=-]+)")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


def parts_of(spec):
    """{virtual: provider} of the toolchain applied to a root's abstract spec."""
    return {virtual: provider for _when, virtual, provider in _PART.findall(spec)}


def roots(env_dir):
    """[(package name, {virtual: provider}, hash)] of the lock's roots, in order."""
    path = Path(env_dir) / "spack.lock"
    if not path.is_file():
        return []
    lock = json.loads(path.read_text())
    found = []
    for root in lock.get("roots", []):
        match = _NAME.match(root.get("spec", ""))
        if match:
            found.append((match.group(0), parts_of(root["spec"]), root["hash"]))
    return found


def wanted(extras):
    """{virtual: provider} a ReFrame environment's ``extras`` ask for (compilers, MPI)."""
    want = dict((extras or {}).get("compilers") or {})
    if (extras or {}).get("mpi"):
        want["mpi"] = extras["mpi"]
    return want


class NoRootForToolchain(SitebenchError):
    """The lock has ``package`` built with toolchains, but not with the one asked for."""


def root_for(env_dir, package, extras):
    """The hash of ``package``'s root built with the environment's toolchain, or None where
    the lock has no toolchain root of it (found by name then). A lock whose roots of it are
    all another toolchain's raises :class:`NoRootForToolchain`: installing by name there
    would run another compiler's or MPI's binary under this toolchain's name."""
    want = wanted(extras)
    if not want:
        return None
    others = []
    for name, parts, digest in roots(env_dir):
        if name != package or not parts:
            continue
        if all(
            _same_provider(want.get(virtual, provider), provider)
            for virtual, provider in parts.items()
        ):
            return digest
        others.append(_shown(parts))
    if others:
        raise NoRootForToolchain(
            f"{Path(env_dir) / 'spack.lock'} has no {package} built with {_shown(want)}, "
            f"only with {'; '.join(others)}: the environment was concretized for other "
            "toolchains",
            "`./sitebench run --toolchain NAME` re-concretizes for the toolchains it runs",
        )
    return None


def install_target(env_dir, package, extras, concretize):
    """What a build fixture installs and then asks ``spack find`` about: ``/<hash>`` of
    ``package``'s root built with the toolchain of ``extras``, else the package name (an
    environment without toolchain roots of it has one root by that name).

    An environment not concretized yet (no ``spack.lock``: plain ``reframe`` in a fresh
    checkout) is concretized first by ``concretize()``. By name there, ``spack install``
    concretizes the whole environment and installs every root the name matches, one per
    toolchain (Open MPI's and MPICH's OSU): two builds, and ``spack find`` of the name then
    reports two installs ("spack did not report one installed")."""
    if wanted(extras) and not (Path(env_dir) / "spack.lock").is_file():
        concretize()
    root = root_for(env_dir, package, extras)
    return f"/{root}" if root else package


def _shown(parts):
    """{virtual: provider} as a toolchain reads in Spack's spec syntax: ``c=gcc mpi=mpich``."""
    return " ".join(f"{virtual}={provider}" for virtual, provider in parts.items())


#: Spack's compiler packages under the names its specs may print (``%c=llvm`` is kept in a
#: lock as ``c=clang``): spack/aliases.py.
_ALIASES = {"clang": "llvm", "oneapi": "intel-oneapi-compilers", "rocmcc": "llvm-amdgpu"}


def _same_provider(wanted_provider, locked):
    """``gcc@12.2.0`` is not ``gcc@11.3.0`` (two GCCs of a site are two toolchains); a
    provider named without a version (``openmpi``) is any version of it; ``clang`` is
    ``llvm``."""
    want_name, _, want_version = wanted_provider.partition("@")
    name, _, version = locked.partition("@")
    same_name = _ALIASES.get(want_name, want_name) == _ALIASES.get(name, name)
    return same_name and (not want_version or not version or want_version == version)

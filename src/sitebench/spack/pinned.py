"""Find (or clone) the pinned Spack and run it isolated from the user's ~/.spack.

Which Spack:
  1. ``$SPACK_ROOT/bin/spack`` when SPACK_ROOT is set;
  2. ``spack`` on PATH;
  3. a clone at the pinned release under ``.sitebench/spack``, made on first
     use from ``$SITEBENCH_SPACK_GIT`` (default: GitHub).
Its version must be the pinned one; anything else stops with a message.

The builtin package repository is pinned as well: ``$SITEBENCH_SPACK_PACKAGES``
(an existing checkout) or a clone of ``$SITEBENCH_SPACK_PACKAGES_GIT`` at the
pinned tag under ``.sitebench/spack-packages``.

Isolation: Spack's user scope, system scope and caches are redirected into
``.sitebench/`` (SPACK_USER_CONFIG_PATH, SPACK_SYSTEM_CONFIG_PATH,
SPACK_USER_CACHE_PATH), so neither the user's ``~/.spack`` nor ``/etc/spack``
changes what is built, and nothing of ours lands there.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import one_at_a_time
from sitebench.common.files import write_atomic
from sitebench.spack import buildcache, repo_index

SPACK_VERSION = "1.1.0"
SPACK_REF = "v1.1.0"
SPACK_GIT = "https://github.com/spack/spack.git"
PACKAGES_REF = "v2026.06.0"
PACKAGES_GIT = "https://github.com/spack/spack-packages.git"


def _git_url(location):
    # A local path is cloned shallowly only through a file:// URL.
    if "://" not in location and os.path.exists(location):
        return "file://" + os.path.abspath(location)
    return location


def _clone(url, ref, dest, what, env_var):
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"==> cloning {what} {ref} from {url} into {dest}", file=sys.stderr)
    proc = subprocess.run(
        ["git", "clone", "--quiet", "--depth", "1", "--branch", ref, _git_url(url), str(tmp)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SitebenchError(
            f"could not clone {what} {ref} from {url}: {proc.stderr.strip()}",
            f"set {env_var} to a git repository (URL or local path) that has the tag {ref}",
        )
    tmp.rename(dest)  # a half-made clone is never mistaken for a good one
    return dest


def git_commit(path):
    """The commit of a git checkout, or None when it is not one."""
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


class Spack:
    """One Spack installation, run with sitebench's isolated configuration."""

    def __init__(self, executable, root=None):
        self.executable = str(executable)
        self.root = Path(root) if root else None
        state = paths.state_dir()
        self.config_dir = state / "spack-config"
        self.system_dir = state / "spack-system"
        self.cache_dir = state / "spack-cache"
        self.buildcache = None  # the machine binary cache, once set up

    # -- environment -------------------------------------------------------
    def environ(self, base=None):
        """Environment variables for every Spack (and ReFrame) process."""
        env = dict(os.environ if base is None else base)
        env["SPACK_USER_CONFIG_PATH"] = str(self.config_dir)
        env["SPACK_SYSTEM_CONFIG_PATH"] = str(self.system_dir)
        env["SPACK_USER_CACHE_PATH"] = str(self.cache_dir)
        env.pop("SPACK_DISABLE_LOCAL_CONFIG", None)  # it would drop our scope too
        env.pop("SPACK_ENV", None)  # never act on an environment the user activated
        # Spack needs clingo; our venv has it, so let Spack run on our Python.
        env.setdefault("SPACK_PYTHON", sys.executable)
        # Spack first, then our venv (reframe; the style tools `spack style` runs).
        spack_bin, venv_bin = str(Path(self.executable).parent), os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([spack_bin, venv_bin, env.get("PATH", "")])
        return env

    def run(self, *args, capture=False, check=True, cwd=None, env=None):
        cmd = [self.executable, *map(str, args)]
        proc = subprocess.run(
            cmd,
            env=self.environ(env),
            cwd=cwd,
            text=True,
            capture_output=capture,
        )
        if check and proc.returncode != 0:
            detail = (proc.stderr or "").strip()[-2000:] if capture else ""
            raise SitebenchError(
                f"`spack {' '.join(map(str, args))}` failed (exit {proc.returncode})"
                + (f":\n{detail}" if detail else ""),
                "read Spack's message above; `./sitebench spack ...` reruns Spack "
                "with the same isolated configuration",
            )
        return proc

    def version(self):
        # Asked by setup and again by the run's provenance: one Spack start (0.65 s) is enough.
        if getattr(self, "_version", None) is None:
            self._version = self._ask_version()
        return self._version

    def _ask_version(self):
        proc = self.run("--version", capture=True, check=False)
        if proc.returncode != 0:
            raise SitebenchError(
                f"{self.executable} --version failed: {proc.stderr.strip()}",
                "make sure it is a working Spack (it needs Python 3.6+ and clingo)",
            )
        return proc.stdout.split()[0] if proc.stdout.strip() else ""

    def check_version(self):
        found = self.version()
        if found != SPACK_VERSION:
            raise SitebenchError(
                f"sitebench is pinned to Spack {SPACK_VERSION}, but {self.executable} is "
                f"Spack {found}",
                f"put Spack {SPACK_VERSION} first on PATH or in SPACK_ROOT, or unset both "
                f"so that sitebench clones {SPACK_REF} into {paths.state_dir() / 'spack'}",
            )
        return found

    def commit(self):
        root = self.root or Path(self.resolve_root())
        return git_commit(root)

    def resolve_root(self):
        if self.root:
            return str(self.root)
        # bin/spack takes its root as its own real path's grandparent: no Spack start needed.
        root = Path(self.executable).resolve().parent.parent
        if (root / "lib" / "spack" / "spack").is_dir():
            return str(root)
        proc = self.run("location", "--spack-root", capture=True, check=False)
        return proc.stdout.strip()

    # -- configuration -----------------------------------------------------
    def write_scope(self, builtin_repo, mirror=None, cache=None):
        """Write sitebench's private Spack scope (the redirected user scope): the source
        ``mirror`` URL and the machine binary ``cache`` (:mod:`buildcache`), if any."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.system_dir.mkdir(parents=True, exist_ok=True)
        files = {
            "repos.yaml": {"repos": {"builtin": str(builtin_repo)}},
            "config.yaml": {
                "config": {
                    # Padded: binaries of the machine cache relocate into any tree.
                    "install_tree": {
                        "root": str(paths.state_dir() / "spack-store"),
                        "padded_length": buildcache.PADDED_LENGTH,
                    },
                    "source_cache": str(paths.state_dir() / "spack-source-cache"),
                    "checksum": True,
                }
            },
        }
        mirrors = {}
        if mirror:
            mirrors["sitebench"] = {"url": mirror, "source": True, "binary": False}
        if cache:
            mirrors[buildcache.MIRROR] = cache.mirror()
        if mirrors:
            files["mirrors.yaml"] = {"mirrors": mirrors}
        else:
            (self.config_dir / "mirrors.yaml").unlink(missing_ok=True)
        for name, data in files.items():
            _write_yaml(self.config_dir / name, data)


def _write_yaml(path, data):
    write_atomic(
        path,
        "# Written by sitebench; regenerated on every run.\n"
        + yaml.safe_dump(data, sort_keys=False),
    )


def locate():
    """The Spack to use, before any version check (see the module docstring)."""
    root = os.environ.get("SPACK_ROOT")
    if root:
        exe = Path(root) / "bin" / "spack"
        if not exe.is_file():
            raise SitebenchError(
                f"SPACK_ROOT={root} has no bin/spack",
                "point SPACK_ROOT at a Spack checkout, or unset it",
            )
        return Spack(exe, root)
    on_path = shutil.which("spack")
    if on_path:
        return Spack(on_path)
    clone = paths.state_dir() / "spack"
    if not (clone / "bin" / "spack").is_file():
        url = os.environ.get("SITEBENCH_SPACK_GIT", SPACK_GIT)
        _clone(url, SPACK_REF, clone, "Spack", "SITEBENCH_SPACK_GIT")
    return Spack(clone / "bin" / "spack", clone)


def builtin_repo():
    """Path of the pinned builtin package repository (``.../spack_repo/builtin``)."""
    given = os.environ.get("SITEBENCH_SPACK_PACKAGES")
    if given:
        base = Path(given)
        for candidate in (base, base / "repos" / "spack_repo" / "builtin"):
            if (candidate / "repo.yaml").is_file() and (candidate / "packages").is_dir():
                return candidate.resolve()
        raise SitebenchError(
            f"SITEBENCH_SPACK_PACKAGES={given} is not a spack-packages checkout",
            "point it at a spack-packages checkout (the directory holding "
            "repos/spack_repo/builtin)",
        )
    clone = paths.state_dir() / "spack-packages"
    if not (clone / "repos").is_dir():
        url = os.environ.get("SITEBENCH_SPACK_PACKAGES_GIT", PACKAGES_GIT)
        _clone(url, PACKAGES_REF, clone, "spack-packages", "SITEBENCH_SPACK_PACKAGES_GIT")
    return (clone / "repos" / "spack_repo" / "builtin").resolve()


def mirror_url():
    """The source mirror override, checked; None when not set."""
    given = os.environ.get("SITEBENCH_MIRROR")
    if not given:
        return None
    if "://" in given and not given.startswith("file://"):
        return given
    path = Path(given.removeprefix("file://"))
    if not path.is_dir():
        raise SitebenchError(
            f"SITEBENCH_MIRROR={given} does not exist",
            "point SITEBENCH_MIRROR at a Spack source mirror (made with `spack mirror create`) "
            "or unset it to fetch from upstream",
        )
    return "file://" + str(path.resolve())


def setup():
    """Locate, check and configure Spack; return a ready :class:`Spack`.

    Under a lock of the checkout's state: two first commands at once (two terminals, the
    test suite's workers) would otherwise both clone Spack into the same `.partial`
    directory and both rewrite its configuration."""
    with one_at_a_time(paths.state_dir() / ".spack-setup.lock"):
        return _setup()


def _setup():
    spack = locate()
    spack.check_version()
    builtin = builtin_repo()
    spack.buildcache = buildcache.machine_cache()
    spack.write_scope(builtin, mirror_url(), spack.buildcache)
    buildcache.refresh_index(spack, spack.buildcache)  # what other checkouts pushed
    if repo_index.seed(spack, builtin):  # a fresh checkout need not index it again
        print("==> Spack's repository indexes copied from the user's cache", file=sys.stderr)
    return spack

"""The roots the machine's binary cache holds whole, installed in one Spack call before
ReFrame starts.

Without it each build fixture of a new checkout starts Spack to install its own root from
the cache, and once more to find it (:mod:`sitebench.run.spack_build`): a Spack start,
the environment, the store's database and the cache's index read again per fixture.
Only a run of the whole suite does it (ReFrame options other than ``-S`` may select
checks, ``--toolchain`` toolchains, and a root nobody runs is not worth installing), and
only for roots whose every spec, dependencies included, the cache holds or the site
provides (externals): ``--use-buildcache only`` builds nothing, so the first figure of a
clone with an empty cache is not delayed. What is not installed here, for whatever
reason, its fixture installs (or builds) as before.
"""

import json
import sys
from pathlib import Path

from sitebench.spack import buildcache, damaged_binaries

#: ReFrame options that set variables and select nothing; anything else may select.
SETTING_OPTIONS = ("-S", "--setvar")


def whole_suite(reframe_args):
    """True when ``reframe_args`` (after ``--``) only set variables: every check runs."""
    args = list(reframe_args)
    while args:
        arg = args.pop(0)
        if arg in SETTING_OPTIONS:
            args = args[1:]  # its value
        elif not arg.startswith(("-S", "--setvar=")):  # -Sname=value, --setvar=name=value
            return False
    return True


def cached_hashes(cache_dir):
    """DAG hashes of the specs the binary cache at ``cache_dir`` holds (Spack's v3 layout
    names each spec's manifest ``<name>/<name>-<version>-<hash>.spec.manifest.json``)."""
    suffix = ".spec.manifest.json"
    return {
        manifest.name.removesuffix(suffix).rpartition("-")[2]
        for manifest in (Path(cache_dir) / buildcache.SPECS).glob(f"*/*{suffix}")
    }


def whole_in_cache(env_dir, installed, cached):
    """Hashes of the lock's roots that are not ``installed``, are ``cached`` and whose every
    dependency (of any type, all the way down) is ``cached`` or an external, in lock order."""
    lock = json.loads((Path(env_dir) / "spack.lock").read_text())
    specs = lock.get("concrete_specs", {})

    def held(digest, seen):
        if digest in seen:
            return True
        seen.add(digest)
        spec = specs.get(digest)
        if spec is None:
            return False
        if not spec.get("external") and digest not in cached:
            return False
        return all(held(dep["hash"], seen) for dep in spec.get("dependencies", []))

    roots = [root["hash"] for root in lock.get("roots", [])]
    # A root that is an external (the site's MariaDB) has nothing in the cache to install.
    return [
        h for h in dict.fromkeys(roots) if h not in installed and h in cached and held(h, set())
    ]


def install(spack, env_dir, installed):
    """Install from the machine cache, in one Spack call, the roots it holds whole; return
    how many were asked for (0: none, no Spack started)."""
    cache = getattr(spack, "buildcache", None)
    if cache is None:
        return 0
    cached = cached_hashes(cache.path)
    wanted = set(json.loads((Path(env_dir) / "spack.lock").read_text()).get("concrete_specs", {}))
    # A damaged binary is named here, not only in a build log: Spack would refuse it and
    # build from source saying only "No binary ... found".
    damaged = damaged_binaries.find(cache.path, (cached & wanted) - set(installed))
    cached -= damaged_binaries.set_aside(damaged, cache.writable)
    todo = whole_in_cache(env_dir, installed, cached)
    if not todo:
        return 0
    print(
        f"==> installing {len(todo)} roots from the binary cache {cache.path} in one "
        "Spack call (each is whole there)",
        file=sys.stderr,
    )
    proc = spack.run(
        "-e",
        env_dir,
        "install",
        "--use-buildcache",
        "only",
        *(f"/{h}" for h in todo),
        check=False,
    )
    if proc.returncode != 0:
        print(
            f"sitebench: warning: installing from the binary cache failed (exit "
            f"{proc.returncode}); the build fixtures install what is missing",
            file=sys.stderr,
        )
    return len(todo)

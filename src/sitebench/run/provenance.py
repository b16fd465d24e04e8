"""What a run needs to be reproduced and trusted, gathered into provenance/.

* ``spack.lock`` of the site's environment and ``specs.json``, the installed
  concrete specs (``spack find --json``);
* the Spack version and commit, the builtin repository and its commit;
* the sitebench commit (and whether the checkout had local changes);
* the hash of every file of the site's configuration;
* the detected CPU topology, ReFrame's version, the host and the command;
* the host fingerprint (``host_fingerprint``: CPU model, sockets, cores, CPUs, memory in
  GiB, rule in :mod:`sitebench.sites.host`) and the fingerprint the site's references say
  they were made on (``references_made_on``: their ``$host`` entry, null when they name none).
"""

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from sitebench import __version__

from sitebench.common import paths
from sitebench.common.errors import SitebenchError

from sitebench.spack.pinned import git_commit
from sitebench.sites import host


def site_config_hash(site_dir):
    """sha256 over the names and contents of every file of a site's config."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(site_dir).rglob("*") if p.is_file()):
        if "__pycache__" in path.parts:
            continue
        digest.update(str(path.relative_to(site_dir)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def sitebench_checkout():
    commit = git_commit(paths.ROOT)
    dirty = None
    if commit:
        proc = subprocess.run(
            ["git", "-C", str(paths.ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        )
        dirty = bool(proc.stdout.strip())
    return {"version": __version__, "commit": commit, "local_changes": dirty}


def reframe_version():
    try:
        import reframe

        return reframe.VERSION
    except ImportError:  # pragma: no cover - reframe is a dependency
        return None


def os_release():
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return None


def emulation_provenance(site):
    """How an emulated site's run was emulated (``emulation:`` in its site.yaml), else None.

    ``qemu`` is the version of the host's qemu-user-static, ``qemu_cpu`` the CPU it emulated,
    ``root`` the Debian root: ``./sitebench qemu-run`` passes them in from the host (the root
    has no QEMU of its own). Timings of such a run are the emulator's, not the CPU's."""
    emu = site.emulation
    if not emu:
        return None
    return {
        "qemu": os.environ.get("SITEBENCH_QEMU_VERSION") or None,
        "qemu_cpu": os.environ.get("QEMU_CPU") or emu["qemu_cpu"],
        "root": os.environ.get("SITEBENCH_EMULATION_ROOT") or emu["root"],
    }


def references_made_on(site):
    """The ``$host`` entry of the references file the run used, or None."""
    path = os.environ.get("SITEBENCH_REFERENCES") or site.references
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    try:
        return host.references_host(data, path) if isinstance(data, dict) else None
    except SitebenchError:
        return None  # `./sitebench validate` names the problem; the run is kept all the same


def slurm_provenance(cluster, dest):
    """Slurm's version, configuration and nodes as the run saw them."""
    for path in (cluster.layout.slurm_conf, cluster.layout.cluster_file):
        if path.is_file():
            shutil.copy2(path, dest / path.name)
    # sinfo needs the cluster's configuration even to print its version.
    version = subprocess.run(
        ["sinfo", "--version"], capture_output=True, text=True, env=cluster.env()
    )
    return {
        "name": "slurm",
        "version": version.stdout.strip() or None,
        "nodes": cluster.sinfo(),
        "slurm_conf": "slurm.conf",
    }


def collect(
    dest,
    *,
    site,
    spack,
    spack_version,
    builtin_repo,
    env_dir,
    topology,
    command,
    started,
    finished,
    reframe_exit,
    scheduler=None,
    extra=None,
):
    """Write the provenance of one run into ``dest`` (a ``provenance/`` dir).

    ``scheduler``: a :class:`sitebench.services.slurm.cluster.LocalCluster` the run used; its
    slurm.conf, cluster description and Slurm version are kept too. ``extra``: further
    keys (an interrupted run: ``partial``, ``interrupted``)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    lock = Path(env_dir) / "spack.lock"
    if lock.is_file():
        shutil.copy2(lock, dest / "spack.lock")
    specs = spack.run("-e", env_dir, "find", "--json", capture=True, check=False)
    if specs.returncode == 0:
        (dest / "specs.json").write_text(specs.stdout)
    (dest / "topology.json").write_text(json.dumps(topology, indent=2) + "\n")
    info = {
        "site": site.name,
        "started": started,
        "finished": finished,
        "command": command,
        "reframe_exit_code": reframe_exit,
        "spack": {
            "version": spack_version,
            "executable": spack.executable,
            "commit": spack.commit(),
        },
        "spack_builtin_repo": {"path": str(builtin_repo), "commit": git_commit(builtin_repo)},
        "sitebench": sitebench_checkout(),
        "site_config_sha256": site_config_hash(site.config_dir),
        "environment": paths.shown(env_dir),
        "reframe_version": reframe_version(),
        "cpu_arch": topology.get("arch"),
        "host": {
            "hostname": platform.node(),
            "kernel": platform.release(),
            "machine": platform.machine(),
            "os": os_release(),
            "python": sys.version.split()[0],
        },
    }
    info["host_fingerprint"] = host.detect()
    info["references_made_on"] = references_made_on(site)
    if scheduler is not None:
        info["scheduler"] = slurm_provenance(scheduler, dest)
    emulated = emulation_provenance(site)
    if emulated:
        # compare and the report show the emulation caveat for such runs.
        info["emulated"] = emulated
    info.update(extra or {})  # e.g. {"partial": true, "interrupted": "SIGINT"}
    # Written last: its presence marks the provenance complete.
    (dest / "provenance.json").write_text(json.dumps(info, indent=2) + "\n")
    return info

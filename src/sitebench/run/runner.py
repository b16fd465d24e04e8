"""The run stage: prepare a site (Spack set up, environment concretized once) and run
the suite on it with ReFrame, passing signals on so that ReFrame still writes its report.

ReFrame does the running and the judging (references, perflogs, its JSON report). Storing
what it wrote is the next stage's job (:mod:`sitebench.results.record`).
"""

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import reframe_executable
from sitebench.run import disturbance
from sitebench.run.scales import SCALES
from sitebench.run.spack_build import INSTALLED_ROOTS
from sitebench.sites import qemu_site, toolchains
from sitebench.discovery import local_site
from sitebench.onboarding.validate import validate_site
from sitebench.spack import cached_roots, environment, installed_roots
from sitebench.spack import pinned, repo_index

#: How long the machine's load is sampled before a run (seconds of the run's time).
BUSY_SAMPLE_S = 0.5


def site_topology(site):
    path = local_site.topology_file() if site.detected_here else site.config_dir / "topology.json"
    return json.loads(path.read_text()) if path.is_file() else {}


@dataclass
class Prepared:
    """A site ready to run: its Spack, and its environment concretized."""

    spack: object
    version: str
    builtin: Path
    env_dir: Path


def prepare(site):
    """Spack set up, site detected (local), environment concretized once."""
    spack = None
    if site.detected_here and not local_site.is_detected():
        # The local site's toolchains are detected: validation reads them.
        spack = pinned.setup()
        local_site.detect(spack)
    # Every file of the site, all problems at once (names, keys, fixes): onboarding/validate.py,
    # which also rewrites the Spack toolchains derived from the site's where they changed.
    validate_site(site.name)
    toolchains.selected(toolchains.load(site))  # --toolchain names one of them
    qemu_site.check_runs_here(site)  # an emulated site runs inside its root
    spack = spack or pinned.setup()
    version = spack.version()
    builtin = pinned.builtin_repo()
    env_dir = environment.ensure_concretized(
        spack, site.environment_dir, paths.site_config_dir(site.environment), version, builtin
    )
    repo_index.keep(spack, builtin)  # Spack has indexed the repository by now
    return Prepared(spack, version, builtin, env_dir)


def slurm_cluster(site):
    """The running `sitebench cluster` of a site that says it runs on one, else None."""
    if not site.on_local_cluster:
        return None
    from sitebench.services.slurm.cluster import LocalCluster

    cluster = LocalCluster()
    if "slurmctld" not in cluster.running():
        raise SitebenchError(
            f"site {site.name!r} runs on the local Slurm cluster, which is not running "
            f"(nothing in {cluster.layout.root})",
            "./sitebench cluster start [--nodes N]",
        )
    return cluster


#: Check files loaded first, quickest build first: ReFrame runs the checks in the order it
#: loads them (a directory in the file system's order), so the first figure of a fresh
#: clone waits for STREAM's build (seconds), not NPB's (about a minute).
FIRST_CHECKS = ("stream.py", "ring.py", "jacobi.py", "hpl.py", "osu.py")


def check_files():
    """Every check file, :data:`FIRST_CHECKS` first, then the others by name."""
    found = sorted(p for p in paths.checks_dir().glob("*.py") if not p.name.startswith("_"))
    rank = {name: i for i, name in enumerate(FIRST_CHECKS)}
    return sorted(found, key=lambda p: rank.get(p.name, len(rank)))


def reframe_command(site, scale, prefix, report, extra=()):
    checks = [arg for path in check_files() for arg in ("-c", str(path))]
    return [
        reframe_executable(),
        "-C",
        str(site.reframe_config),
        *checks,
        "--prefix",
        str(prefix),
        "--report-file",
        str(report),
        "--tag",
        scale,
        # One benchmark at a time: concurrent runs would measure each other.
        "--exec-policy",
        "serial",
        "-r",
        *extra,
    ]


#: Signals passed on to ReFrame, which stops its tests and still writes its report on each.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_reframe(cmd, env):
    """Run ReFrame; return (its exit code, the signal that interrupted the run or None).

    ReFrame runs in its own session, so a Ctrl-C reaches it once, passed on by sitebench
    (twice, it would be cut short while writing its report), and sitebench waits for it to
    stop: the partial run is then stored like any other, marked partial.
    """
    received, proc = [], None

    def forward(signum, _frame):
        received.append(signal.Signals(signum).name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    try:
        previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    except ValueError:  # not the main thread: no handlers, signals act as they would
        previous = {}
    try:
        proc = subprocess.Popen(
            cmd, env=env, cwd=paths.ROOT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        if received:  # a signal before ReFrame started
            proc.send_signal(signal.Signals[received[0]])
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code, (received[0] if received else None)


@dataclass
class Session:
    """What one ReFrame session left: its exit code, the signal that stopped it (or None),
    when it ran, and its command. Its files are in the work directory and the report."""

    command: list
    code: int
    interrupted: str
    launched: float
    exited: float

    @property
    def started(self):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.launched))

    @property
    def finished(self):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.exited))


def check_scale(scale):
    if scale not in SCALES:
        raise SitebenchError(f"unknown scale {scale!r}", f"use one of: {', '.join(SCALES)}")
    return scale


def run_suite(site, prepared, scale, work, report, reframe_args=(), cluster=None):
    """Run the suite on ``site`` with ReFrame, its stages in ``work``, its report in
    ``report``; return the :class:`Session`."""
    cmd = reframe_command(site, scale, work, report, reframe_args)
    env = prepared.spack.environ()
    env["SITEBENCH_SCALES"] = scale
    table = installed_roots.write(prepared.spack, prepared.env_dir, work / "installed-roots.txt")
    # A new checkout of the whole suite: the roots the binary cache holds, in one Spack call.
    if table and cached_roots.whole_suite(reframe_args) and not toolchains.selected_names():
        if cached_roots.install(prepared.spack, prepared.env_dir, installed_roots.hashes(table)):
            table = installed_roots.write(prepared.spack, prepared.env_dir, table)
    if table:
        env[INSTALLED_ROOTS] = str(table)
    if cluster is not None:
        env["SLURM_CONF"] = str(cluster.layout.slurm_conf)
    if site.detected_here:
        # The benchmarks run on this machine: say so now if other work already uses it.
        warning = disturbance.busy_warning(disturbance.machine_busy(BUSY_SAMPLE_S))
        if warning:
            print(f"==> {warning}", file=sys.stderr)
    launched = time.time()
    print(f"==> {' '.join(cmd)}", file=sys.stderr)
    code, interrupted = run_reframe(cmd, env)
    return Session(cmd, code, interrupted, launched, time.time())

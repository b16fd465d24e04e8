"""The main job: build with Spack, run with ReFrame, store the run with provenance.

ReFrame does the running and the judging (references, perflogs, its JSON
report); this module prepares the site, calls ReFrame once, and turns its
output into a new run under ``results/<site>/``.
"""

import json
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from sitebench import (
    environment,
    installed_roots,
    local_site,
    paths,
    provenance,
    qemu_site,
    site_settings,
)
from sitebench import spack as spack_mod
from sitebench.errors import SitebenchError
from sitebench.files import reframe_executable
from sitebench.names import check_name
from sitebench.results import (
    FAILED_STAGE,
    Incoming,
    copy_failed_stages,
    copy_into,
    fill_uncleaned_fixtures,
    report_cases,
)
from sitebench.rfm.scales import SCALES
from sitebench.rfm.spack_build import INSTALLED_ROOTS
from sitebench.validate import validate_site


def known_sites():
    root = paths.ROOT / "site-configs"
    return sorted(p.name for p in root.iterdir() if (p / "reframe.py").is_file())


def check_site(site):
    check_name("site", site)
    if not (paths.site_config_dir(site) / "reframe.py").is_file():
        raise SitebenchError(
            f"unknown site {site!r}: site-configs/{site}/reframe.py does not exist",
            f"use one of: {', '.join(known_sites())} (or add a site, see site-configs/README.md)",
        )
    return site


def site_topology(site):
    path = (
        local_site.topology_file()
        if site_settings.load(site)["environment"] == local_site.SITE
        else paths.site_config_dir(site) / "topology.json"
    )
    return json.loads(path.read_text()) if path.is_file() else {}


def prepare(site):
    """Spack set up, site detected (local), environment concretized once."""
    check_site(site)
    # Every file of the site, all problems at once (names, keys, fixes): sitebench/validate.py.
    settings = validate_site(site)
    qemu_site.check_runs_here(site, settings)  # an emulated site runs inside its root
    spack = spack_mod.setup()
    version = spack.version()
    builtin = spack_mod.builtin_repo()
    env_site = settings["environment"]
    if env_site == local_site.SITE:
        local_site.detect(spack)
    env_dir = environment.ensure_concretized(spack, env_site, version, builtin)
    return spack, version, builtin, env_dir


def slurm_cluster(site):
    """The running `sitebench cluster` of a site that says it runs on one, else None."""
    if not site_settings.load(site)["slurm_cluster"]:
        return None
    from sitebench.slurm.cluster import LocalCluster

    cluster = LocalCluster()
    if "slurmctld" not in cluster.running():
        raise SitebenchError(
            f"site {site!r} runs on the local Slurm cluster, which is not running "
            f"(nothing in {cluster.layout.root})",
            "./sitebench cluster start [--nodes N]",
        )
    return cluster


def reframe_command(site, scale, prefix, report, extra=()):
    return [
        reframe_executable(),
        "-C",
        str(paths.site_config_dir(site) / "reframe.py"),
        "-c",
        str(paths.checks_dir()),
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


def store(incoming, work, report, write_provenance):
    """ReFrame's output and the provenance into the run, then the run committed.

    A write that fails (a full disk) leaves no visible run: the assembly stays hidden and
    marked, and the error says what to free; ReFrame's own output stays in ``work``.
    """
    try:
        copy_into(work / "perflogs", incoming.path / "perflogs")
        fill_uncleaned_fixtures(report)
        copy_into(work / "output", incoming.path / "output")
        # ReFrame keeps the stage of a failed case only: its logs (e.g. a server's error log).
        copy_failed_stages(report, incoming.path / FAILED_STAGE)
        write_provenance(incoming.path / "provenance")
        return incoming.commit()
    except OSError as err:
        raise incoming.failed(err, kept=work) from err


def run(site="local", scale="quick", reframe_args=()):
    """Run the suite on ``site`` at ``scale``; return (run directory, ReFrame exit code).

    An interrupted run (Ctrl-C, SIGTERM, SIGHUP) is stored with what completed, marked
    ``"partial": true`` in its provenance; the code is then 128 + the signal's number.
    """
    if scale not in SCALES:
        raise SitebenchError(f"unknown scale {scale!r}", f"use one of: {', '.join(SCALES)}")
    spack, version, builtin, env_dir = prepare(site)
    cluster = slurm_cluster(site)
    incoming = Incoming(site)
    work = paths.state_dir() / "reframe-runs" / incoming.name
    work.mkdir(parents=True)
    report = incoming.path / "report.json"
    cmd = reframe_command(site, scale, work, report, reframe_args)
    env = spack.environ()
    env["SITEBENCH_SCALES"] = scale
    if installed_roots.write(spack, env_dir, work / "installed-roots.txt"):
        env[INSTALLED_ROOTS] = str(work / "installed-roots.txt")
    if cluster is not None:
        env["SLURM_CONF"] = str(cluster.layout.slurm_conf)
    launched = time.time()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(launched))
    print(f"==> {' '.join(cmd)}", file=sys.stderr)
    code, interrupted = run_reframe(cmd, env)
    exited = time.time()
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exited))
    if interrupted and not report.is_file():
        # Stopped before ReFrame wrote anything: kept all the same, with an empty report.
        note = f"sitebench: ReFrame was interrupted ({interrupted}) before it wrote its report"
        report.write_text(json.dumps({"session_info": {"note": note}, "runs": []}) + "\n")
    if not report.is_file():
        incoming.abandon(f"ReFrame exited with {code} and wrote no report")
        raise SitebenchError(
            f"ReFrame exited with {code} and wrote no report; nothing was stored "
            f"(its output is kept in {work})",
            "read ReFrame's message above",
        )
    if code == 0 and not interrupted and not report_cases(report):
        # ReFrame skips checks it cannot load (e.g. a bad reference) and still exits 0.
        print(
            "sitebench: error: ReFrame ran no test case; see its warnings above", file=sys.stderr
        )
        code = 1
    write_provenance = partial(
        provenance.collect,
        site=site,
        spack=spack,
        spack_version=version,
        builtin_repo=builtin,
        env_dir=env_dir,
        topology=site_topology(site),
        command=cmd,
        started=started,
        finished=finished,
        reframe_exit=code,
        scheduler=cluster,
        # ReFrame's own report times its session only, not its start-up and wind-down.
        extra={"reframe_process": {"launched_unix": launched, "exited_unix": exited}}
        | ({"partial": True, "interrupted": interrupted} if interrupted else {}),
    )
    final = store(incoming, work, report, write_provenance)
    shutil.rmtree(work, ignore_errors=True)  # stage dirs; everything kept is in the run
    if interrupted:
        print(
            f"sitebench: interrupted ({interrupted}); the partial run is stored in {final}",
            file=sys.stderr,
        )
        return Path(final), 128 + signal.Signals[interrupted].value
    return Path(final), code

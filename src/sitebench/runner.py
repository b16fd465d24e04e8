"""The main job: build with Spack, run with ReFrame, store the run with provenance.

ReFrame does the running and the judging (references, perflogs, its JSON
report); this module prepares the site, calls ReFrame once, and turns its
output into a new run under ``results/<site>/``.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sitebench import environment, local_site, paths, provenance, references, site_settings
from sitebench import spack as spack_mod
from sitebench.errors import SitebenchError
from sitebench.files import reframe_executable
from sitebench.names import check_name
from sitebench.results import Incoming, copy_failed_stages, copy_into
from sitebench.rfm.scales import SCALES


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
    settings = site_settings.load(site)
    refs = paths.site_config_dir(site) / "references.yaml"
    if refs.is_file() or settings["environment"] == site:
        references.validate(refs)
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


def _test_cases(report_path):
    try:
        report = json.loads(Path(report_path).read_text())
    except (OSError, json.JSONDecodeError):
        return 0
    return sum(len(r.get("testcases", [])) for r in report.get("runs", []))


def run(site="local", scale="quick", reframe_args=()):
    """Run the suite on ``site`` at ``scale``; return (run directory, ReFrame exit code)."""
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
    if cluster is not None:
        env["SLURM_CONF"] = str(cluster.layout.slurm_conf)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"==> {' '.join(cmd)}", file=sys.stderr)
    try:
        proc = subprocess.run(cmd, env=env, cwd=paths.ROOT)
        code = proc.returncode
    except KeyboardInterrupt:
        code = 130
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if not report.is_file():
        incoming.abandon(f"ReFrame exited with {code} and wrote no report")
        raise SitebenchError(
            f"ReFrame exited with {code} and wrote no report; nothing was stored "
            f"(its output is kept in {work})",
            "read ReFrame's message above",
        )
    if code == 0 and not _test_cases(report):
        # ReFrame skips checks it cannot load (e.g. a bad reference) and still exits 0.
        print(
            "sitebench: error: ReFrame ran no test case; see its warnings above", file=sys.stderr
        )
        code = 1
    copy_into(work / "perflogs", incoming.path / "perflogs")
    copy_into(work / "output", incoming.path / "output")
    # ReFrame keeps the stage of a failed case only: its logs (e.g. a server's error log).
    copy_failed_stages(report, incoming.path / "failed-stage")
    provenance.collect(
        incoming.path / "provenance",
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
    )
    final = incoming.commit()
    shutil.rmtree(work, ignore_errors=True)  # stage dirs; everything kept is in the run
    return Path(final), code

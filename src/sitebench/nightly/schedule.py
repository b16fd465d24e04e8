"""What a schedule starts, whichever tool starts it: the line of ``./sitebench nightly run``,
the markers that name sitebench's own entries, the tools' Debian packages.

The line is ``cd <checkout> && env PATH=... [SITEBENCH_*=...] <checkout>/sitebench nightly
run --site S >> <logs>/scheduled.log 2>&1``: the scheduled run sees the PATH and the
``SITEBENCH_*`` (and ``SLURM_CONF``) settings of the shell that installed it, since cron,
systemd and Slurm start it with an environment of their own. ``scheduled.log`` gets one line
per night (and anything said before the night's own log opened).
"""

import os
import shlex
import shutil

from sitebench.common import paths
from sitebench.common.errors import SitebenchError

VIAS = ("cron", "systemd", "scrontab")

#: The program each tool needs -> the Debian package that installs it.
PROGRAMS = {
    "cron": ("crontab", "cron"),
    "systemd": ("systemctl", "systemd"),
    "scrontab": ("scrontab", "slurm-client"),
}

#: Settings passed on to the scheduled run.
PASSED_ON = ("PATH", "SLURM_CONF")

#: Not passed on: the toolchains the shell selected are named on the line (--toolchain).
NAMED_ON_THE_LINE = ("SITEBENCH_TOOLCHAINS",)


def begin_marker(site):
    return f"# BEGIN sitebench nightly {site} (managed by ./sitebench nightly; do not edit)"


def end_marker(site):
    return f"# END sitebench nightly {site}"


def program(via):
    """The absolute path of the tool ``via`` needs; a clear error naming its Debian package
    when it is not on this machine."""
    name, package = PROGRAMS[via]
    found = shutil.which(name)
    if found:
        return found
    extra = (
        " (Slurm >= 20.11 built with scrontab; Debian 12's slurm-client 22.05.8 does not "
        "ship it)"
        if via == "scrontab"
        else ""
    )
    raise SitebenchError(
        f"{name} is not on this machine: --via {via} needs it",
        f"install it (Debian: apt-get install {package}){extra}, or choose another --via "
        f"({', '.join(v for v in VIAS if v != via)})",
    )


def environment():
    """The settings the scheduled run gets: PATH, SLURM_CONF and every SITEBENCH_*."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if (k in PASSED_ON or k.startswith("SITEBENCH_")) and k not in NAMED_ON_THE_LINE
    }
    return dict(sorted(keep.items()))


def run_arguments(site, scale="quick", reframe_args=(), toolchains=()):
    args = [str(paths.ROOT / "sitebench"), "nightly", "run", "--site", site]
    if scale != "quick":
        args += ["--scale", scale]
    for name in toolchains or ():
        args += ["--toolchain", name]
    if reframe_args:
        args += ["--", *reframe_args]
    return args


def scheduled_log(logs_dir):
    return logs_dir / "scheduled.log"


def command_line(site, logs_dir, scale="quick", reframe_args=(), toolchains=()):
    """The shell line cron and scrontab run."""
    env = [f"{k}={shlex.quote(v)}" for k, v in environment().items()]
    run = " ".join(shlex.quote(a) for a in run_arguments(site, scale, reframe_args, toolchains))
    return (
        f"cd {shlex.quote(str(paths.ROOT))} && env {' '.join(env)} {run} "
        f">> {shlex.quote(str(scheduled_log(logs_dir)))} 2>&1"
    )


def own_block(text, site):
    """(lines before, sitebench's lines for ``site``, lines after) of a crontab."""
    lines = text.splitlines()
    begin, end = begin_marker(site), end_marker(site)
    if begin not in lines:
        return lines, [], []
    i = lines.index(begin)
    j = lines.index(end, i) if end in lines[i:] else len(lines) - 1
    return lines[:i], lines[i : j + 1], lines[j + 1 :]


def refuse_installed(site, via, where, force):
    if not force:
        raise SitebenchError(
            f"a nightly schedule of {site} is already installed ({via}: {where})",
            f"replace it with --force, or remove it: ./sitebench nightly remove --site {site} "
            f"--via {via}",
        )

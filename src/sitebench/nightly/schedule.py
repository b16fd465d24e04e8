"""What a schedule starts, whichever tool starts it: the line of ``./sitebench nightly run``,
the markers that name sitebench's own entries, the tools' Debian packages.

The line is ``cd <checkout> && env PATH=... [SITEBENCH_*=...] <checkout>/sitebench nightly
run --site S >> <logs>/scheduled.log 2>&1``: the scheduled run sees the PATH and the
``SITEBENCH_*`` (and ``SLURM_CONF``) settings of the shell that installed it, since cron,
systemd and Slurm start it with an environment of their own. ``scheduled.log`` gets one line
per night (and anything said before the night's own log opened); the night renames it
``scheduled.log.1`` past 1 MiB (:func:`.logs.rotate_scheduled`).

An entry is this checkout's: its markers (and systemd unit names) carry the site and
:func:`checkout_key`, so a second checkout of the site on the machine has its own. Entries
written before (markers naming the site only) are this checkout's when their line starts
in it: shown, replaced and removed as such.
"""

import hashlib
import os
import re
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


def checkout_key():
    """This checkout in 8 hex digits (its absolute path, hashed): the markers and unit
    names carry it, so that two checkouts of one site on a machine keep their own
    schedules."""
    return hashlib.sha256(str(paths.ROOT).encode()).hexdigest()[:8]


def begin_marker(site):
    return (
        f"# BEGIN sitebench nightly {site} {checkout_key()} (checkout {paths.ROOT}; "
        "managed by ./sitebench nightly; do not edit)"
    )


def end_marker(site):
    return f"# END sitebench nightly {site} {checkout_key()}"


#: A checkout's begin marker: (site, checkout key, checkout path).
BEGIN = re.compile(r"^# BEGIN sitebench nightly (\S+) ([0-9a-f]{8}) \(checkout (.*); managed by ")


def other_checkouts(text, site):
    """The paths of the other checkouts whose entries for ``site`` are in a crontab."""
    found = []
    for line in text.splitlines():
        m = BEGIN.match(line)
        if m and m.group(1) == site and m.group(2) != checkout_key():
            found.append(m.group(3))
    return found


def legacy_markers(site):
    """(begin, end) of the entries written before the markers named their checkout."""
    return (
        f"# BEGIN sitebench nightly {site} (managed by ./sitebench nightly; do not edit)",
        f"# END sitebench nightly {site}",
    )


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


#: Longest command sitebench puts on a cron line: Debian's cron refuses a command of 1000
#: characters or more ("command too long"; cron.h MAX_COMMAND, counted with the escapes of
#: ``%``), and a module-based cluster's PATH alone can be longer. Beyond it the settings go
#: to :func:`env_file`, which the line sources.
LINE_LIMIT = 990


def env_file(logs_dir):
    return logs_dir / "nightly.env"


def command_line(site, logs_dir, scale="quick", reframe_args=(), toolchains=()):
    """The shell line cron and scrontab run: the settings inline, or, where the line would
    be too long for cron, from ``nightly.env`` in the logs directory (mode 0600)."""
    settings = environment()
    env = [f"{k}={shlex.quote(v)}" for k, v in settings.items()]
    run = " ".join(shlex.quote(a) for a in run_arguments(site, scale, reframe_args, toolchains))
    here = f"cd {shlex.quote(str(paths.ROOT))} && "
    log = f">> {shlex.quote(str(scheduled_log(logs_dir)))} 2>&1"
    line = f"{here}env {' '.join(env)} {run} {log}"
    if len(line.replace("%", "\\%")) <= LINE_LIMIT:
        return line
    path = env_file(logs_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.touch(mode=0o600)  # the settings may name private paths
    tmp.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in settings.items()))
    tmp.replace(path)
    return f"{here}. {shlex.quote(str(path))} && {run} {log}"


def own_block(text, site):
    """(lines before, this checkout's lines for ``site``, lines after) of a crontab: the
    block between its markers, else one between the markers of before they named the
    checkout whose line starts in this checkout (replaced and removed as this checkout's)."""
    lines = text.splitlines()
    for begin, end in ((begin_marker(site), end_marker(site)), legacy_markers(site)):
        for i, line in enumerate(lines):
            if line != begin:
                continue
            j = lines.index(end, i) if end in lines[i:] else len(lines) - 1
            if begin != begin_marker(site) and not _starts_here(lines[i : j + 1]):
                continue  # another checkout's, from before the markers named it
            return lines[:i], lines[i : j + 1], lines[j + 1 :]
    return lines, [], []


def _starts_here(block):
    here = f"cd {shlex.quote(str(paths.ROOT))} && "
    return any(here in line for line in block)


def refuse_installed(site, via, where, force):
    if not force:
        raise SitebenchError(
            f"a nightly schedule of {site} is already installed ({via}: {where})",
            f"replace it with --force, or remove it: ./sitebench nightly remove --site {site} "
            f"--via {via}",
        )

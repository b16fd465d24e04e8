"""The schedule in the user's crontab (``crontab -l`` / ``crontab -``): this checkout's
lines for a site sit between its BEGIN/END marker comments (:func:`.schedule.own_block`),
and only those are ever edited."""

import shutil
import subprocess

from sitebench.common.errors import SitebenchError
from sitebench.nightly import schedule


def read(crontab):
    proc = subprocess.run([crontab, "-l"], capture_output=True, text=True)
    if proc.returncode != 0:
        if "no crontab" in proc.stderr.lower():
            return ""
        raise SitebenchError(
            f"crontab -l failed: {proc.stderr.strip()}", "check that cron is installed"
        )
    return proc.stdout


def write(crontab, text):
    if text.strip():
        proc = subprocess.run([crontab, "-"], input=text, capture_output=True, text=True)
    else:
        proc = subprocess.run([crontab, "-r"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SitebenchError(f"crontab refused the new table: {proc.stderr.strip()}")


def entry(site, hour, minute, line):
    # cron reads % as a newline: escaped.
    return [
        schedule.begin_marker(site),
        f"{minute} {hour} * * * {line.replace('%', chr(92) + '%')}",
        schedule.end_marker(site),
    ]


def installed(site):
    """sitebench's lines for ``site`` in the crontab (empty if none)."""
    _, own, _ = schedule.own_block(read(schedule.program("cron")), site)
    return own


def others(site):
    """The other checkouts with an entry for ``site`` in the crontab."""
    return schedule.other_checkouts(read(schedule.program("cron")), site)


def install(site, hour, minute, line, force=False):
    crontab = schedule.program("cron")
    before, own, after = schedule.own_block(read(crontab), site)
    if own:
        schedule.refuse_installed(site, "cron", "the user's crontab", force)
    write(crontab, "\n".join(before + entry(site, hour, minute, line) + after) + "\n")
    notes = []
    if not _daemon_running():
        notes.append(
            "no cron daemon is running on this machine: the entry fires once it runs "
            "(Debian: service cron start)"
        )
    return "the user's crontab", notes


def remove(site):
    crontab = schedule.program("cron")
    before, own, after = schedule.own_block(read(crontab), site)
    if not own:
        return False
    write(crontab, "\n".join(before + after) + ("\n" if before + after else ""))
    return True


def _daemon_running():
    pidof = shutil.which("pidof")
    if not pidof:
        return True  # cannot tell: no note
    return subprocess.run([pidof, "cron"], capture_output=True).returncode == 0

"""The schedule as Slurm's scrontab (Slurm >= 20.11, ``ScronParameters=enable``): the
nightly run is a Slurm job of its own, on the partition given (default: the cluster's
default partition). Like cron, only the lines between the site's markers are edited."""

import os
import subprocess
import tempfile

from sitebench.common.errors import SitebenchError
from sitebench.nightly import cron, schedule

TIMEOUT = 30


def read(scrontab):
    proc = subprocess.run([scrontab, "-l"], capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode != 0:
        if "no crontab" in (proc.stderr + proc.stdout).lower():
            return ""
        raise SitebenchError(
            f"scrontab -l failed: {proc.stderr.strip()}",
            "is Slurm running, and does slurm.conf say ScronParameters=enable?",
        )
    return proc.stdout


def write(scrontab, text):
    if not text.strip():
        proc = subprocess.run([scrontab, "-r"], capture_output=True, text=True, timeout=TIMEOUT)
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".scrontab", delete=False) as f:
            f.write(text)
        try:
            proc = subprocess.run(
                [scrontab, f.name], capture_output=True, text=True, timeout=TIMEOUT
            )
        finally:
            os.unlink(f.name)
    if proc.returncode != 0:
        raise SitebenchError(
            f"scrontab refused the new table: {(proc.stderr or proc.stdout).strip()}",
            "slurm.conf needs ScronParameters=enable (./sitebench cluster start sets it)",
        )


def entry(site, hour, minute, line, partition=None):
    lines = cron.entry(site, hour, minute, line)
    options = f"#SCRON --job-name=sitebench-nightly-{site}-{schedule.checkout_key()}"
    if partition:
        options += f" --partition={partition}"
    return [lines[0], options, *lines[1:]]


def installed(site):
    _, own, _ = schedule.own_block(read(schedule.program("scrontab")), site)
    return own


def others(site):
    """The other checkouts with an entry for ``site`` in the scrontab."""
    return schedule.other_checkouts(read(schedule.program("scrontab")), site)


def install(site, hour, minute, line, force=False, partition=None):
    scrontab = schedule.program("scrontab")
    before, own, after = schedule.own_block(read(scrontab), site)
    if own:
        schedule.refuse_installed(site, "scrontab", "the user's scrontab", force)
    write(scrontab, "\n".join(before + entry(site, hour, minute, line, partition) + after) + "\n")
    return "the user's scrontab" + (f" (partition {partition})" if partition else ""), []


def remove(site):
    scrontab = schedule.program("scrontab")
    before, own, after = schedule.own_block(read(scrontab), site)
    if not own:
        return False
    write(scrontab, "\n".join(before + after) + ("\n" if before + after else ""))
    return True

"""The exit codes of ``./sitebench nightly run`` and the verdict each stands for.

A scheduler (cron, a systemd timer, scrontab) sees only the exit code, so each outcome has
its own; the night's log ends with the same verdict in words.
"""

import signal

#: Every check passed and no figure drifted worse than its history.
PASSED = 0
#: A check failed, or a figure drifted worse beyond the run-to-run noise.
FAILED = 1
#: Could not run: unknown site, bad configuration, Spack missing, ReFrame wrote no report.
NOT_RUN = 3
#: Another nightly run of the site holds its lock; this one did not start.
ALREADY_RUNNING = 4
#: The suite passed but its run was not published (it stays committed locally).
NOT_PUBLISHED = 5
#: sitebench itself failed (a bug): the traceback is in the night's log and the alert.
CRASHED = 6
#: Interrupted: 128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP); the partial run
#: is stored, marked partial, as ``./sitebench run`` does.
INTERRUPTED_BASE = 128

WORDS = {
    PASSED: "passed",
    FAILED: "failed",
    NOT_RUN: "could not run",
    ALREADY_RUNNING: "already running",
    NOT_PUBLISHED: "passed, not published",
    CRASHED: "sitebench failed",
}


def interrupted(signame):
    """The exit code of a night stopped by ``signame`` (e.g. "SIGTERM" -> 143)."""
    return INTERRUPTED_BASE + signal.Signals[signame].value


def verdict(code):
    """The verdict in words of an exit code."""
    if code > INTERRUPTED_BASE:
        try:
            return f"interrupted ({signal.Signals(code - INTERRUPTED_BASE).name})"
        except ValueError:
            pass
    return WORDS.get(code, f"exit {code}")

"""The site's ``nightly.alert`` command: a shell line (``{site}`` replaced by the site's
name) that gets the night's summary on its standard input, e.g. a ``mail`` line or a
``curl`` to a webhook reading ``--data-binary @-``.

An alert command that fails, hangs or is missing is reported in the log and never changes
the night's verdict or exit code. One that hangs is stopped after ``$SITEBENCH_ALERT_TIMEOUT``
seconds (default 120) with what it started: it runs in a process group of its own, which
gets SIGTERM and, if anything of it is left after a few seconds, SIGKILL (only a daemon that
left the group with ``setsid`` escapes).
"""

import os
import signal
import subprocess
import time

#: An alert is given this long (seconds) before it is stopped and reported as failed.
TIMEOUT = 120
TIMEOUT_VARIABLE = "SITEBENCH_ALERT_TIMEOUT"
#: After SIGTERM, the alert's processes have this long (at most the timeout) to end.
GRACE = 5


def command_of(site, settings):
    given = (settings.get("nightly") or {}).get("alert")
    return given.replace("{site}", site) if given else None


def timeout_of(say):
    """``$SITEBENCH_ALERT_TIMEOUT`` in seconds, else :data:`TIMEOUT`; a bad value is said in
    the log and the default used (the night still alerts)."""
    given = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not given:
        return TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0
    if seconds > 0:
        return seconds
    say(
        f"alert: ${TIMEOUT_VARIABLE}={given!r} is not a positive number of seconds; "
        f"using {TIMEOUT} s"
    )
    return TIMEOUT


def send(command, text, say, timeout=None):
    """Run ``command`` with ``text`` on stdin; report in the log with ``say``; return True
    when it exited 0."""
    if not command:
        say("alert: none configured (site.yaml nightly.alert); the log and exit code only")
        return False
    timeout = timeout_of(say) if timeout is None else timeout
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: stopped as a whole
        )
    except OSError as err:
        say(f"alert FAILED: `{command}` could not start: {err}")
        return False
    with proc:
        try:
            out, err = proc.communicate(text, timeout=timeout)
        except subprocess.TimeoutExpired:
            how = stop_group(proc, min(GRACE, timeout))
            say(
                f"alert FAILED: `{command}` did not end within {timeout:g} s (stopped: {how}; "
                f"${TIMEOUT_VARIABLE} gives it longer)"
            )
            return False
    if proc.returncode != 0:
        said = (err or out).strip().splitlines()[-5:]
        say(
            f"alert FAILED: `{command}` exited {proc.returncode}"
            + (": " + " / ".join(said) if said else "")
            + " (the night's verdict stands)"
        )
        return False
    say(f"alert sent: `{command}`")
    return True


def stop_group(proc, grace):
    """Stop the process group ``proc`` leads (the alert's shell and all it started, forks
    included): SIGTERM, then SIGKILL to what is left after ``grace`` seconds. Says how."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reaps the shell: a zombie still counts as a member of its group
        if not _signal_group(proc.pid, 0):
            return "SIGTERM to its process group"
        time.sleep(0.05)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    return f"SIGTERM, then SIGKILL after {grace:g} s, to its process group"


def _signal_group(pgid, sig):
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # a member that is not ours (setuid): still there
        return True

"""The site's ``nightly.alert`` command: a shell line (``{site}`` replaced by the site's
name) that gets the night's summary on its standard input, e.g. a ``mail`` line or a
``curl`` to a webhook reading ``--data-binary @-``.

An alert command that fails, hangs or is missing is reported in the log and never changes
the night's verdict or exit code.
"""

import subprocess

#: An alert is given this long before it is stopped and reported as failed.
TIMEOUT = 120


def command_of(site, settings):
    given = (settings.get("nightly") or {}).get("alert")
    return given.replace("{site}", site) if given else None


def send(command, text, say, timeout=TIMEOUT):
    """Run ``command`` with ``text`` on stdin; report in the log with ``say``; return True
    when it exited 0."""
    if not command:
        say("alert: none configured (site.yaml nightly.alert); the log and exit code only")
        return False
    try:
        proc = subprocess.run(
            command,
            shell=True,
            input=text,
            text=True,
            capture_output=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        say(f"alert FAILED: `{command}` did not end within {timeout} s (stopped)")
        return False
    except OSError as err:
        say(f"alert FAILED: `{command}` could not start: {err}")
        return False
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        say(
            f"alert FAILED: `{command}` exited {proc.returncode}"
            + (": " + " / ".join(said) if said else "")
            + " (the night's verdict stands)"
        )
        return False
    say(f"alert sent: `{command}`")
    return True

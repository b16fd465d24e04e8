"""The nightly start time: ``HH:MM`` in the machine's local time, as cron, systemd timers
and scrontab all read it, and the next start it gives."""

import datetime
import re

from sitebench.common.errors import SitebenchError

HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def parse(text):
    """``"02:30"`` -> (2, 30); a clear error for anything else."""
    m = HHMM.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise SitebenchError(
            f"malformed time {text!r}: expected HH:MM, 24-hour, local time",
            "e.g. --at 02:30 (00:00 to 23:59)",
        )
    return int(m.group(1)), int(m.group(2))


def next_start(hour, minute, now=None):
    """The next local time at ``hour:minute`` strictly after ``now``."""
    now = now or datetime.datetime.now().astimezone()
    start = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if start <= now:
        start += datetime.timedelta(days=1)
    return start

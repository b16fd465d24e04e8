"""``nightly status``: the installed entries, the next start, the last nights."""

import re

from sitebench.common.errors import SitebenchError
from sitebench.nightly import cron, logs, schedule, scrontab, systemd, when

CRON_TIME = re.compile(r"^(\d+) (\d+) \* \* \* ")


def _cron_like(module, site):
    try:
        own = module.installed(site)
    except SitebenchError as err:
        return None, f"(not readable: {err.problem})"
    except OSError as err:  # e.g. scrontab timing out without a controller
        return None, f"(not readable: {err})"
    entries = [line for line in own if CRON_TIME.match(line)]
    if not entries:
        return None, None
    minute, hour = map(int, CRON_TIME.match(entries[0]).groups())
    return (hour, minute), "\n".join("    " + line for line in own)


def entries(site):
    """[(via, where/text, (hour, minute) or None)] of every schedule found for ``site``."""
    found = []
    for via, module in (("cron", cron), ("scrontab", scrontab)):
        if not _available(via):
            continue
        at, text = _cron_like(module, site)
        if text:
            found.append((via, text, at))
    for system in (False, True):
        present = systemd.installed(site, system)
        if present:
            at = None
            for line in present[-1].read_text().splitlines():
                m = re.match(r"OnCalendar=\*-\*-\* (\d\d):(\d\d):00", line)
                if m:
                    at = (int(m.group(1)), int(m.group(2)))
            text = "\n".join(f"    {p}" for p in present)
            found.append(("systemd" + (" (system)" if system else " (user)"), text, at))
    return found


def elsewhere(site):
    """[(via, checkout)] of the schedules of ``site`` other checkouts installed here: each
    runs its own nights (its own lock, logs and results)."""
    found = []
    for via, module in (("cron", cron), ("scrontab", scrontab)):
        if _available(via):
            try:
                found += [(via, path) for path in module.others(site)]
            except (SitebenchError, OSError):
                pass  # said as "not readable" with this checkout's entry
    for system in (False, True):
        via = "systemd" + (" (system)" if system else " (user)")
        found += [(via, path) for path in systemd.others(site, system)]
    return found


def _available(via):
    try:
        schedule.program(via)
        return True
    except SitebenchError:
        return False


def describe(site, settings, nights=7):
    lines = [f"sitebench nightly: {site}"]
    found = entries(site)
    if not found:
        lines.append(
            f"  schedule: none installed (./sitebench nightly install --site {site} --at HH:MM)"
        )
    for via, text, at in found:
        lines.append(f"  schedule: {via}")
        lines.append(text)
        if at:
            lines.append(f"  next start: {when.next_start(*at):%Y-%m-%d %H:%M %Z}")
    for via, path in elsewhere(site):
        lines.append(f"  also scheduled from another checkout ({via}): {path}")
    directory = logs.logs_dir(site, settings)
    last = logs.last_nights(directory, nights)
    lines.append(
        f"  last {len(last)} night(s) in {directory} (keeping {logs.keep_of(settings)}):"
        if last
        else f"  no night logged yet in {directory}"
    )
    for night in reversed(last):
        code = "" if night.code is None else f" (exit {night.code})"
        lines.append(f"    {night.started}  {night.verdict}{code}  {night.log}")
    return "\n".join(lines)

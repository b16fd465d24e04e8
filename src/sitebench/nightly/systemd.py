"""The schedule as a systemd timer and its service: user units in
``$XDG_CONFIG_HOME/systemd/user`` (default ``~/.config/systemd/user``), or system units in
``/etc/systemd/system`` (``--system``), named ``sitebench-nightly-<site>-<checkout key>``
(:func:`.schedule.checkout_key`). Where systemctl works (systemd is PID 1) the timer
is reloaded and enabled; elsewhere the units are written and the command to enable them
is printed."""

import os
import re
import subprocess
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.nightly import schedule

MARK = "# Written by ./sitebench nightly install; removed by ./sitebench nightly remove"


def unit_dir(system):
    if system:
        return Path("/etc/systemd/system")
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_name(site):
    """This checkout's units of ``site`` (:func:`.schedule.checkout_key`)."""
    return f"sitebench-nightly-{site}-{schedule.checkout_key()}"


def legacy_name(site):
    """The units' name before it named the checkout."""
    return f"sitebench-nightly-{site}"


def _escape(value):
    """A value in a unit file: % and $ taken literally, quoted for systemd's parser."""
    value = value.replace("%", "%%").replace("$", "$$").replace("\\", "\\\\")
    return '"' + value.replace('"', '\\"') + '"'


def _plain(path):
    """A path setting (no quoting in systemd's syntax): only % escaped."""
    return str(path).replace("%", "%%")


def service(site, logs_dir, scale="quick", reframe_args=(), toolchains=()):
    log = schedule.scheduled_log(logs_dir)
    env = "\n".join(
        f"Environment={_escape(f'{k}={v}')}" for k, v in schedule.environment().items()
    )
    run = " ".join(
        _escape(a) for a in schedule.run_arguments(site, scale, reframe_args, toolchains)
    )
    return (
        f"{MARK}\n[Unit]\nDescription=sitebench nightly run of site {site}\n\n"
        f"[Service]\nType=oneshot\nWorkingDirectory={_plain(paths.ROOT)}\n{env}\n"
        f"ExecStart={run}\nStandardOutput=append:{_plain(log)}\n"
        f"StandardError=append:{_plain(log)}\n"
        # A Ctrl-C-like stop: the night stores its partial run and says so.
        "KillSignal=SIGTERM\nTimeoutStopSec=300\n"
    )


def timer(site, hour, minute):
    return (
        f"{MARK}\n[Unit]\nDescription=sitebench nightly run of site {site} at "
        f"{hour:02d}:{minute:02d}\n\n[Timer]\nOnCalendar=*-*-* {hour:02d}:{minute:02d}:00\n"
        f"Unit={unit_name(site)}.service\n\n[Install]\nWantedBy=timers.target\n"
    )


def files(site, system, name=None):
    d, name = unit_dir(system), name or unit_name(site)
    return d / f"{name}.service", d / f"{name}.timer"


def systemctl(system, *args):
    """(worked?, what systemctl said)."""
    cmd = [schedule.program("systemd")] + ([] if system else ["--user"]) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def installed(site, system=False):
    """This checkout's unit files of ``site``: named with the checkout, else named by the
    site alone (from before) with a service whose WorkingDirectory is this checkout."""
    present = [p for p in files(site, system) if p.is_file()]
    if present:
        return present
    legacy = [p for p in files(site, system, legacy_name(site)) if p.is_file()]
    here = f"WorkingDirectory={_plain(paths.ROOT)}"
    service = legacy[0] if legacy and legacy[0].suffix == ".service" else None
    if service and here in service.read_text().splitlines():
        return legacy
    return []


def others(site, system=False):
    """The WorkingDirectory (the checkout) of the other checkouts' units of ``site``."""
    own = re.compile(rf"sitebench-nightly-{re.escape(site)}-[0-9a-f]{{8}}")
    found = []
    for svc in sorted(unit_dir(system).glob(f"sitebench-nightly-{site}-*.service")):
        if svc.stem == unit_name(site) or not own.fullmatch(svc.stem):
            continue
        where = [
            ln.split("=", 1)[1].replace("%%", "%")
            for ln in svc.read_text().splitlines()
            if ln.startswith("WorkingDirectory=")
        ]
        found.append(where[0] if where else str(svc))
    return found


def _not_ours(present):
    for p in present:
        if MARK not in p.read_text():
            return p
    return None


def _take_out(system, present):
    """Disable the timer among ``present`` and remove the files."""
    for p in present:
        if p.suffix == ".timer":
            systemctl(system, "disable", "--now", p.name)
    for p in present:
        p.unlink()


def install(
    site,
    hour,
    minute,
    logs_dir,
    scale="quick",
    reframe_args=(),
    force=False,
    system=False,
    toolchains=(),
):
    schedule.program("systemd")
    svc, tmr = files(site, system)
    present = installed(site, system)
    if present:
        if _not_ours(present):
            raise SitebenchError(
                f"{_not_ours(present)} exists and was not written by sitebench; not replacing "
                "it",
                "move it away, or choose another --via",
            )
        schedule.refuse_installed(site, "systemd", str(present[0].parent), force)
        if present[0].stem != svc.stem:
            _take_out(system, present)  # units from before they named the checkout
    svc.parent.mkdir(parents=True, exist_ok=True)
    svc.write_text(service(site, logs_dir, scale, reframe_args, toolchains))
    tmr.write_text(timer(site, hour, minute))
    notes = []
    ok, said = systemctl(system, "daemon-reload")
    if ok:
        ok, said = systemctl(system, "enable", "--now", tmr.name)
    if not ok:
        flag = "" if system else " --user"
        notes.append(
            f"units written, not enabled: systemctl{flag} does not work here ({said}); "
            f"where systemd runs: systemctl{flag} daemon-reload && systemctl{flag} enable "
            f"--now {tmr.name}"
        )
    return f"{svc} and {tmr.name}", notes


def remove(site, system=False):
    present = installed(site, system)
    if not present:
        return False
    if _not_ours(present):
        raise SitebenchError(f"{_not_ours(present)} was not written by sitebench; not removing it")
    _take_out(system, present)
    systemctl(system, "daemon-reload")
    return True

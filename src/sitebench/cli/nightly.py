"""The unattended operation: ``nightly run`` runs one night of a site (one at a time,
stored, judged for drift, published, alerted, logged), ``nightly install``/``remove`` put
it in the site's scheduler (cron, a systemd timer or Slurm's scrontab) and ``nightly
status`` shows the schedule and the last nights.

Exit codes of ``nightly run``: 0 every check passed and no figure drifted worse; 1 a check
failed or a figure drifted worse; 3 could not run (unknown site, bad configuration, Spack
missing); 4 already running (another night of the site holds its lock); 5 passed but not
published; 6 sitebench itself failed (a bug; the traceback is in the log); 128 + signal when
interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), the partial run stored and marked
partial. ``install``, ``remove`` and ``status`` exit 2 on an error.
"""

import argparse

from sitebench.cli.common import add_site_argument, add_toolchain_argument

description = "run the suite unattended each night: run, install, remove, status"

section = "running"

example = """
  ./sitebench nightly install --site mycluster --at 02:30 --via cron
  ./sitebench nightly status --site mycluster   # the entry, the next start, the last nights
  ./sitebench nightly run --site mycluster      # one night now, as the schedule starts it
  ./sitebench nightly remove --site mycluster
"""


def setup_parser(p):
    sub = p.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="one night: run, store, judge, publish, alert, log")
    add_site_argument(run)
    run.add_argument("--scale", default="quick", help="quick (default) or full")
    add_toolchain_argument(run)
    run.add_argument(
        "--no-publish", action="store_true", help="do not publish the run to the results remote"
    )
    run.add_argument(
        "reframe_args", nargs=argparse.REMAINDER, help="after --: extra ReFrame options"
    )
    install = sub.add_parser("install", help="schedule the nightly run")
    add_site_argument(install)
    install.add_argument("--at", required=True, help="HH:MM, local time")
    _via(install)
    install.add_argument("--force", action="store_true", help="replace an installed schedule")
    install.add_argument("--scale", default="quick", help="quick (default) or full")
    add_toolchain_argument(install, "run each night")
    install.add_argument("--partition", help="scrontab: the Slurm partition (default: Slurm's)")
    install.add_argument(
        "reframe_args", nargs=argparse.REMAINDER, help="after --: extra ReFrame options"
    )
    remove = sub.add_parser("remove", help="remove the site's nightly schedule")
    add_site_argument(remove)
    _via(remove)
    status = sub.add_parser("status", help="the schedule, the next start, the last nights")
    add_site_argument(status)
    status.add_argument("--nights", type=int, default=7, help="nights shown (default 7)")


def _via(p):
    p.add_argument("--via", choices=("cron", "systemd", "scrontab"), default="cron")
    p.add_argument(
        "--system", action="store_true", help="systemd: system units instead of user units"
    )


def command(args):
    return {"run": _run, "install": _install, "remove": _remove, "status": _status}[args.action](
        args
    )


def _run(args):
    from sitebench.nightly.night import run_night

    args_ = args.reframe_args[1:] if args.reframe_args[:1] == ["--"] else args.reframe_args
    return run_night(
        args.site, args.scale, args_, publish=not args.no_publish, toolchains=args.toolchain
    )


def _install(args):
    from sitebench.nightly import cron, fallback, logs, schedule, scrontab, systemd, when
    from sitebench.run.scales import SCALES
    from sitebench.sites import toolchains
    from sitebench.sites.site import Site

    hour, minute = when.parse(args.at)
    site = Site.resolve(args.site)
    # What a night whose site.yaml later breaks still alerts with and logs to.
    fallback.record(site.name, site.settings)
    if args.scale not in SCALES:
        from sitebench.common.errors import SitebenchError

        raise SitebenchError(f"unknown scale {args.scale!r}", f"use one of: {', '.join(SCALES)}")
    # Named on the scheduled line (--toolchain, else $SITEBENCH_TOOLCHAINS of this shell),
    # and refused now, not at 2 a.m., when the site has no such toolchain.
    chosen = args.toolchain or toolchains.selected_names()
    if chosen:
        chosen = [t.name for t in toolchains.selected(toolchains.load(site), chosen)]
    schedule.program(args.via)
    rargs = args.reframe_args[1:] if args.reframe_args[:1] == ["--"] else args.reframe_args
    logs_dir = logs.logs_dir(site.name, site.settings)
    logs_dir.mkdir(parents=True, exist_ok=True)
    line = schedule.command_line(site.name, logs_dir, args.scale, rargs, chosen)
    if args.via == "cron":
        where, notes = cron.install(site.name, hour, minute, line, args.force)
    elif args.via == "scrontab":
        where, notes = scrontab.install(site.name, hour, minute, line, args.force, args.partition)
    else:
        where, notes = systemd.install(
            site.name, hour, minute, logs_dir, args.scale, rargs, args.force, args.system, chosen
        )
    print(
        f"installed: {site.name} every night at {hour:02d}:{minute:02d} via {args.via} ({where})"
    )
    print(f"  runs: {line}")
    print(f"  next start: {when.next_start(hour, minute):%Y-%m-%d %H:%M %Z}")
    for note in notes:
        print(f"  note: {note}")
    _signing_key(site.name)
    return 0


def _signing_key(site):
    """The key each night signs its published runs with, made now if the site has none; its
    public half is what the other sites trust (results/README.md)."""
    from sitebench.results import trust

    path, public, made = trust.ensure_site_key(site)
    print(f"  signing key: {path} ({'made now' if made else 'kept'}); its public half, for")
    print(f"  the other sites (./sitebench trust add {site} FILE): {public}")


def _remove(args):
    from sitebench.nightly import cron, schedule, scrontab, systemd
    from sitebench.sites.site import Site

    site = Site.resolve(args.site)
    schedule.program(args.via)
    if args.via == "cron":
        removed = cron.remove(site.name)
    elif args.via == "scrontab":
        removed = scrontab.remove(site.name)
    else:
        removed = systemd.remove(site.name, args.system)
    print(
        f"removed: the nightly {args.via} schedule of {site.name}"
        if removed
        else f"nothing to remove: no nightly {args.via} schedule of {site.name}"
    )
    return 0


def _status(args):
    from sitebench.nightly import status
    from sitebench.sites.site import Site

    site = Site.resolve(args.site)
    print(status.describe(site.name, site.settings, args.nights))
    return 0

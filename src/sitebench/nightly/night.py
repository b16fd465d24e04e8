"""One night: the lock, the suite (as ``./sitebench run``), drift, publishing, the alert and
the log, ending in one of the exit codes of :mod:`.codes`.

SIGINT (Ctrl-C), SIGTERM and SIGHUP end the night alike: ReFrame, when running, is stopped by
the run stage and the partial run stored marked partial; anywhere else the night stops where
it is. Either way the lock is released, the alert says so and the exit code is 128 + signal.
"""

import signal
import socket
import sys
import time
import traceback

from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.nightly import alert, codes, fallback, logs
from sitebench.nightly.lock import AlreadyRunning, hold
from sitebench.common.paths import shown
from sitebench.nightly.suite import run_once


class Stopped(BaseException):
    """A stop signal arrived (raised like KeyboardInterrupt, never caught as an
    ordinary error)."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame


def _raise_stopped(signum, _frame):
    raise Stopped(signal.Signals(signum).name)


#: SIGINT too, not left to Python's KeyboardInterrupt: Python leaves SIGINT ignored when its
#: parent ignored it (a shell does, for what a script starts in the background), and such a
#: night could not be stopped with it; `sitebench run` forwards it to ReFrame the same way.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _handle(handler):
    """Set ``handler`` for :data:`STOP_SIGNALS`; return the previous ones (none off the main
    thread, where Python allows no handlers)."""
    try:
        return {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    except ValueError:
        return {}


#: The alert's lines naming incoming commits the publish refused: they alert a night that
#: passed too (someone must look at the sending site), its exit code unchanged.
REFUSED = "  refused: "


def publish_run(site, publisher):
    """("published ..." or "not published: <reason>", then the incoming commits it refused
    one a line; ok?) for the site's new runs."""
    from sitebench.results.exchange import RESTORE_HINT, publish

    try:
        result = (publisher or publish)(site.name)
    except SitebenchError as err:
        return f"not published: {err.problem}" + (f" ({err.fix})" if err.fix else ""), False
    if result.published:
        runs = ", ".join(result.runs) or "no new run"
        said = f"published: {runs}" + (f" (commit {result.commit})" if result.commit else "")
    else:
        said = f"not published: {result.reason or 'no reason given'}"
        if result.rewritten:
            said += f"\n{RESTORE_HINT}"
    # Published.refused is newer than this code's first callers: absent means none.
    refused = list(getattr(result, "refused", None) or [])
    if refused:
        said += (
            f"\nthe publish refused {len(refused)} incoming commit(s), one line per site "
            f"(each one: {QUARANTINE_LISTING}):"
        )
        said += "".join(f"\n{REFUSED}{line}" for line in refused_lines(result, refused))
    return said, result.published


#: Where every refused commit is listed with its reason (the alert says one line a site).
QUARANTINE_LISTING = "./sitebench exchange quarantine"


def refused_lines(result, refused):
    """One line per site of the refused commits, as ``pull`` says them: a site that sent
    10,000 bad commits costs the alert one line (its count and first reason); lines no site
    is known for (the remote's branch deleted) are said as they are."""
    from sitebench.results.site_warnings import one_line, refused_by_site

    # Published.refusals is newer still: without it, each line as it is.
    by_site = refused_by_site(getattr(result, "refusals", None) or [])
    grouped = {line for lines in by_site.values() for line in lines}
    said = [
        one_line(site, lines, "commits refused") if len(lines) > 1 else f"{site}: {lines[0]}"
        for site, lines in by_site.items()
    ]
    return said + [line for line in refused if line not in grouped]


def disturbed_line(cases):
    """The alert's one line naming the cases other work disturbed."""
    return (
        f"disturbed: {len(cases)} case(s) ran while other work took the machine's CPU, their "
        f"figures not judged for drift: {', '.join(cases)}"
    )


def _stamp(t):
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t))


def _known_site(site_name):
    """The night of an unreadable site gets a log and an alert when the name is a site's:
    its folder is there, or an earlier night of it recorded its settings."""
    from sitebench.common import paths

    try:
        check_name("site", site_name)
    except SitebenchError:
        return False
    config = paths.site_config_dir(site_name) / "reframe.py"
    return config.is_file() or fallback.recorded(site_name) is not None


def _unloadable(site_name, err, opening, echo):
    """A site whose settings cannot be read: "could not run", logged and alerted with the
    ``nightly:`` settings :mod:`.fallback` salvages (no log for a name that is no site)."""
    known = _known_site(site_name)
    if not known or not _echoing(echo):
        # Where the scheduler collects stdout and stderr (a terminal sees the log).
        print(f"sitebench nightly: could not run: {err.problem}", file=sys.stderr)
        if err.fix:
            print(f"  fix: {err.fix}", file=sys.stderr)
    if not known:
        return codes.NOT_RUN
    settings, source = fallback.salvage(site_name)

    def body(say):
        line = f"could not run: {err.problem}" + (f"\n  fix: {err.fix}" if err.fix else "")
        say(f"sitebench nightly: {line}")
        said = f"this night's log folder and alert: {source}"
        if not alert.command_of(site_name, settings):
            said += " (no alert command known)"
        say(said)
        return [line, said], codes.NOT_RUN

    return _logged(site_name, settings, opening, echo, body)


def _echoing(echo):
    return sys.stdout.isatty() if echo is None else echo


def run_night(
    site_name,
    scale="quick",
    reframe_args=(),
    publish=True,
    suite=None,
    publisher=None,
    echo=None,
    toolchains=None,
):
    """Run one night of ``site_name``; return its exit code (:mod:`.codes`).

    ``toolchains``: the names of the site's toolchains to run (default: every one); a name
    the site lacks ends the night as "could not run", as ``./sitebench run --toolchain``.

    ``suite(site, scale, reframe_args) -> Outcome`` runs and stores the suite (default
    :func:`.suite.run_once`, what ``./sitebench run`` does); ``publisher(site_name) ->
    Published`` publishes (default ``sitebench.results.exchange.publish``). Tests give
    their own.
    """
    from sitebench.sites.site import Site

    suite = suite or run_once
    if toolchains:
        from sitebench.sites.toolchains import select

        select(toolchains)
    opening = (
        f", scale {scale}"
        + (f", toolchains {', '.join(toolchains)}" if toolchains else "")
        + (f", ReFrame options {' '.join(reframe_args)}" if reframe_args else "")
    )
    try:
        site = Site.resolve(site_name)
    except SitebenchError as err:
        return _unloadable(site_name, err, opening, echo)

    def body(say):
        _remember(site, say)
        return _night(site, scale, reframe_args, publish, suite, publisher, say, bool(toolchains))

    return _logged(site.name, site.settings, opening, echo, body)


def _remember(site, say):
    """Record the site's nightly: settings for a night that cannot read them; a night goes
    on without (said in its log)."""
    try:
        fallback.record(site.name, site.settings)
    except OSError as err:
        say(
            f"note: the nightly settings were not recorded ({err}); a night whose site.yaml "
            "is not YAML would log in the default folder, without alert"
        )


def _logged(site_name, settings, opening, echo, body):
    """The night's log around ``body(say) -> ([lines for the alert], exit code)``: its
    opening, the alert, the verdict; then the rotation of the logs. Returns the exit code."""
    directory = logs.logs_dir(site_name, settings)
    log = logs.new_log(directory)
    started = time.time()
    with logs.capture(log, echo) as say:
        say(
            f"sitebench nightly: {site_name} on {socket.gethostname()}, started "
            f"{_stamp(started)}{opening}"
        )
        say(f"log: {log}")
        lines, code = body(say)
        _ending(site_name, settings, lines, code, started, log, say)
    removed = logs.rotate(directory, logs.keep_of(settings))
    if not _echoing(echo):
        # Where the scheduler collects stdout: one line per night.
        print(
            f"sitebench nightly: {site_name}: {codes.verdict(code)} (exit {code}); log {log}"
            + (f"; {len(removed)} old log(s) removed" if removed else ""),
            flush=True,
        )
    logs.rotate_scheduled(directory)
    return code


def _ending(site_name, settings, lines, code, started, log, say):
    """The alert (a night that did not pass, or whose publish refused incoming commits) and
    the verdict line; a stop signal now is noted, not obeyed: the night is ending."""
    late = []
    previous = _handle(lambda signum, _f: late.append(signal.Signals(signum).name))
    try:
        word = codes.verdict(code)
        head = f"sitebench nightly: {site_name} on {socket.gethostname()}: {word} (exit {code})"
        report = "\n".join(
            [
                head,
                f"started {_stamp(started)}, ended {_stamp(time.time())}",
                *lines,
                f"log: {log}",
            ]
        )
        if code != codes.PASSED or any(ln.startswith(REFUSED) for ln in report.splitlines()):
            alert.send(alert.command_of(site_name, settings), report + "\n", say)
        if late:
            say(f"(received {', '.join(late)} while finishing; the night ended anyway)")
        say(logs.verdict_line(word, code))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _night(site, scale, reframe_args, publish, suite, publisher, say, named=False):
    """The night under its lock: ([lines for the alert], exit code). ``named``: the night
    was given toolchains, checked against the site's before the suite starts."""
    lines = []
    previous = _handle(_raise_stopped)
    try:
        try:
            with hold(site.name) as holder:
                say(f"lock: held ({holder})")
                return _locked(site, scale, reframe_args, publish, suite, publisher, say, named)
        except AlreadyRunning as err:
            lines.append(f"did not start: {err.problem}")
            say(f"sitebench nightly: {err.problem}")
            return lines, codes.ALREADY_RUNNING
        except KeyboardInterrupt:
            return _stopped("SIGINT", say)
        except Stopped as stop:
            return _stopped(stop.signame, say)
        except Exception as err:  # a bug: said, with its traceback, never a silent night
            say(traceback.format_exc().rstrip())
            line = f"sitebench failed: {type(err).__name__}: {err} (traceback in the log)"
            say(f"sitebench nightly: {line}")
            return [line], codes.CRASHED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stopped(signame, say):
    line = (
        f"interrupted ({signame}) before a run was stored; the lock is released, "
        "nothing was published"
    )
    say(f"sitebench nightly: {line}")
    return [line], codes.interrupted(signame)


def _named_toolchains_exist(site):
    """A clear error when a toolchain the night was given is not one of the site's: before
    Spack is set up. The local site's are known once detected (the suite detects them, and
    its runner checks the names then)."""
    from sitebench.sites import toolchains
    from sitebench.discovery import local_site

    if site.detected_here and not local_site.is_detected():
        return
    toolchains.selected(toolchains.load(site))


def _locked(site, scale, reframe_args, publish, suite, publisher, say, named=False):
    lines = []
    try:
        if named:
            _named_toolchains_exist(site)
        outcome = suite(site, scale, reframe_args)
    except SitebenchError as err:
        line = f"could not run: {err.problem}" + (f"\n  fix: {err.fix}" if err.fix else "")
        say(f"sitebench nightly: {line}")
        return [line], codes.NOT_RUN
    run = shown(outcome.run_dir)
    if outcome.code > codes.INTERRUPTED_BASE:
        signame = codes.verdict(outcome.code).split("(")[-1].rstrip(")")
        line = (
            f"interrupted ({signame}): the partial run is stored in {run}, marked partial; "
            "the lock is released, nothing was published (the next publish sends it)"
        )
        say(f"sitebench nightly: {line}")
        return [line, outcome.summary], outcome.code
    failed = outcome.code != 0
    lines.append(
        f"run: {run} (ReFrame exit {outcome.code}"
        + (", a check failed" if failed else "")
        + (f", {outcome.worse} figure(s) drifted worse" if outcome.worse else "")
        + ")"
    )
    if outcome.disturbed:
        lines.append(disturbed_line(outcome.disturbed))
    lines += [outcome.summary, outcome.drift]
    code = codes.FAILED if failed or outcome.worse else codes.PASSED
    if not publish:
        said, ok = "not published: --no-publish", True
    elif not site.settings.get("results"):
        said, ok = "not published: no results remote configured (site.yaml results:)", True
    else:
        said, ok = publish_run(site, publisher)
    say(said)
    lines.append(said)
    if not ok and code == codes.PASSED:
        code = codes.NOT_PUBLISHED
    return lines, code

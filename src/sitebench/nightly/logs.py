"""A log per night in the site's ``nightly.logs`` directory, the last ``nightly.keep`` kept
(and, counted apart, the last ``keep`` starts that found a night running); the scheduler's
own ``scheduled.log`` there is renamed ``scheduled.log.1`` past 1 MiB.

A night's log is ``<UTC time to the microsecond>Z-<pid>.log``; everything the night prints
goes into it, ReFrame and Spack included (their file descriptors 1 and 2 are the log's
pipe), and on a terminal to the screen as well. Its last line is the verdict, which
``nightly status`` reads back; a night killed outright (SIGKILL, power) has none and shows
as unfinished.
"""

import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sitebench.common import paths
from sitebench.nightly import schedule
from sitebench.nightly.codes import ALREADY_RUNNING

DEFAULT_KEEP = 30
#: The scheduler's log is renamed scheduled.log.1 past this size: the two hold the last
#: 1 to 2 MiB of what the scheduler collected (a night adds one line of about 150 bytes).
SCHEDULED_MAX = 2**20
NAME = re.compile(r"^(\d{8}T\d{6})(\d{6})Z-(\d+)\.log$")
VERDICT = re.compile(r"^sitebench nightly: verdict: (.*) \(exit (\d+)\)$")


def logs_dir(site, settings):
    """The site's ``nightly.logs`` (relative: to the checkout), default
    ``.sitebench/nightly/<site>/logs``."""
    given = (settings.get("nightly") or {}).get("logs")
    if not given:
        return paths.state_dir() / "nightly" / site / "logs"
    return (paths.ROOT / Path(given).expanduser()).resolve()


def keep_of(settings):
    return (settings.get("nightly") or {}).get("keep", DEFAULT_KEEP)


def new_log(directory, now=None):
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    micro = int(now % 1 * 1e6)
    return directory / f"{stamp}{micro:06d}Z-{os.getpid()}.log"


def night_logs(directory):
    """The nights' logs of ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if NAME.match(p.name) and p.is_file())


def rotate(directory, keep):
    """Remove all but the newest ``keep`` nights' logs; return the removed ones. The starts
    that found a night running (exit 4) are counted apart, their newest ``keep`` kept: a
    scheduler starting nights too often never pushes the nights' own logs out."""
    nights, not_started = [], []
    for path in night_logs(directory):
        not_run = read_night(path).code == ALREADY_RUNNING
        (not_started if not_run else nights).append(path)
    old = [p for group in (nights, not_started) for p in (group[:-keep] if keep > 0 else [])]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def rotate_scheduled(directory, limit=SCHEDULED_MAX):
    """Rename the scheduler's log (what cron, systemd or scrontab append the nights' output
    to) ``scheduled.log.1``, replacing the one before, once it is past ``limit`` bytes: the
    next night's scheduler opens a new one. A rename loses nothing: a night still writing
    goes on in the renamed file."""
    path = schedule.scheduled_log(directory)
    try:
        if path.stat().st_size > limit:
            path.replace(path.with_name(path.name + ".1"))
            return True
    except OSError:
        pass  # none yet, or not ours to rename: the nights' own logs are unaffected
    return False


def verdict_line(word, code):
    return f"sitebench nightly: verdict: {word} (exit {code})"


@dataclass
class Night:
    log: Path
    started: str  # UTC, from the name
    verdict: str  # "unfinished" when the log has no verdict line
    code: int | None


def read_night(path):
    stamp = NAME.match(path.name).group(1)
    started = (
        f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}:{stamp[13:]} UTC"
    )
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            tail = f.read().decode(errors="replace").splitlines()
    except OSError:
        tail = []
    for line in reversed(tail):
        m = VERDICT.match(line.strip())
        if m:
            return Night(path, started, m.group(1), int(m.group(2)))
    return Night(path, started, "unfinished (no verdict: still running, or killed)", None)


def last_nights(directory, count=7):
    return [read_night(p) for p in night_logs(directory)[-count:]]


@contextmanager
def capture(path, echo=None):
    """Everything written to file descriptors 1 and 2 in the block (this process and its
    children) goes to ``path``, and to the terminal too when stdout is one (``echo``).

    Yields a function writing one line to the log (and the terminal).
    """
    echo = sys.stdout.isatty() if echo is None else echo
    log = open(path, "ab", buffering=0)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    read_end, write_end = os.pipe()

    def pump():
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            log.write(chunk)
            if echo:
                try:
                    os.write(saved[0], chunk)
                except OSError:
                    pass

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    os.dup2(write_end, 1)
    os.dup2(write_end, 2)
    os.close(write_end)

    # Python's own output too, whatever sys.stdout was (a test's capture, say).
    streams = sys.stdout, sys.stderr
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)

    def say(line):
        print(line, flush=True)

    try:
        yield say
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        # The pipe ends when every writer closed it: this process now, and any child that
        # outlived the night (it would keep writing to the log until it ends).
        thread.join(timeout=5)
        log.close()

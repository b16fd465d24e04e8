"""sitebench's Java ping-pong (spack-repo/.../java_pingpong/JavaPingPong.java) under MPJ
Express (devices multicore, niodev) and Open MPI's Java bindings.

stdout of a complete run (MPJ's starter prints its first line, niodev adds "Starting
process" and "Stopping Process" lines)::

    MPJ Express (0.44) is started in the multicore configuration
    # sitebench Java ping-pong v1.0
    # MPI: MPJ Express
    # Java: OpenJDK 64-Bit Server VM 17.0.15
    # Iterations: 200+1000 up to 8192 B, 5+50 above
    # Size    Latency (us)    Bandwidth (MB/s)
    1                  25.25                0.04
    ...
    4194304          7035.32              596.18
    # done

The program refuses a run it cannot make with "# error: ..." (a rank count other than 2, a
size that is not a power of two, a message received with the wrong content). MPJ Express
exits 0 after some failures (a class it cannot load: a Java stack trace), so the output, not
the exit status, says whether the run completed. The launchers explain their own refusals on stderr
("java-pingpong: no JVM at ...", "mpj-niodev-run: port 40055 ... is already in use ..."), and
mpj-niodev-run says when the daemon listened and when it stopped it.
"""

import math
import re
from dataclasses import dataclass, field

from . import ParseError, at_resolution_note, printed_resolution

_HEADER = re.compile(r"^# sitebench Java ping-pong v(\S+)\s*$", re.MULTILINE)
_API = re.compile(r"^# MPI: (.+?)\s*$", re.MULTILINE)
_JAVA = re.compile(r"^# Java: (.+?)\s*$", re.MULTILINE)
_COLUMNS = re.compile(r"^# Size\s+Latency \(us\)\s+Bandwidth \(MB/s\)\s*$", re.MULTILINE)
_ROW = re.compile(r"^(\d+)\s+(\S+)\s+(\S+)\s*$")
_DONE = re.compile(r"^# done\s*$", re.MULTILINE)
_REFUSED = re.compile(r"^# error: (.*)$", re.MULTILINE)
# A Java exception (MPJ's runtime prints its stack traces on stdout or stderr).
_EXCEPTION = re.compile(
    r"^(?:Exception in thread \"[^\"]*\" )?((?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*)$",
    re.MULTILINE,
)
# MPJ Express 0.44's starter relays the daemon's lines until one ends with "EXIT". When the
# daemon's keep-alive is written right after it, the line is "EXIT@Ping#", the starter reads
# on into a closed socket and prints this trace after the job has ended (IOMessagesThread.java
# lines 64-69). Nothing was lost: the run is judged by its rows and "# done" as any other.
_STARTER_MISSED_EXIT = re.compile(r"^EXIT@Ping#\s*$", re.MULTILINE)
_STARTER_EXIT_TRACE = re.compile(
    r"^java\.util\.NoSuchElementException: No line found\n"
    r"(?:[ \t]+at (?:java\.base/java\.util\.Scanner|runtime\.starter\.IOMessagesThread)"
    r"\.[\w$<>]+\([^)\n]*\)(?:\n|\Z))+"
    r"(?![ \t]+at )",  # every frame is the starter's or the Scanner's
    re.MULTILINE,
)
# The launchers' own refusals: bin/java-pingpong (no JVM, no libmpi_java.so) and
# mpj-niodev-run (no namespace, the daemon's port in use, the daemon not listening).
_LAUNCHER = re.compile(r"^((?:java-pingpong|mpj-niodev-run): .*)$", re.MULTILINE)
_DAEMON_STOPPED = re.compile(r"^mpj-niodev-run: daemon \(pid \d+, port \d+\) stopped$", re.M)
_DAEMON_LISTENING = re.compile(
    r"^mpj-niodev-run: daemon \(pid \d+\) listening on 127\.0\.0\.1:\d+, loopback only$", re.M
)

#: A switch of protocol is a step up in latency that the larger sizes never come back from:
#: the smallest latency at and above the size, over the smaller of the two sizes below it,
#: at least this factor.
SWITCH_FACTOR = 8.0
#: Sizes below this are not considered for a switch (start-up noise, no protocol there).
SWITCH_FROM = 1024

#: The APIs the program names in its "# MPI:" line, by the check's ``api`` parameter.
API_NAMES = {"mpj": "MPJ Express", "ompi": "Open MPI Java bindings"}


@dataclass
class JavaPingPongResult:
    """One run: version, the Java MPI it used, the JVM, figures per message size."""

    version: str
    api: str
    java: str
    latency: dict = field(default_factory=dict)  # size (B) -> us (half a round trip)
    bandwidth: dict = field(default_factory=dict)  # size (B) -> MB/s (size / one-way time)
    done: bool = False
    #: Sizes whose latency or bandwidth printed as zero -> the printed resolution (the
    #: table has two decimals: a slow 1-byte bandwidth prints 0.00): figures at the
    #: resolution limit, not failures.
    at_resolution: dict = field(default_factory=dict)

    def resolution_note(self):
        """A sentence naming the sizes printed as zero, or None."""
        return at_resolution_note("The Java ping-pong", "us or MB/s", self.at_resolution)

    @property
    def bandwidth_peak(self):
        """(size, MB/s) of the highest bandwidth; the smallest size wins a tie."""
        size = max(self.bandwidth, key=lambda s: (self.bandwidth[s], -s))
        return size, self.bandwidth[size]

    def switch_size(self):
        """The message size where latency steps up for good (eager to rendezvous), or None.

        For each size s from :data:`SWITCH_FROM` on: the smallest latency at s or above over
        the smaller of s/2's and s/4's; the size with the largest such factor, if it is at
        least :data:`SWITCH_FACTOR`. Minima on both sides ignore a single slow size (a
        preempted measurement) above or below the step; a protocol switch slows every size
        after it. (The largest below let one slow 65536 B row hide MPJ's switch in CI.)
        """
        sizes = sorted(self.latency)
        best = None
        for i, size in enumerate(sizes):
            below = [s for s in sizes[max(0, i - 2) : i] if s >= size // 4]
            if size < SWITCH_FROM or not below:
                continue
            lowest_below = min(self.latency[s] for s in below)
            if lowest_below <= 0:  # printed 0.00: under the resolution, no ratio to take
                continue
            factor = min(self.latency[s] for s in sizes[i:]) / lowest_below
            if factor >= SWITCH_FACTOR and (best is None or factor > best[1]):
                best = (size, factor)
        return best[0] if best else None


def parse(text):
    """A :class:`JavaPingPongResult` of a complete run; :class:`ParseError` otherwise."""
    refused = _REFUSED.search(text)
    if refused:
        raise ParseError(f"the Java ping-pong refused the run: {refused.group(1)}")
    header = _HEADER.search(text)
    if not header:
        exception = _EXCEPTION.search(text)
        raise ParseError(
            "no '# sitebench Java ping-pong' header: "
            + (
                f"the JVM failed before the program started: {exception.group(1)}"
                if exception
                else "not the Java ping-pong's output, or it did not start"
            )
        )
    columns = _COLUMNS.search(text, header.end())
    if not columns:
        raise ParseError("no '# Size  Latency (us)  Bandwidth (MB/s)' line (truncated run?)")
    api, java = _API.search(text), _JAVA.search(text)
    result = JavaPingPongResult(
        header.group(1), api.group(1) if api else "", java.group(1) if java else ""
    )
    for line in text[columns.end() :].splitlines():
        match = _ROW.match(line)
        if not match:
            if line.startswith("# done"):
                result.done = True
                break
            continue
        size = int(match.group(1))
        try:
            latency, bandwidth = float(match.group(2)), float(match.group(3))
        except ValueError:
            raise ParseError(f"size {size}: values {match.group(2)!r} {match.group(3)!r}")
        result.latency[size] = latency
        result.bandwidth[size] = bandwidth
        for raw, value in ((match.group(2), latency), (match.group(3), bandwidth)):
            if value == 0:
                result.at_resolution[size] = printed_resolution(raw)
    if not result.latency:
        raise ParseError("no message size was measured (truncated run?)")
    return result


def problems(stdout, stderr, *, api, min_size, max_size, exitcode=0, niodev=False):
    """What is wrong with a run, as sentences (empty: it ran as asked).

    ``api``: ``mpj`` or ``ompi`` (the "# MPI:" line must name it); every power of two from
    ``min_size`` to ``max_size`` must have a finite latency and bandwidth of 0 or more (0:
    under the printed resolution, a figure at the limit, see ``resolution_note``) and the
    run must print "# done". ``niodev``: mpj-niodev-run must have said that the daemon
    listened on loopback and that it stopped it.
    """
    found = []
    both = stdout + "\n" + stderr
    launcher = [
        line
        for line in _LAUNCHER.findall(stderr)
        if not _DAEMON_STOPPED.match(line) and not _DAEMON_LISTENING.match(line)
    ]
    found += launcher
    if exitcode:
        found.append(f"exit status {exitcode}")
    try:
        result = parse(stdout)
    except ParseError as err:
        found.append(str(err))
        result = None
    if result is not None:
        if API_NAMES[api] not in result.api:
            found.append(f"ran with {result.api!r}, not {API_NAMES[api]!r}")
        wanted = [1 << k for k in range(max_size.bit_length()) if (1 << k) >= min_size]
        missing = [s for s in wanted if s not in result.latency]
        if missing:
            found.append(f"no figures for {len(missing)} sizes, from {missing[0]} B")
        bad = [
            s
            for s in wanted
            if s in result.latency
            and not all(
                math.isfinite(v) and v >= 0 for v in (result.latency[s], result.bandwidth[s])
            )
        ]
        if bad:
            found.append(f"a negative or not finite value at {bad[0]} B")
        if not result.done:
            found.append("no '# done' line: the run stopped before the largest size")
    if _STARTER_MISSED_EXIT.search(stdout):
        both = _STARTER_EXIT_TRACE.sub("", both)
    exception = _EXCEPTION.search(both)
    if exception and not found:
        found.append(f"Java exception: {exception.group(1)}")
    if niodev and not launcher:
        if not _DAEMON_LISTENING.search(stderr):
            found.append("mpj-niodev-run did not report the daemon listening on loopback")
        if not _DAEMON_STOPPED.search(stderr):
            found.append("mpj-niodev-run did not report the daemon stopped")
    return found

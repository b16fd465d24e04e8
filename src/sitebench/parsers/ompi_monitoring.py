"""Open MPI's monitoring files (``--mca pml_monitoring_enable 2``, 4.1).

With ``pml_monitoring_enable_output 3`` and ``pml_monitoring_filename PREFIX`` every rank
writes ``PREFIX.<rank>.prof`` in ``MPI_Finalize`` (Open MPI 4.1.4, captured in
``tests/fixtures/ompi-monitoring/``)::

    # POINT TO POINT
    E	0	1	2336512 bytes	1264 msgs sent	1,0,0,1,832,16,0,...   (66 counts)
    I	0	1	4 bytes	2 msgs sent
    # OSC
    S	0	1	64 bytes	2 msgs sent
    # COLLECTIVES
    C	0	1	12 bytes	3 msgs sent
    D	MPI_COMM_WORLD	procs: 0,1
    O2A	0	4 bytes	1 msgs sent
    ...

``E`` lines are the messages the application sent to a peer (non-negative tags), ``I``
lines Open MPI's internal ones (negative tags: collectives broken into point-to-point); the
counts after an ``E`` line (or, where the peer got no application message, after its ``I``
line) are all its point-to-point messages to that peer, both kinds, by size: bucket 0 holds
empty messages, bucket k the sizes from 2^(k-1) to 2^k - 1 bytes. ``S``/``R`` are one-sided
(osc) traffic, ``C`` the collectives' traffic per peer as the coll component counted it
(the same messages as the ``I`` lines, seen from above), ``D``/``O2A``/``A2O``/``A2A`` per
communicator. A rank that never reached ``MPI_Finalize`` (aborted, killed, timed out)
writes no file: :func:`read_run` names the missing ranks.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import ParseError

#: Size buckets Open MPI 4.1 counts per peer (64 powers of two and the empty messages, +1).
HISTOGRAM_BUCKETS = 66

_SECTIONS = ("# POINT TO POINT", "# OSC", "# COLLECTIVES")
_PEER_LINE = re.compile(
    r"^(?P<kind>[EISRC])\t(?P<rank>\d+)\t(?P<peer>\d+)\t(?P<bytes>\d+) bytes\t"
    r"(?P<msgs>\d+) msgs sent(?:\t(?P<hist>[\d,]+))?$"
)
_COMM_LINE = re.compile(
    r"^(?:D\t.+\tprocs: [\d,]*|(?:O2A|A2O|A2A)\t\d+\t\d+ bytes\t\d+ msgs sent)$"
)


def bucket_low(index):
    """The smallest size (bytes) bucket ``index`` counts: 0, 1, 2, 4, ..."""
    return 0 if index == 0 else 1 << (index - 1)


def bucket_label(index):
    """The sizes bucket ``index`` counts, half-open: '0 B', '[1, 2) B', '[1, 2) KiB', ..."""
    if index == 0:
        return "0 B"
    low = bucket_low(index)
    for unit, size in (
        ("EiB", 1 << 60),
        ("PiB", 1 << 50),
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ):
        if low >= size:
            return f"[{low // size}, {2 * low // size}) {unit}"


@dataclass
class PeerTraffic:
    """What one rank sent to one peer (the peer may be the rank itself)."""

    app_messages: int = 0  # E: the application's point-to-point messages
    app_bytes: int = 0
    internal_messages: int = 0  # I: Open MPI's own (collectives as point-to-point)
    internal_bytes: int = 0
    osc_messages: int = 0  # S: one-sided messages sent
    osc_bytes: int = 0
    coll_messages: int = 0  # C: the collectives' traffic as the coll component saw it
    coll_bytes: int = 0
    histogram: tuple = ()  # point-to-point messages (E and I) by size bucket


@dataclass
class RankFile:
    rank: int
    peers: dict = field(default_factory=dict)  # peer rank -> PeerTraffic


@dataclass
class Monitoring:
    """Every rank file of one run. ``missing`` lists the ranks that wrote none (expected
    ranks given): such a run is partial, its figures a lower bound of what was sent."""

    ranks: dict  # rank -> RankFile
    expected: int = 0
    missing: tuple = ()

    @property
    def complete(self):
        return not self.missing


def parse_rank(text, name="monitoring file"):
    """One ``PREFIX.<rank>.prof``: a :class:`RankFile`; :class:`ParseError` names the first
    line that is not Open MPI's, a missing section or a cut-short file."""
    if not text.strip():
        raise ParseError(f"{name} is empty: the rank did not finish writing it")
    lines = text.split("\n")
    if lines[-1] != "":
        raise ParseError(f"{name} ends inside a line ({lines[-1][:40]!r}): cut short")
    lines = lines[:-1]
    seen = [line for line in lines if line.startswith("# ")]
    if tuple(seen) != _SECTIONS:
        raise ParseError(
            f"{name} has the sections {seen}, not {list(_SECTIONS)}: not Open MPI 4.1's "
            f"monitoring output, or cut short"
        )
    rank = None
    peers = {}
    for number, line in enumerate(lines, 1):
        if line in _SECTIONS or _COMM_LINE.match(line):
            continue
        match = _PEER_LINE.match(line)
        if not match:
            raise ParseError(f"{name} line {number} is not monitoring output: {line[:80]!r}")
        this = int(match["rank"])
        if rank is None:
            rank = this
        elif this != rank:
            raise ParseError(f"{name} line {number} is rank {this}'s in rank {rank}'s file")
        traffic = peers.setdefault(int(match["peer"]), PeerTraffic())
        kind, msgs, size = match["kind"], int(match["msgs"]), int(match["bytes"])
        if kind == "E":
            traffic.app_messages, traffic.app_bytes = msgs, size
        elif kind == "I":
            traffic.internal_messages, traffic.internal_bytes = msgs, size
        elif kind == "S":
            traffic.osc_messages, traffic.osc_bytes = msgs, size
        elif kind == "C":
            traffic.coll_messages, traffic.coll_bytes = msgs, size
        if match["hist"]:
            counts = tuple(int(c) for c in match["hist"].split(","))
            if len(counts) != HISTOGRAM_BUCKETS:
                raise ParseError(
                    f"{name} line {number} has {len(counts)} size counts, not "
                    f"{HISTOGRAM_BUCKETS}: cut short or another Open MPI"
                )
            traffic.histogram = counts
    for peer, traffic in peers.items():
        sent = traffic.app_messages + traffic.internal_messages
        if sent and sum(traffic.histogram) != sent:
            raise ParseError(
                f"{name}: rank {rank} to {peer}: {sent} messages but "
                f"{sum(traffic.histogram)} counted by size"
            )
    if rank is None:
        rank = _rank_of_name(name)
    return RankFile(rank=rank, peers=peers)


def _rank_of_name(name):
    match = re.search(r"\.(\d+)\.prof$", str(name))
    return int(match.group(1)) if match else -1


def read_run(folder, prefix="rank", expected=0):
    """The ``<prefix>.<rank>.prof`` files of ``folder`` as a :class:`Monitoring`.

    ``expected``: the run's rank count; ranks without a file are listed in ``missing``
    (a partial result). No file at all, or a file that does not parse, is a
    :class:`ParseError` saying why."""
    folder = Path(folder)
    files = {}
    for path in sorted(folder.glob(f"{prefix}.*.prof")):
        rank = _rank_of_name(path.name)
        if rank >= 0:
            files[rank] = path
    if not files:
        raise ParseError(
            f"no Open MPI monitoring files {prefix}.<rank>.prof in {folder}: the run ended "
            f"before MPI_Finalize (aborted, killed or timed out), or ran without "
            f"--mca pml_monitoring_enable (not Open MPI?)"
        )
    ranks = {}
    for rank, path in files.items():
        text = path.read_text(errors="replace")
        parsed = parse_rank(text, path.name)
        if parsed.rank != rank:
            raise ParseError(f"{path.name} holds rank {parsed.rank}'s traffic")
        ranks[rank] = parsed
    expected = expected or max(ranks) + 1
    stray = sorted(r for r in ranks if r >= expected)
    if stray:
        raise ParseError(
            f"{folder} holds files of ranks {stray} beyond the run's {expected}: "
            f"files of another run?"
        )
    missing = tuple(r for r in range(expected) if r not in ranks)
    return Monitoring(ranks=ranks, expected=expected, missing=missing)

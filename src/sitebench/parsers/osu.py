"""OSU Micro-Benchmarks point-to-point output (osu_latency, osu_bw) and what Open MPI says
about the run on stderr: where each rank was bound and which transport carried the messages
(MPICH says it differently: see the end of this module).

stdout of a complete run::

    # OSU MPI Latency Test v7.2
    # Size          Latency (us)
    # Datatype: MPI_CHAR.
    1                       0.11
    ...
    16777216             1234.56

stderr, with ``mpirun --report-bindings`` and ``OMPI_MCA_btl_base_verbose=1``::

    [vm:27876] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]
    [vm:27881] mca: bml: Using tcp btl for send to [[26,1],0] on node vm
"""

import math
import re
from dataclasses import dataclass, field

from . import ParseError, at_resolution_note, printed_resolution

#: The figure each benchmark prints, by the title in its header.
UNITS = {"Latency": "us", "Bandwidth": "MB/s"}

_HEADER = re.compile(r"^# OSU MPI (?:(\S+) )?(Latency|Bandwidth) Test v(\S+)\s*$", re.MULTILINE)
_COLUMNS = re.compile(r"^# Size\s+(Latency \(us\)|Bandwidth \(MB/s\))\s*$", re.MULTILINE)
_ROW = re.compile(r"^(\d+)\s+(\S+)\s*$")
# "[vm:27876] MCW rank 1 bound to socket 0[core 1[hwt 0]]: [./B]"; several cores are listed
# as "socket 0[core 0[hwt 0]], socket 0[core 1[hwt 0]]".
_BOUND = re.compile(r"^\[([^:\]]+):\d+\] MCW rank (\d+) bound to (.*?): \[", re.MULTILINE)
_UNBOUND = re.compile(r"^\[([^:\]]+):\d+\] MCW rank (\d+) is not bound", re.MULTILINE)
_PLACE = re.compile(r"socket (\d+)\[core (\d+)")
# "[vm:27881] mca: bml: Using tcp btl for send to [[26,1],0] on node vm"
_BML = re.compile(
    r"^\[([^:\]]+):(\d+)\] mca: bml: Using (\w+) btl for send to \[\[\d+,\d+\],(\d+)\]",
    re.MULTILINE,
)
# Open MPI explains problems in blocks framed by dashed lines (warnings too); these lines
# mean that a process failed.
_BLOCK = re.compile(r"^-{20,}\n(.*?)\n-{20,}$", re.MULTILINE | re.DOTALL)
_FAILED = re.compile(
    r"^(?:\[[^\]]*\] \*\*\* )?(.*(?:An error occurred in MPI_\w+|MPI_ABORT was invoked"
    r"|exited on signal|exited with non-zero status|noticed that process rank).*)$",
    re.MULTILINE,
)


@dataclass
class OsuResult:
    """One OSU point-to-point run: its title, version and value per message size."""

    kind: str  # "Latency" or "Bandwidth"
    version: str
    unit: str
    values: dict = field(default_factory=dict)  # message size (B) -> us or MB/s
    #: Sizes whose value printed as zero -> the printed resolution (0.01 for "0.00"):
    #: figures at the resolution limit, not failures (a slow 1-byte osu_bw prints 0.00).
    at_resolution: dict = field(default_factory=dict)

    def resolution_note(self):
        """A sentence naming the sizes printed as zero, or None."""
        return at_resolution_note(f"OSU {self.kind}", self.unit, self.at_resolution)

    @property
    def smallest(self):
        """(size, value) of the smallest message measured."""
        size = min(self.values)
        return size, self.values[size]

    @property
    def largest(self):
        """(size, value) of the largest message measured."""
        size = max(self.values)
        return size, self.values[size]

    @property
    def peak(self):
        """(size, value) of the largest value; the smallest size wins a tie."""
        size = max(self.values, key=lambda s: (self.values[s], -s))
        return size, self.values[size]


@dataclass
class Binding:
    """Where Open MPI bound one rank: host, and the (socket, core) pairs of its cpuset."""

    rank: int
    host: str
    places: tuple  # ((socket, core), ...); empty: not bound

    @property
    def sockets(self):
        return {s for s, _ in self.places}

    @property
    def cores(self):
        return set(self.places)


def parse(text):
    """Parse one osu_latency or osu_bw run; raise ParseError naming what is missing."""
    if not text.strip():
        raise ParseError("OSU output is empty")
    header = _HEADER.search(text)
    if not header:
        raise ParseError("OSU output has no '# OSU MPI ... Test v<version>' header")
    kind, version = header.group(2), header.group(3)
    columns = _COLUMNS.search(text)
    if not columns:
        raise ParseError(f"OSU {kind} output has no '# Size  {kind} (...)' column header")
    values, at_resolution = {}, {}
    for line in text[columns.end() :].splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        row = _ROW.match(line)
        if not row:
            raise ParseError(f"OSU {kind} output has a line that is not 'size value': {line!r}")
        size, raw = int(row.group(1)), row.group(2)
        try:
            value = float(raw)
        except ValueError:
            raise ParseError(f"OSU {kind} at {size} B is not a number: {raw!r}") from None
        if not math.isfinite(value) or value < 0:
            raise ParseError(f"OSU {kind} at {size} B is negative or not finite: {raw}")
        if size in values:
            raise ParseError(f"OSU {kind} output lists {size} B twice")
        if value == 0:
            at_resolution[size] = printed_resolution(raw)
        values[size] = value
    if not values:
        raise ParseError(f"OSU {kind} output has no measurement (MPI failed to start?)")
    return OsuResult(
        kind=kind, version=version, unit=UNITS[kind], values=values, at_resolution=at_resolution
    )


def sizes(min_size, max_size):
    """The message sizes OSU measures between two powers of two: min, 2 min, ..., max."""
    if min_size < 1 or max_size < min_size:
        raise ValueError(f"message sizes {min_size}:{max_size}: need 1 <= min <= max")
    out, size = [], min_size
    while size <= max_size:
        out.append(size)
        size *= 2
    return out


def missing_sizes(result, min_size, max_size):
    """Sizes from ``min_size`` to ``max_size`` that the run did not report."""
    return [s for s in sizes(min_size, max_size) if s not in result.values]


def printed_every_size(stdout, min_size, max_size):
    """Whether an OSU output holds every size from ``min_size`` to ``max_size``: a launch
    stopped after it finished measuring, not during."""
    try:
        return not missing_sizes(parse(stdout), min_size, max_size)
    except ParseError:
        return False


def bindings(stderr):
    """rank -> Binding, from ``mpirun --report-bindings`` lines; ranks not bound have no places."""
    found = {}
    for host, rank, where in _BOUND.findall(stderr):
        places = tuple((int(s), int(c)) for s, c in _PLACE.findall(where))
        found[int(rank)] = Binding(int(rank), host, places)
    for host, rank in _UNBOUND.findall(stderr):
        found[int(rank)] = Binding(int(rank), host, ())
    return found


def transports(stderr):
    """Open MPI BTLs that carried messages between different processes (not ``self``).

    From the ``mca: bml: Using <btl> btl for send to [[job,1],<rank>]`` lines that
    ``OMPI_MCA_btl_base_verbose=1`` prints once per pair of processes.
    """
    return {btl for _host, _pid, btl, _peer in _BML.findall(stderr) if btl != "self"}


_LOST_HELP = re.compile(r"ORTE_ERROR_LOG: .* in file \S*show_help\.c")

#: Open MPI messages that say something failed without saying why.
_GENERIC = (
    "An error occurred in",
    "Primary job terminated",
    "mpirun detected that one or more processes",
    "mpirun has exited",
)


def mpi_failed(stderr):
    """True when Open MPI says a process failed (not for its warnings)."""
    return bool(_FAILED.search(stderr))


def mpi_error(stderr):
    """What Open MPI said first, in one sentence: its first framed message, else its first
    failure line; empty when it said nothing."""
    # Ranks print in any order: a message naming the cause beats the generic ones that
    # only say an MPI call failed or a process exited.
    blocks = [" ".join(b.split()) for b in _BLOCK.findall(stderr)]
    specific = [b for b in blocks if not b.startswith(_GENERIC)]
    if blocks:
        text = (specific or blocks)[0]
        return text.split(". ")[0].rstrip(".") + "."
    failed = _FAILED.search(stderr)
    return " ".join(failed.group(1).split()) if failed else ""


def mapping_problem(found, mapping, ranks=2, cores_per_node=None):
    """Why the bindings in ``found`` are not ``mapping`` (core, socket, node); None if they are.

    core: one host, one socket, each rank on its own distinct core; socket: one host, each
    rank on its own socket; node: each rank on its own host. On nodes of one core
    (``cores_per_node`` 1) mpirun reports a rank "not bound (or bound to all available
    processors)": the node's only core is its binding.
    """
    if mapping not in ("core", "socket", "node"):
        raise ValueError(f"unknown mapping {mapping!r}: core, socket or node")
    if sorted(found) != list(range(ranks)):
        return (
            f"mpirun reported bindings for ranks {sorted(found)}, expected 0..{ranks - 1} "
            f"(no --report-bindings lines on stderr?)"
        )
    ranked = [found[r] for r in range(ranks)]
    unbound = [b.rank for b in ranked if not b.places]
    if unbound and not (mapping == "node" and cores_per_node == 1):
        return f"ranks {unbound} are not bound to cores (mapping {mapping} asks for binding)"
    hosts = [b.host for b in ranked]
    where = "; ".join(f"rank {b.rank} on {b.host} cores {sorted(b.cores)}" for b in ranked)
    if mapping == "node":
        if len(set(hosts)) != ranks:
            return f"mapping node wants one rank per host, got {where}"
        return None
    if len(set(hosts)) != 1:
        return f"mapping {mapping} wants both ranks on one host, got {where}"
    if any(len(b.sockets) != 1 for b in ranked):
        return f"mapping {mapping} wants each rank within one socket, got {where}"
    sockets = [next(iter(b.sockets)) for b in ranked]
    cores = [b.cores for b in ranked]
    if any(a & b for i, a in enumerate(cores) for b in cores[i + 1 :]):
        return f"mapping {mapping} wants the ranks on different cores, got {where}"
    if mapping == "core" and len(set(sockets)) != 1:
        return f"mapping core wants both ranks on one socket, got {where}"
    if mapping == "socket" and len(set(sockets)) != ranks:
        return f"mapping socket wants each rank on its own socket, got {where}"
    return None


def lost_help(stderr):
    """True when Open MPI's own help-message channel broke (``ORTE_ERROR_LOG`` from
    ``show_help.c``): it then prints a generic error, or none, instead of its reason."""
    return bool(_LOST_HELP.search(stderr))


def output_problems(stdout, kind, version, min_size, max_size, because=""):
    """(problems, complete) of OSU's own output, whatever the MPI: the test it ran, its
    version and a result for every size; ``complete`` is None where it cannot be read, else
    whether every size has its result. ``because``: the MPI's own words, appended."""
    try:
        result = parse(stdout)
    except ParseError as err:
        return [f"{err}{because}"], None
    found = []
    if result.kind != kind:
        found.append(f"OSU ran the {result.kind} test, expected {kind}")
    if version and result.version != version:
        found.append(f"OSU printed v{result.version}, the binary was built as {version}")
    missing = missing_sizes(result, min_size, max_size)
    if missing:
        found.append(
            f"OSU {result.kind} has no result for {len(missing)} message sizes "
            f"({', '.join(map(str, missing))} B): truncated run, or -m below {max_size}"
            f"{because}"
        )
    return found, not missing


def problems(
    stdout,
    stderr,
    *,
    kind,
    mapping,
    btl,
    min_size=1,
    max_size=16777216,
    version=None,
    exitcode=None,
    cores_per_node=None,
):
    """Everything that keeps a run from counting, one message each; [] for a good run.

    ``kind``: "Latency" or "Bandwidth"; ``btl``: the Open MPI BTL the run had to use
    between the two ranks (``vader``, ``tcp``); ``version``: the OSU version the binary
    was built as (None: not checked); ``exitcode``: mpirun's (None: unknown).
    """
    said = mpi_error(stderr)
    because = f"; Open MPI: {said}" if said else ""
    if exitcode:
        because += f"; mpirun exited with code {exitcode}"
    if lost_help(stderr):
        # Seen here with Open MPI 4.1.4 in 7 of 63 runs that failed in MPI_Init.
        because += (
            "; Open MPI's help messages were garbled (ORTE_ERROR_LOG in show_help.c), "
            "its reason may be missing: rerun to see it"
        )
    found, complete = output_problems(stdout, kind, version, min_size, max_size, because)
    if complete is None:
        return found
    if complete and mpi_failed(stderr):
        found.append(f"Open MPI reported a failure: {said}")
    problem = mapping_problem(bindings(stderr), mapping, cores_per_node=cores_per_node)
    if problem:
        found.append(problem)
    used = transports(stderr)
    if not used:
        found.append(
            f"transport: Open MPI printed no 'mca: bml: Using <btl> btl' line, expected {btl} "
            f"(OMPI_MCA_btl_base_verbose unset, or not Open MPI?)"
        )
    elif used != {btl}:
        found.append(
            f"transport: Open MPI used {', '.join(sorted(used))} between the ranks, "
            f"expected {btl}"
        )
    return found


# -- MPICH (hydra process manager, ch4:ucx device) ------------------------------------------
#
# MPICH says the same things differently. stdout, with HYDRA_TOPO_DEBUG=1, before OSU's header
# (hydra prints it in each process after binding it, so the order of the lines varies)::
#
#     process 1 binding: 01
#
# the CPUs of the N-th process hydra started on its host, one digit per CPU (OS index, CPU 0
# leftmost); on one host N is the rank. stderr, with UCX_LOG_LEVEL=info UCX_LOG_FILE=stderr,
# one line per UCX endpoint configuration, each lane named transport/device::
#
#     [...] [vm:31425:0]  ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(tcp/lo) rma_am(tcp/lo)
#
# Debian 12's MPICH 4.0.2 sends even between ranks of one host through UCX (UCX_TLS=tcp alone
# turns a 1-byte latency of 0.14 us into 4.3 us there), so these lanes are the transports
# that can carry messages.

_HYDRA_BINDING = re.compile(r"^process (\d+) binding: ([01]+)[ \t]*\n?", re.MULTILINE)
_UCX_EP_CFG = re.compile(r"UCX\s+INFO\s+ep_cfg\[\d+\]: (.*)$", re.MULTILINE)
_UCX_LANE = re.compile(r"([\w-]+)/[^\s()]+")
_MPICH_FATAL = re.compile(r"^(?:Abort\(-?\d+\)[^:\n]*: )?(Fatal error in .*)$", re.MULTILINE)
_UCX_ERROR = re.compile(r"UCX\s+ERROR\s+(.*)$", re.MULTILINE)
_HYDRA_BAD = re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")

#: UCX transports that move data through memory the processes of one host share (UCX_TLS "sm").
UCX_SHARED_MEMORY = frozenset({"sysv", "posix", "cma", "knem", "xpmem"})


def without_hydra_bindings(stdout):
    """``stdout`` without hydra's ``process N binding: ...`` lines (for :func:`parse`)."""
    return _HYDRA_BINDING.sub("", stdout)


def cpu_places(topology):
    """CPU (OS index) -> (socket, core), from ReFrame's processor topology (hex CPU masks in
    ``sockets`` and ``cores``); {} when it lacks them."""

    def cpus(mask):
        bits = int(mask, 16)
        return [i for i in range(bits.bit_length()) if bits >> i & 1]

    topology = topology or {}
    socket_of = {c: s for s, mask in enumerate(topology.get("sockets") or []) for c in cpus(mask)}
    return {
        c: (socket_of[c], core)
        for core, mask in enumerate(topology.get("cores") or [])
        for c in cpus(mask)
        if c in socket_of
    }


def hydra_bindings(stdout, places, host=""):
    """rank -> Binding from hydra's ``process N binding`` lines of one host; ``places`` from
    :func:`cpu_places`. A CPU the topology does not list is placed on socket -1."""
    found = {}
    for index, bits in _HYDRA_BINDING.findall(stdout):
        cpus = [i for i, bit in enumerate(bits) if bit == "1"]
        where = tuple(sorted({places.get(c, (-1, c)) for c in cpus}))
        found[int(index)] = Binding(int(index), host, where)
    return found


def ucx_transports(stderr):
    """UCX transports of the endpoint configurations (``ep_cfg[i]: tag(sysv/memory ...)``),
    without ``self`` (a process's messages to itself)."""
    return {name for lanes in _UCX_EP_CFG.findall(stderr) for name in _UCX_LANE.findall(lanes)} - {
        "self"
    }


def mpich_error(stderr):
    """What MPICH said first: its ``Fatal error in ...`` line, else UCX's first error, else
    hydra's bad-termination notice; empty when it said none of them."""
    for pattern in (_MPICH_FATAL, _UCX_ERROR):
        match = pattern.search(stderr)
        if match:
            return " ".join(match.group(1).split())
    bad = _HYDRA_BAD.search(stderr)
    return bad.group(0).capitalize() if bad else ""


def mpich_problems(
    stdout,
    stderr,
    *,
    kind,
    mapping,
    transport,
    places,
    min_size=1,
    max_size=16777216,
    version=None,
    exitcode=None,
):
    """:func:`problems` for a run under MPICH; [] for a good run.

    ``transport``: shm (only UCX shared-memory transports) or tcp (only UCX's tcp);
    ``places``: :func:`cpu_places` of the host. One host only: hydra's binding lines name
    none, so they cannot show the node mapping.
    """
    if mapping == "node":
        raise ValueError("hydra's binding lines name no host: mapping node cannot be proven")
    said = mpich_error(stderr)
    because = f"; MPICH: {said}" if said else ""
    if exitcode:
        because += f"; mpirun exited with code {exitcode}"
    found, complete = output_problems(
        without_hydra_bindings(stdout), kind, version, min_size, max_size, because
    )
    if complete is None:
        return found
    if complete and said:
        found.append(f"MPICH reported a failure: {said}")
    bound = hydra_bindings(stdout, places)
    if sorted(bound) != [0, 1]:
        found.append(
            f"hydra reported bindings for processes {sorted(bound)}, expected 0..1 (no "
            f"'process N binding' lines on stdout: HYDRA_TOPO_DEBUG unset, or not hydra?)"
        )
    else:
        unknown = sorted(c for b in bound.values() for s, c in b.places if s < 0)
        problem = (
            f"hydra bound ranks to CPUs {unknown} that the partition's topology does not list"
            if unknown
            else mapping_problem(bound, mapping)
        )
        if problem:
            found.append(problem)
    used = ucx_transports(stderr)
    if not used:
        found.append(
            f"transport: UCX printed no 'ep_cfg[i]: ...' line, expected {transport} "
            f"(UCX_LOG_LEVEL=info or UCX_LOG_FILE=stderr unset, or not MPICH ch4:ucx?)"
        )
    elif (transport == "shm" and not used <= UCX_SHARED_MEMORY) or (
        transport == "tcp" and used != {"tcp"}
    ):
        found.append(
            f"transport: UCX connected the ranks with {', '.join(sorted(used))}, expected "
            + ("shared memory only" if transport == "shm" else "tcp only")
        )
    return found

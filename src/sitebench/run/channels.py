"""The message distribution of one monitored run: every peer pair on its channel.

The multi-core cluster study split MPI traffic between the channels a message takes: inside
a socket, between the sockets of a node, and between nodes. Here each pair (rank, peer) of
Open MPI's monitoring files (:mod:`sitebench.parsers.ompi_monitoring`) gets its channel from
where the two ranks ran (``mpirun --report-bindings``, :func:`sitebench.parsers.osu.bindings`):

* ``self``: the rank sent to itself (CG, MG do); no channel, kept apart from the shares;
* ``socket``: both ranks on one socket of one node;
* ``node``: one node, different sockets;
* ``network``: different nodes (the host names of the bindings report differ).

A rank bound to cores of several sockets (or not bound) has no socket; on a node of one
socket (``sockets_per_node`` 1) that does not matter, elsewhere it is an error saying so.
"""

from dataclasses import dataclass, field

from sitebench.parsers import ompi_monitoring

#: The channels, nearest first; ``self`` is not a channel of the study and has no share.
CHANNELS = ("self", "socket", "node", "network")
SHARED = CHANNELS[1:]
KINDS = ("app", "internal")


class PlacementError(ValueError):
    """Where a rank ran is not known well enough to name its channels."""


@dataclass
class ChannelTraffic:
    app_messages: int = 0
    app_bytes: int = 0
    internal_messages: int = 0  # Open MPI's internal point-to-point and one-sided traffic
    internal_bytes: int = 0
    histogram: list = field(default_factory=lambda: [0] * ompi_monitoring.HISTOGRAM_BUCKETS)

    @property
    def messages(self):
        return self.app_messages + self.internal_messages

    @property
    def bytes(self):
        return self.app_bytes + self.internal_bytes


@dataclass
class Distribution:
    channels: dict  # channel -> ChannelTraffic, every channel of CHANNELS
    ranks: int
    missing: tuple = ()  # ranks that wrote no file: the figures are a lower bound

    def share(self, channel, what="messages"):
        """``channel``'s % of the messages (or bytes) between different ranks; None when
        none were sent."""
        total = sum(getattr(self.channels[c], what) for c in SHARED)
        if not total:
            return None
        return 100.0 * getattr(self.channels[channel], what) / total


def placement(bindings, sockets_per_node=None):
    """rank -> (host, socket or None) from :func:`sitebench.parsers.osu.bindings`."""
    out = {}
    for rank, binding in bindings.items():
        sockets = binding.sockets
        socket = next(iter(sockets)) if len(sockets) == 1 else None
        if socket is None and sockets_per_node == 1:
            socket = 0
        out[rank] = (binding.host, socket)
    return out


def channel_of(rank, peer, places):
    """The channel between two ranks placed as :func:`placement` says."""
    if rank == peer:
        return "self"
    missing = [r for r in (rank, peer) if r not in places]
    if missing:
        raise PlacementError(
            f"ranks {missing} are not in mpirun's bindings report (--report-bindings): "
            f"where they ran is unknown"
        )
    (host, socket), (peer_host, peer_socket) = places[rank], places[peer]
    if host != peer_host:
        return "network"
    if socket is None or peer_socket is None:
        unbound = [r for r in (rank, peer) if places[r][1] is None]
        raise PlacementError(
            f"ranks {unbound} on {host} are bound to no single socket and the node has "
            f"several: bind each rank inside one socket (--bind-to core) for the socket split"
        )
    return "socket" if socket == peer_socket else "node"


def distribution(monitoring, bindings, sockets_per_node=None):
    """The :class:`Distribution` of a run's :class:`~ompi_monitoring.Monitoring`."""
    places = placement(bindings, sockets_per_node)
    channels = {name: ChannelTraffic() for name in CHANNELS}
    for rank, rank_file in monitoring.ranks.items():
        for peer, sent in rank_file.peers.items():
            traffic = channels[channel_of(rank, peer, places)]
            traffic.app_messages += sent.app_messages
            traffic.app_bytes += sent.app_bytes
            traffic.internal_messages += sent.internal_messages + sent.osc_messages
            traffic.internal_bytes += sent.internal_bytes + sent.osc_bytes
            for index, count in enumerate(sent.histogram):
                traffic.histogram[index] += count
    return Distribution(channels, monitoring.expected, tuple(monitoring.missing))


def figures(dist):
    """Figure name -> (value, unit), the performance variables of a monitored case:

    * ``<kind>_messages_<channel>`` (msgs), ``<kind>_bytes_<channel>`` (B), kind ``app``
      or ``internal``, for every channel (0 where none: on one node ``network`` is 0);
    * ``messages_share_<channel>``, ``bytes_share_<channel>`` (%) of socket, node and
      network, where any message went between different ranks;
    * ``count_<channel>_<low>B`` (msgs): the messages of ``[low, 2 low)`` bytes (``0B``:
      empty ones) on that channel, every size bucket with a message.
    """
    out = {}
    for name in CHANNELS:
        traffic = dist.channels[name]
        for kind in KINDS:
            out[f"{kind}_messages_{name}"] = (getattr(traffic, f"{kind}_messages"), "msgs")
            out[f"{kind}_bytes_{name}"] = (getattr(traffic, f"{kind}_bytes"), "B")
    for name in SHARED:
        for what in ("messages", "bytes"):
            share = dist.share(name, what)
            if share is not None:
                out[f"{what}_share_{name}"] = (share, "%")
    for name in CHANNELS:
        for index, count in enumerate(dist.channels[name].histogram):
            if count:
                low = ompi_monitoring.bucket_low(index)
                out[f"count_{name}_{low}B"] = (count, "msgs")
    return out

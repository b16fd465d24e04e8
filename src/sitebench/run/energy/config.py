"""The partition's power source, ``extras['power']``, validated with errors that name the key.

::

    "extras": {"power": {"source": "rapl"}}                      # package + DRAM zones
    "extras": {"power": {"source": "rapl", "zones": ["intel-rapl:0", "intel-rapl:1"]}}
    "extras": {"power": {"source": "ipmi"}}                      # ipmitool dcmi power reading
    "extras": {"power": {"source": "ipmi", "command": ["sudo", "-n", "ipmitool", "dcmi",
                                                       "power", "reading"]}}
    "extras": {"power": {"source": "slurm"}}                     # sacct after the job

Absent or ``None``: no energy figures, and nothing in the checks changes.
"""

import math
from dataclasses import dataclass

SOURCES = ("rapl", "ipmi", "slurm")

#: Where the kernel's powercap class lives; tests point it at a recorded tree.
SYSFS_ROOT = "/sys/class/powercap"
IPMI_COMMAND = ("ipmitool", "dcmi", "power", "reading")
SACCT_COMMAND = ("sacct",)

#: Seconds between two samples of the in-job sampler (RAPL and IPMI). RAPL
#: counters wrap after max_energy_range_uj (262 kJ on the package zones of the
#: procfs recording, ~15 min at 300 W), so sampling every few seconds never
#: misses a wrap; an IPMI reading costs one BMC round trip.
DEFAULT_INTERVAL_S = 2.0

#: Seconds to wait for slurmdbd to hold the finished job's energy.
DEFAULT_WAIT_S = 30.0

_KEYS = {
    "rapl": ("source", "zones", "sysfs_root", "interval_s"),
    "ipmi": ("source", "command", "interval_s"),
    "slurm": ("source", "command", "wait_s"),
}


@dataclass(frozen=True)
class PowerConfig:
    """A validated ``extras['power']``."""

    source: str
    #: RAPL zone directories (``intel-rapl:0``, ``intel-rapl:0:1``); empty: the
    #: package zones and their DRAM subzones.
    zones: tuple = ()
    sysfs_root: str = SYSFS_ROOT
    interval_s: float = DEFAULT_INTERVAL_S
    command: tuple = ()
    wait_s: float = DEFAULT_WAIT_S


def _fail(partition, key, problem, fix):
    where = f"extras['power']['{key}']" if key else "extras['power']"
    raise ValueError(f"partition {partition}: {where} {problem}; {fix}")


def _seconds(partition, settings, key, default):
    value = settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(partition, key, f"is {value!r}", "give a number of seconds, e.g. 2")
    if not math.isfinite(value) or value <= 0:
        _fail(partition, key, f"is {value!r}", "give a positive number of seconds")
    return float(value)


def _command(partition, settings, default):
    value = settings.get("command", default)
    if isinstance(value, str):
        value = value.split()
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(x, str) and x for x in value)
    ):
        _fail(
            partition,
            "command",
            f"is {value!r}",
            f"give the command as a list of strings, e.g. {list(default)}",
        )
    return tuple(value)


def power_config(partition, settings):
    """The power source of ``partition`` (its full name) from ``extras['power']``.

    Returns None when ``settings`` is None (no power source: no energy
    figures); raises ValueError naming the partition, the key and the
    accepted values for anything else that is not a valid setting.
    """
    if settings is None:
        return None
    if not isinstance(settings, dict):
        _fail(
            partition,
            None,
            f"is {settings!r}",
            f"give a dict such as {{'source': 'rapl'}} (sources: {', '.join(SOURCES)}), "
            f"or leave it out for no energy figures",
        )
    source = settings.get("source")
    if source not in SOURCES:
        _fail(
            partition,
            "source",
            "is missing" if source is None else f"is {source!r}",
            f"accepted: {', '.join(repr(s) for s in SOURCES)} "
            f"(or leave extras['power'] out for no energy figures)",
        )
    unknown = sorted(set(settings) - set(_KEYS[source]))
    if unknown:
        _fail(
            partition,
            unknown[0],
            f"is not a setting of source {source!r}",
            f"accepted keys: {', '.join(_KEYS[source])}",
        )
    if source == "rapl":
        zones = settings.get("zones", ())
        if isinstance(zones, str) or not all(
            isinstance(z, str) and z.startswith("intel-rapl:") and "/" not in z for z in zones
        ):
            _fail(
                partition,
                "zones",
                f"is {zones!r}",
                "give a list of powercap zone directories, e.g. ['intel-rapl:0', "
                "'intel-rapl:0:1'], or leave it out for every package zone and its DRAM "
                "subzone",
            )
        root = settings.get("sysfs_root", SYSFS_ROOT)
        if not isinstance(root, str) or not root.startswith("/"):
            _fail(partition, "sysfs_root", f"is {root!r}", "give an absolute path")
        return PowerConfig(
            source,
            zones=tuple(zones),
            sysfs_root=root,
            interval_s=_seconds(partition, settings, "interval_s", DEFAULT_INTERVAL_S),
        )
    if source == "ipmi":
        return PowerConfig(
            source,
            command=_command(partition, settings, IPMI_COMMAND),
            interval_s=_seconds(partition, settings, "interval_s", DEFAULT_INTERVAL_S),
        )
    return PowerConfig(
        source,
        command=_command(partition, settings, SACCT_COMMAND),
        wait_s=_seconds(partition, settings, "wait_s", DEFAULT_WAIT_S),
    )

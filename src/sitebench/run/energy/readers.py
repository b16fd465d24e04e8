"""Plain functions from recorded power outputs to joules and watts.

Three sources, three formats:

* RAPL: the sampler's blocks of powercap zone lines (``zone<TAB>name<TAB>
  energy_uj<TAB>max_energy_range_uj``), one block per sample. Energy is the
  sum of the per-interval counter deltas; a counter that went down wrapped at
  ``max_energy_range_uj``.
* IPMI: the text of ``ipmitool dcmi power reading`` (instantaneous watts), one
  per sample; the mean power is the time-weighted mean of the samples.
* Slurm: ``sacct -X -n -P -o JobID,ConsumedEnergyRaw,ElapsedRaw`` of the job.

Every function raises :class:`~sitebench.run.energy.EnergyError` naming the
cause and what to do, never a partial or a zero result.
"""

import math
import re
from dataclasses import dataclass, field

from . import EnergyError

SAMPLE_HEADER = "### sample "
_HEADER = re.compile(r"^### sample (\S+)(?: rc=(-?\d+))?\s*$")

# Since November 2020 (CVE-2020-8694, "Platypus") the kernel makes energy_uj
# readable by root only (0400), in 5.10 and in the stable and distribution
# backports.
_PERMISSION_FIX = (
    "since the fix of CVE-2020-8694 (November 2020) energy_uj is readable by root only: run "
    "the benchmarks as root, or let their user read it on every node (e.g. a systemd-tmpfiles "
    "rule 'z /sys/class/powercap/intel-rapl:*/energy_uj 0440 root <group>' or a udev rule), "
    "or leave extras['power'] out"
)


@dataclass
class Sample:
    """One block of the sampler's file: when, the lines, and the command's status."""

    time_s: float
    lines: list = field(default_factory=list)
    rc: int | None = None


@dataclass
class Energy:
    """Joules over a run and the mean power; ``parts`` says what was summed."""

    energy_j: float
    duration_s: float
    parts: dict

    @property
    def power_w(self):
        return self.energy_j / self.duration_s


def parse_samples(text, what):
    """The sampler's blocks, in order; ``what`` names the file in errors."""
    samples = []
    for line in text.splitlines():
        if line.startswith(SAMPLE_HEADER):
            match = _HEADER.match(line)
            if not match:
                raise EnergyError(f"{what}: garbled sample header {line!r}")
            try:
                when = float(match.group(1))
            except ValueError:
                raise EnergyError(f"{what}: sample time is not a number: {line!r}") from None
            rc = int(match.group(2)) if match.group(2) is not None else None
            samples.append(Sample(when, [], rc))
        elif samples:
            samples[-1].lines.append(line)
        elif line.strip():
            raise EnergyError(f"{what}: text before the first sample: {line!r}")
    if len(samples) < 2:
        raise EnergyError(
            f"{what}: {len(samples)} sample(s); a run needs one before and one after "
            f"(did the sampler start and stop? see the job's output)"
        )
    for before, after in zip(samples, samples[1:]):
        if after.time_s < before.time_s:
            raise EnergyError(
                f"{what}: sample times go backwards ({before.time_s} then " f"{after.time_s})"
            )
    return samples


# -- RAPL -------------------------------------------------------------------------------------


@dataclass
class Zone:
    zone: str
    name: str
    energy_uj: int
    max_energy_range_uj: int


def _uj(text, zone, key, root):
    if text.startswith("unreadable:"):
        cause = text[len("unreadable:") :].strip()
        if "permission denied" in cause.lower():
            raise EnergyError(f"cannot read {root}/{zone}/{key}: {cause}; {_PERMISSION_FIX}")
        raise EnergyError(f"cannot read {root}/{zone}/{key}: {cause}")
    if not text.isdigit():
        raise EnergyError(f"{root}/{zone}/{key} is not a counter value: {text!r}")
    return int(text)


def rapl_zones(sample, root):
    """The zones of one RAPL sample, by directory name."""
    zones = {}
    for line in sample.lines:
        if not line.strip():
            continue
        cells = line.split("\t")
        if cells[0] == "no-zones":
            raise EnergyError(
                f"no RAPL zone under {root} on the node: the powercap RAPL driver is not "
                f"loaded (modprobe intel_rapl_msr) or the machine has none (a VM, an ARM "
                f"node); use another source or leave extras['power'] out"
            )
        if len(cells) != 4:
            raise EnergyError(f"garbled RAPL sample line {line!r} (zone, name, energy, range)")
        zone, name, energy, limit = cells
        zones[zone] = Zone(
            zone,
            name,
            _uj(energy, zone, "energy_uj", root),
            _uj(limit, zone, "max_energy_range_uj", root),
        )
    if not zones:
        raise EnergyError(f"a RAPL sample at {sample.time_s} has no zone line")
    return zones


def default_zones(zones):
    """The package zones and their DRAM subzones.

    The core, uncore and graphics subzones are parts of their package and
    would count twice; DRAM is not part of the package. ``psys`` (client
    platforms) covers the package too, and ``intel-rapl-mmio`` zones repeat
    the package counters, so neither is summed.
    """
    chosen = []
    for zone in sorted(zones.values(), key=lambda z: z.zone):
        depth = zone.zone.count(":")
        if depth == 1 and zone.name.startswith("package"):
            chosen.append(zone.zone)
        elif depth == 2 and zone.name == "dram":
            chosen.append(zone.zone)
    return chosen


def rapl_energy(samples, root, zones=()):
    """Joules per zone between the first and the last sample, wraparounds added.

    ``zones`` are zone directories (``intel-rapl:0``); empty selects
    :func:`default_zones`. The counters wrap at ``max_energy_range_uj``; a
    sample every few seconds sees every wrap (one interval would need minutes
    at full power to wrap twice).
    """
    first = rapl_zones(samples[0], root)
    chosen = list(zones) or default_zones(first)
    if not chosen:
        found = ", ".join(f"{z.zone} ({z.name})" for z in first.values())
        raise EnergyError(
            f"no RAPL package zone under {root} (found: {found}); name the zones to sum in "
            f"extras['power']['zones']"
        )
    missing = [z for z in chosen if z not in first]
    if missing:
        raise EnergyError(
            f"RAPL zone(s) {', '.join(missing)} not under {root} (found: "
            f"{', '.join(sorted(first))}); fix extras['power']['zones']"
        )
    totals = dict.fromkeys(chosen, 0)
    previous = first
    for sample in samples[1:]:
        current = rapl_zones(sample, root)
        for zone in chosen:
            if zone not in current:
                raise EnergyError(
                    f"RAPL zone {zone} vanished from the sample at " f"{sample.time_s}"
                )
            delta = current[zone].energy_uj - previous[zone].energy_uj
            if delta < 0:
                delta += current[zone].max_energy_range_uj
            if delta < 0:
                raise EnergyError(
                    f"RAPL zone {zone} went from {previous[zone].energy_uj} to "
                    f"{current[zone].energy_uj} uJ, more than one wrap of "
                    f"{current[zone].max_energy_range_uj} uJ: the counter was reset"
                )
            totals[zone] += delta
        previous = current
    duration = samples[-1].time_s - samples[0].time_s
    if duration <= 0:
        raise EnergyError("the RAPL samples span no time")
    if not any(totals.values()):
        raise EnergyError(
            f"the RAPL counters of {', '.join(chosen)} did not advance in {duration:.1f} s: "
            f"they are not live counters (a VM's or a copied tree)"
        )
    names = {z: first[z].name for z in chosen}
    parts = {f"{z} ({names[z]})": uj / 1e6 for z, uj in totals.items()}
    return Energy(sum(totals.values()) / 1e6, duration, parts)


# -- IPMI -------------------------------------------------------------------------------------

_READING = re.compile(r"^\s*Instantaneous power reading:\s*(\S+)\s+Watts\s*$", re.MULTILINE)
_DCMI_FAILED = re.compile(r"DCMI request failed because: (.*)")


def ipmi_watts(text, rc=0):
    """Watts of one ``ipmitool dcmi power reading`` output, or why there are none."""
    failed = _DCMI_FAILED.search(text)
    if failed:
        raise EnergyError(
            f"ipmitool: DCMI request failed because: {failed.group(1).strip()}: the BMC does "
            f"not answer DCMI power readings (not supported, or busy); use another source or "
            f"leave extras['power'] out"
        )
    if "Could not open device" in text:
        raise EnergyError(
            f"ipmitool: {text.strip().splitlines()[0]}: no in-band IPMI device on the node "
            f"(load ipmi_si and ipmi_devintf) or no permission on /dev/ipmi0 (run as root)"
        )
    match = _READING.search(text)
    if not match:
        first = text.strip().splitlines()[0] if text.strip() else "no output"
        status = f" (exit status {rc})" if rc else ""
        raise EnergyError(
            f"ipmitool printed no 'Instantaneous power reading' line{status}: {first!r}"
        )
    try:
        watts = float(match.group(1))
    except ValueError:
        raise EnergyError(f"IPMI power reading is not a number: {match.group(1)!r}") from None
    if rc:
        raise EnergyError(f"ipmitool exited with status {rc} after printing a reading")
    # Some BMCs advertise DCMI but leave the reading at 0 W (openbmc/phosphor-host-ipmid
    # issue 167) or at the 16-bit maximum (xapi-project/xen-api PR 5561).
    if not math.isfinite(watts) or watts <= 0 or watts >= 65535:
        raise EnergyError(
            f"the BMC answered {match.group(1)} W: it advertises DCMI power readings but does "
            f"not fill them in; use another source or leave extras['power'] out"
        )
    return watts


def ipmi_energy(samples):
    """Time-weighted mean of the samples' watts, and the energy over their span."""
    readings = []
    for sample in samples:
        try:
            readings.append((sample.time_s, ipmi_watts("\n".join(sample.lines), sample.rc or 0)))
        except EnergyError as err:
            raise EnergyError(f"IPMI sample at {sample.time_s}: {err}") from None
    duration = readings[-1][0] - readings[0][0]
    if duration <= 0:
        raise EnergyError("the IPMI samples span no time")
    # Trapezoids: the reading is instantaneous, samples need not be evenly spaced.
    joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(readings, readings[1:]))
    return Energy(joules, duration, {"samples": len(readings)})


# -- Slurm ------------------------------------------------------------------------------------


def sacct_energy(text, jobid):
    """Joules and seconds of job ``jobid`` from ``sacct -X -n -P -o
    JobID,ConsumedEnergyRaw,ElapsedRaw``."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows:
        raise EnergyError(
            f"sacct has no record of job {jobid} (not yet in the accounting database, or "
            f"accounting is not stored: AccountingStorageType)"
        )
    if not all(len(r) > 1 for r in rows):
        raise EnergyError(
            f"sacct output for job {jobid} is not parsable (-P) text: {text.strip()[:200]!r}"
        )
    mine = [r for r in rows if r[0] == str(jobid)]
    if not mine:
        raise EnergyError(f"sacct answered no line for job {jobid}: {text.strip()[:200]!r}")
    row = mine[0]
    if len(row) < 3:
        raise EnergyError(
            f"sacct line {'|'.join(row)!r} lacks ConsumedEnergyRaw and ElapsedRaw (ask "
            f"-o JobID,ConsumedEnergyRaw,ElapsedRaw)"
        )
    energy, elapsed = row[1].strip(), row[2].strip()
    if not energy:
        raise EnergyError(
            f"sacct reports no energy for job {jobid}: energy accounting is not configured "
            f"(AcctGatherEnergyType in slurm.conf)"
        )
    if not energy.isdigit():
        raise EnergyError(
            f"sacct energy {energy!r} of job {jobid} is not raw joules (ask for "
            f"ConsumedEnergyRaw, not ConsumedEnergy)"
        )
    if int(energy) == 0:
        raise EnergyError(
            f"sacct reports 0 J for job {jobid}: the nodes gather no energy "
            f"(AcctGatherEnergyType, AcctGatherNodeFreq) or the job was too short"
        )
    if not elapsed.isdigit() or int(elapsed) == 0:
        raise EnergyError(f"sacct ElapsedRaw of job {jobid} is {elapsed!r}, not seconds > 0")
    return Energy(float(energy), float(elapsed), {"job": str(jobid)})

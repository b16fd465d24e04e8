"""The host fingerprint: which machine a run, a history or a set of references belongs to.

Rule (stated): a host is its CPU model, its socket, core and logical-CPU counts and its
memory, rounded up to whole GiB (MemTotal, which the kernel reports a little below the
installed memory and which moves by some MiB between kernels and boots; ``ceil`` keeps it on
the same GiB as long as that move does not cross a whole GiB). The hostname, kernel and OS
are left out: a reinstalled or renamed machine is the same machine, two cloud VMs of the same
shape are not told apart by a name. ``id`` is the first 12 hex digits of the sha256 of the
canonical JSON of the fields; two fingerprints are the same host when their ids are equal.

Where a fingerprint comes from:

* a run made since 2026-11-24: ``host_fingerprint`` in its provenance (this module, at run
  time);
* an older run: derived from its provenance's ``topology.json`` (ReFrame's ``model``,
  ``num_sockets``, ``num_cpus`` and ``num_cpus_per_core``). Those runs did not record the
  memory, so ``memory_gib`` is null and ``derived`` is true: such a fingerprint is a host
  of its own ("memory unknown"), never equal to a fingerprint taken at run time;
* a run with neither: the unknown host (``id`` ``unknown``), never equal to any other.

``SITEBENCH_TEST_HOST_FINGERPRINT`` (for tests only: a JSON object of fields) replaces
fields of the detected fingerprint, so a test can play a machine other than this one.
"""

import hashlib
import json
import math
import os
from pathlib import Path

from sitebench.common.errors import SitebenchError

FIELDS = ("cpu_model", "sockets", "cores", "cpus", "memory_gib")
TEST_HOOK = "SITEBENCH_TEST_HOST_FINGERPRINT"
UNKNOWN = "unknown"
#: The references file's entry naming the host its references were made on.
REFERENCES_KEY = "$host"
MAKE_REFERENCES = "./sitebench references {site} --write after 3 or more runs on this machine"


def _id(fields):
    text = json.dumps({k: fields.get(k) for k in FIELDS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def make(fields, derived=False):
    """A fingerprint (its fields, ``id`` and, when derived, ``derived``) from ``fields``."""
    fp = {k: fields.get(k) for k in FIELDS}
    fp["id"] = _id(fp)
    if derived:
        fp["derived"] = True
    return fp


def _cpuinfo(path):
    model, cores, sockets, cpus = None, set(), set(), 0
    physical = core = None
    for line in Path(path).read_text(errors="replace").splitlines() + [""]:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            cpus += 1
        elif key in ("model name", "Model") and model is None:
            model = value
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif not key:
            if core is not None:
                cores.add((physical, core))
            if physical is not None:
                sockets.add(physical)
            physical = core = None
    return model, len(sockets) or None, len(cores) or None, cpus or None


def memory_gib(meminfo="/proc/meminfo"):
    """MemTotal rounded up to whole GiB (the stable part of the rule), or None."""
    for line in Path(meminfo).read_text().splitlines():
        if line.startswith("MemTotal:"):
            return math.ceil(int(line.split()[1]) * 1024 / 2**30)
    return None


def detect(cpuinfo="/proc/cpuinfo", meminfo="/proc/meminfo", environ=None):
    """This machine's fingerprint (with the test hook applied)."""
    environ = os.environ if environ is None else environ
    try:
        model, sockets, cores, cpus = _cpuinfo(cpuinfo)
    except OSError:
        model = sockets = cores = cpus = None
    cpus = cpus or os.cpu_count()
    try:
        memory = memory_gib(meminfo)
    except OSError:
        memory = None
    fields = {
        "cpu_model": model,
        # Without "physical id"/"core id" (VMs, some ARM kernels): one socket, one core per CPU.
        "sockets": sockets or 1,
        "cores": cores or cpus,
        "cpus": cpus,
        "memory_gib": memory,
    }
    fields.update(test_override(environ))
    return make(fields)


def test_override(environ):
    text = environ.get(TEST_HOOK)
    if not text:
        return {}
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as err:
        raise SitebenchError(
            f"{TEST_HOOK} is not JSON ({err})",
            f"give a JSON object of fingerprint fields ({', '.join(FIELDS)}), or unset it",
        ) from None
    if not isinstance(fields, dict) or set(fields) - set(FIELDS):
        raise SitebenchError(
            f"{TEST_HOOK}={text!r} is not an object of fingerprint fields",
            f"use only the fields {', '.join(FIELDS)}, e.g. '{{\"cpu_model\": \"Other CPU\"}}'",
        )
    return fields


def from_topology(topology):
    """The derived fingerprint of a run that recorded only ReFrame's topology (no memory)."""
    if not isinstance(topology, dict) or not topology.get("num_cpus"):
        return None
    cpus = topology["num_cpus"]
    per_core = topology.get("num_cpus_per_core") or 1
    return make(
        {
            "cpu_model": topology.get("model"),
            "sockets": topology.get("num_sockets") or 1,
            "cores": cpus // per_core,
            "cpus": cpus,
            "memory_gib": None,
        },
        derived=True,
    )


def of_run(provenance, run_path=None):
    """The fingerprint of a stored run: recorded, else derived, else the unknown host."""
    recorded = (provenance or {}).get("host_fingerprint")
    if isinstance(recorded, dict) and recorded.get("id"):
        return recorded
    topology = None
    if run_path is not None:
        try:
            topology = json.loads((Path(run_path) / "provenance" / "topology.json").read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            topology = None
    return from_topology(topology) or {**{k: None for k in FIELDS}, "id": UNKNOWN}


def describe(fp):
    """One line a person reads: 'AMD EPYC, 1 socket, 2 cores, 2 CPUs, 24 GiB (3f2a...)'."""
    if not fp or fp.get("id") == UNKNOWN:
        return "an unknown host"
    memory = "memory unknown" if fp.get("memory_gib") is None else f"{fp['memory_gib']} GiB"
    return (
        f"{fp.get('cpu_model') or 'unknown CPU'}, {fp.get('sockets')} socket(s), "
        f"{fp.get('cores')} core(s), {fp.get('cpus')} CPU(s), {memory} (host {fp['id']})"
    )


def references_host(data, where="references.yaml"):
    """The fingerprint recorded in a references mapping (its ``$host`` entry), or None.

    Raises SitebenchError on a malformed entry (the validator names the same problem)."""
    entry = (data or {}).get(REFERENCES_KEY)
    if entry is None:
        return None
    problem = host_entry_problem(entry)
    if problem:
        raise SitebenchError(f"{where}: {REFERENCES_KEY}: {problem}", HOST_ENTRY_FIX)
    return entry


HOST_ENTRY_FIX = (
    "let `./sitebench references SITE --write` write it, or give the mapping "
    f"{{{', '.join(FIELDS)}, id}} with id as this module computes it (sites/host.py)"
)


def host_entry_problem(entry):
    """What is wrong with a ``$host`` entry, or None."""
    if not isinstance(entry, dict):
        return f"expected a mapping of {', '.join(FIELDS)} and id, got {entry!r}"
    missing = [k for k in (*FIELDS, "id") if k not in entry]
    if missing:
        return f"missing {', '.join(missing)}"
    extra = sorted(set(entry) - {*FIELDS, "id", "derived"})
    if extra:
        return f"unknown field(s) {', '.join(extra)}"
    if entry["id"] != _id(entry):
        return (
            f"id {entry['id']!r} does not match its fields (they give {_id(entry)!r}); "
            "a hand-edited fingerprint would apply references to the wrong machine"
        )
    return None


def references_verdict(site, made_on, here):
    """(apply, why): whether references made on ``made_on`` (a fingerprint or None) apply on
    ``here``; ``why`` is the one line a run prints when they do not."""
    if made_on and made_on.get("id") == here.get("id"):
        return True, ""
    origin = (
        f"were made on {describe(made_on)}"
        if made_on
        else f"record no host ({REFERENCES_KEY}) they were made on"
    )
    return False, (
        f"no static reference applied: the references of {site!r} {origin}, this is "
        f"{describe(here)}; figures are logged, never failed. Make this machine's: "
        + MAKE_REFERENCES.format(site=site)
    )

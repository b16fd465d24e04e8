"""``./sitebench perf stream``: our STREAM against its peers, measured side by side.

In one throw-away Spack environment each (as ``perf hpl`` does), it builds our ``stream``
recipe and Spack's builtin ``stream`` with the same array size (the local site's, >= 4 x
the last-level cache) and OpenMP, then runs, round after round so a slow spell hits all:

* ours and the builtin on every core (``OMP_NUM_THREADS`` = cores, ``OMP_PROC_BIND=spread``);
* ours on one thread and Debian's ``hpcc`` on one process, whose SingleSTREAM uses arrays
  of N^2/3 elements: N is chosen so they match ours (hpcc's STREAM runs one process, one
  thread, so that is the like-for-like pairing).

It prints the Triad ratios with their range over the rounds (goal >= 0.95 each) and keeps
the output in ``perf/results/stream-<UTC time>.json``.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

from sitebench import local_site
from sitebench import spack as spack_mod
from sitebench.errors import SitebenchError
from sitebench.parsers import stream as stream_parser
from sitebench.perf import _environment, _prefix, hpcc, ratio, spread

GOAL = 0.95


def array_elements():
    """The local site's STREAM array size (its packages.yaml requirement)."""
    text = (local_site.spack_dir() / "packages.yaml").read_text()
    found = re.search(r"stream_array_size=(\d+)", text)
    if not found:
        raise SitebenchError(
            "the local site's packages.yaml has no STREAM array size",
            "./sitebench detect --redetect",
        )
    return int(found.group(1))


def build(spack, elements):
    local_site.detect(spack)
    print("==> building our STREAM and Spack's builtin one", file=sys.stderr)
    spec = f"stream+openmp stream_array_size={elements}"
    ours = _environment(spack, "stream", [spec], with_our_repo=True)
    builtin = _environment(spack, "stream-builtin", [spec], with_our_repo=False)
    return {
        "ours": _prefix(spack, ours, "stream") / "bin" / "stream_c.exe",
        "builtin": _prefix(spack, builtin, "stream") / "bin" / "stream_c.exe",
    }


def run_stream(exe, threads):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "spread"}
    proc = subprocess.run([str(exe)], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not stream_parser.validates(proc.stdout):
        raise SitebenchError(
            f"{exe} failed or did not validate (exit {proc.returncode})",
            "run it by hand to see why",
        )
    return stream_parser.parse(proc.stdout).best_rate_mbs["Triad"]


def run_hpcc_single_stream(elements):
    """hpcc's SingleSTREAM Triad (MB/s) and array size, with arrays of about ``elements``."""
    values = hpcc(math.ceil(math.sqrt(3 * elements)), 192, 1)
    return float(values["SingleSTREAM_Triad"]) * 1000, int(values["STREAM_VectorSize"])


def stream(rounds=3):
    spack = spack_mod.setup()
    elements = array_elements()
    binaries = build(spack, elements)
    topology = json.loads(local_site.topology_file().read_text())
    cores = topology["num_cpus"] // topology.get("num_cpus_per_core", 1)
    have_hpcc = shutil.which("hpcc") is not None
    triad = {"ours": [], "builtin": [], "ours 1 thread": [], "hpcc SingleSTREAM": []}
    hpcc_elements = None
    for round_ in range(1, rounds + 1):
        triad["ours"].append(run_stream(binaries["ours"], cores))
        triad["builtin"].append(run_stream(binaries["builtin"], cores))
        triad["ours 1 thread"].append(run_stream(binaries["ours"], 1))
        if have_hpcc:
            rate, hpcc_elements = run_hpcc_single_stream(elements)
            triad["hpcc SingleSTREAM"].append(rate)
        shown = ", ".join(f"{k} {v[-1]:.0f}" for k, v in triad.items() if v)
        print(f"round {round_}: Triad MB/s: {shown}", file=sys.stderr)
    ratios = {"ours / builtin stream (all cores)": ratio(triad["ours"], triad["builtin"])}
    if have_hpcc:
        ratios["ours 1 thread / hpcc SingleSTREAM"] = ratio(
            triad["ours 1 thread"], triad["hpcc SingleSTREAM"]
        )
    return {
        "benchmark": "stream",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "array_elements": elements,
        "hpcc_array_elements": hpcc_elements,
        "cores": cores,
        "rounds": rounds,
        "cpu_arch": topology.get("arch"),
        "hpcc": "/usr/bin/hpcc" if have_hpcc else "missing: apt-get install hpcc to compare",
        "triad_mbs": {k: spread(v) for k, v in triad.items() if v},
        "ratios": ratios,
        "goal": GOAL,
    }


def render(result):
    lines = [
        f"STREAM Triad, {result['array_elements']:,} elements per array "
        f"(hpcc: {result['hpcc_array_elements'] or '-'}), {result['cores']} cores "
        f"({result['cpu_arch']}), {result['rounds']} rounds, median [min-max]"
    ]
    for name, s in result["triad_mbs"].items():
        lines.append(f"  {name:20s} {s['median']:9.0f} MB/s  [{s['min']:.0f}-{s['max']:.0f}]")
    lines.append(f"ratios (median [range over rounds]; goal >= {result['goal']})")
    for name, r in result["ratios"].items():
        lines.append(f"  {name:40s} {r['median']:6.3f}  [{r['min']:.3f}-{r['max']:.3f}]")
    return "\n".join(lines)

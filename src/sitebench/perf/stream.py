"""``./sitebench perf stream``: our STREAM against its peers, measured side by side.

In one throw-away Spack environment each (as ``perf hpl`` does), it builds our ``stream``
recipe and Spack's builtin ``stream`` with the same array size (the local site's, >= 4 x
the last-level cache) and OpenMP. It runs each binary once to warm up, then round after
round (each pair back to back, its order swapped every round, so a slow spell hits both):

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

from sitebench.discovery import local_site
from sitebench.spack import pinned as spack_mod
from sitebench.common.errors import SitebenchError
from sitebench.parsers import stream as stream_parser
from sitebench.perf.measure import (
    _environment,
    _prefix,
    hpcc,
    in_turn,
    now,
    ratio,
    render_figures,
    render_ratios,
    spread,
)


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
    hpcc_elements = []

    def single_stream():
        rate, size = run_hpcc_single_stream(elements)
        hpcc_elements.append(size)
        return rate

    # Pairs measured back to back, each pair's order swapped every round.
    pairs = [
        {
            "ours": lambda: run_stream(binaries["ours"], cores),
            "builtin": lambda: run_stream(binaries["builtin"], cores),
        }
    ]
    if have_hpcc:
        pairs.append(
            {
                "ours 1 thread": lambda: run_stream(binaries["ours"], 1),
                "hpcc SingleSTREAM": single_stream,
            }
        )
    triad = {name: [] for pair in pairs for name in pair}
    for exe in binaries.values():
        run_stream(exe, cores)  # warm-up, not kept: page cache, first-touch of a new binary
    for round_ in range(1, rounds + 1):
        for pair in pairs:
            for name in in_turn(round_, pair):
                triad[name].append(pair[name]())
        shown = ", ".join(f"{k} {v[-1]:.0f}" for k, v in triad.items() if v)
        print(f"round {round_}: Triad MB/s: {shown}", file=sys.stderr)
    ratios = {"ours / builtin stream (all cores)": ratio(triad["ours"], triad["builtin"])}
    if have_hpcc:
        ratios["ours 1 thread / hpcc SingleSTREAM"] = ratio(
            triad["ours 1 thread"], triad["hpcc SingleSTREAM"]
        )
    return {
        "benchmark": "stream",
        "when": now(),
        "array_elements": elements,
        "hpcc_array_elements": hpcc_elements[0] if hpcc_elements else None,
        "cores": cores,
        "rounds": rounds,
        "cpu_arch": topology.get("arch"),
        "hpcc": "/usr/bin/hpcc" if have_hpcc else "missing: apt-get install hpcc to compare",
        "triad_mbs": {k: spread(v) for k, v in triad.items() if v},
        "ratios": ratios,
    }


def render(result):
    lines = [
        f"STREAM Triad, {result['array_elements']:,} elements per array "
        f"(hpcc: {result['hpcc_array_elements'] or '-'}), {result['cores']} cores "
        f"({result['cpu_arch']}), {result['rounds']} rounds, median [min-max]"
    ]
    lines += render_figures(result["triad_mbs"], "MB/s", digits=0)
    lines += render_ratios(result["ratios"])
    return "\n".join(lines)

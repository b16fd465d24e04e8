"""Tune a benchmark's input on a site: `./sitebench tune hpl --site S [--budget 600] [--n N]`.

Searches HPL.dat (NB, P x Q, PFACT, RFACT, NBMIN, NDIV, BCAST, DEPTH, SWAP and its threshold,
L1/U forms, equilibration, the process mapping) with the site's Spack-built xhpl, run
directly with mpirun one rank per core: HPL's recommended input, one factor at a time, a
local search around the best, then the best confirmed against the baseline
(src/sitebench/run/hpl_tune.py). Every trial is kept in .sitebench/tune/<site>/hpl-<UTC
time>.json; the winner is written to site-configs/<site>/hpl.yaml, which the HPL check
reads from then on (--no-write leaves it alone). Where Debian's hpcc is installed, the DGEMM
rate of the same cores is measured first (inside the budget) and the time the best input
loses against it is split into HPL's phases (its detailed timing, on in Spack's HPL build).
"""

import json
import os
import shutil
import statistics
import sys
import time

from sitebench.cli.common import add_site_argument
from sitebench.common.paths import shown
from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.run import hpl_tune
from sitebench.run.hpl_input import problem_size
from sitebench.sites import hpl_settings
from sitebench.sites.site import Site

description = "tune a benchmark's input on a site (hpl: HPL.dat) within a time budget"

#: The check's quick-scale cap on N (reframe-checks/hpl.py, quick_max_n).
QUICK_MAX_N = 10000

section = "running"

example = """
  ./sitebench tune hpl --site local --budget 600   # best HPL.dat: site-configs/local/hpl.yaml
"""


def setup_parser(p):
    p.add_argument("benchmark", choices=("hpl",), help="hpl: HPL.dat's input")
    add_site_argument(p)
    p.add_argument(
        "--budget",
        type=float,
        default=600,
        help="seconds the whole tuning may take (default 600), the DGEMM measurement included",
    )
    p.add_argument(
        "--n",
        type=int,
        default=0,
        help="matrix order of the trials (default: the HPL check's quick N, from memory)",
    )
    p.add_argument(
        "--ranks", type=int, default=0, help="MPI ranks (default: the site's cores, as the check)"
    )
    p.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="runs each of the best and the baseline are repeated at the end (default 2)",
    )
    p.add_argument(
        "--dgemm",
        default="auto",
        help="the DGEMM rate to split the remaining loss against: auto (Debian's hpcc, "
        "StarDGEMM x ranks, where installed), none, or a rate in Gflop/s",
    )
    p.add_argument(
        "--no-write",
        dest="write",
        action="store_false",
        help="keep the trials, leave site-configs/<site>/hpl.yaml alone",
    )


def site_ranks(site):
    """Cores of the site as its HPL check counts them (ReFrame's topology)."""
    topology = site.config_dir / "topology.json"
    if topology.is_file():
        data = json.loads(topology.read_text())
        if data.get("num_cpus"):
            return data["num_cpus"] // data.get("num_cpus_per_core", 1)
    return os.cpu_count() or 1


def default_n():
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return problem_size(memory, 0.8, hpl_settings.DEFAULTS["nb"], QUICK_MAX_N)


def dgemm_rate(choice, n, nb, ranks):
    """(Gflop/s or None, how it was found)."""
    if choice == "none":
        return None, "not measured (--dgemm none)"
    if choice != "auto":
        try:
            rate = float(choice)
        except ValueError:
            raise SitebenchError(
                f"--dgemm {choice!r} is not auto, none or a rate", "e.g. --dgemm 110.5"
            ) from None
        if rate <= 0:
            raise SitebenchError(f"--dgemm {choice}: a rate must be positive", "e.g. --dgemm 110")
        return rate, "given (--dgemm)"
    if not shutil.which("hpcc"):
        return None, "not measured: install Debian's hpcc (apt-get install hpcc) or give --dgemm"
    from sitebench.perf import measure

    _hpl, rate = measure.run_hpcc(n, nb, ranks)
    return rate, f"hpcc StarDGEMM x {ranks} ranks at N={n}"


def representative(result):
    """The trial of the chosen input nearest its median (its phases explain the loss)."""
    chosen = [
        t for t in result["trials"] if t["settings"] == result["best"] and t["gflops"] is not None
    ]
    median = statistics.median(t["gflops"] for t in chosen)
    return min(chosen, key=lambda t: abs(t["gflops"] - median))


def render_trials(trials):
    lines = [f"{'#':>3} {'phase':16s} {'Gflop/s':>8} {'s':>6}  input"]
    for t in trials:
        value = f"{t['gflops']:8.2f}" if t["gflops"] is not None else f"{'failed':>8}"
        lines.append(
            f"{t['number']:3d} {t['phase']:16s} {value} {t['seconds']:6.1f}  "
            f"{hpl_tune.describe(t['settings'])}" + (f"  ({t['error']})" if t["error"] else "")
        )
    return lines


def render_loss(loss):
    lines = [
        f"against DGEMM: {loss['ratio']:.3f} of its rate; {loss['time_s']:.2f} s where the "
        f"DGEMM rate needs {loss['dgemm_time_s']:.2f} s, {loss['loss_s']:.2f} s lost:"
    ]
    for name, seconds in loss["parts"].items():
        mark = "  <- largest" if name == loss["largest"] else ""
        lines.append(f"  {name:36s} {seconds:7.2f} s{mark}")
    return lines


def command(args):
    site = Site.resolve(args.site)
    if site.emulation:
        raise SitebenchError(
            f"site {site} runs under QEMU emulation: its timings are the emulator's",
            "tune on the real machine",
        )
    if args.budget <= 0:
        raise SitebenchError(f"--budget {args.budget}: nothing could run", "e.g. --budget 600")
    if args.confirm < 0:
        raise SitebenchError(f"--confirm {args.confirm} is negative", "e.g. --confirm 2")
    ranks = args.ranks or site_ranks(site)
    n = args.n or default_n()
    if n < max(hpl_tune.NB_VALUES[0], 2 * ranks):
        raise SitebenchError(f"--n {n} is too small to tune", "e.g. --n 2000")

    from sitebench.sites import toolchains
    from sitebench.spack import pinned

    # The trials launch with Open MPI's mpirun options (--bind-to core): the site's first
    # Open MPI toolchain is tuned, and the input it finds serves the site's HPL check.
    openmpi = [t for t in toolchains.load(site) if t.mpi_name == "openmpi"]
    if not openmpi:
        raise SitebenchError(
            f"site {site} has no Open MPI toolchain: the tuner launches with Open MPI's mpirun",
            "declare one in site.yaml's toolchains (mpi: openmpi)",
        )
    exe = hpl_tune.installed_xhpl(pinned.setup(), site.environment_dir, site.name, openmpi[0])
    packages = toolchains.spack_scope_packages(paths.site_config_dir(site.environment) / "spack")
    bindir = toolchains.mpi_bin(packages, "openmpi")
    mpirun = os.path.join(bindir, "mpirun") if bindir else "mpirun"
    print(
        f"==> tuning HPL on {site} ({exe}): N={n}, {ranks} ranks, budget {args.budget:.0f} s",
        file=sys.stderr,
    )
    scratch = paths.state_dir() / "tune" / site.name / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    # First, so that the search gets what is left of the budget.
    dgemm, dgemm_how = dgemm_rate(args.dgemm, n, hpl_settings.DEFAULTS["nb"], ranks)
    left = args.budget - (time.monotonic() - began)
    if left <= 0:
        raise SitebenchError(
            f"measuring the DGEMM rate took the whole --budget {args.budget:.0f}",
            "give a larger --budget, or --dgemm none",
        )
    result = hpl_tune.search(
        hpl_tune.xhpl_trial(exe, n, ranks, scratch, mpirun),
        hpl_tune.space(ranks, n),
        hpl_tune.baseline(ranks),
        left,
        confirm=args.confirm,
        log=lambda line: print(line, file=sys.stderr),
    )
    best = result["best"]
    trial = representative(result)
    loss = hpl_tune.loss_against_dgemm(n, trial["time_s"], trial["phases"], dgemm)
    kept = {
        "benchmark": "hpl",
        "site": site.name,
        "when": when,
        "xhpl": str(exe),
        "n": n,
        "ranks": ranks,
        "budget_s": args.budget,
        "load_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "method": "baseline, one factor at a time, local search, confirmation "
        "(src/sitebench/run/hpl_tune.py)",
        **result,
        "dgemm_gflops": dgemm,
        "dgemm": dgemm_how,
        "loss": loss,
    }
    folder = paths.state_dir() / "tune" / site.name
    trials_file = folder / f"hpl-{when.replace('-', '').replace(':', '')}.json"
    write_atomic(trials_file, json.dumps(kept, indent=2) + "\n")

    print("\n".join(render_trials(result["trials"])))
    print(
        f"best: {hpl_tune.describe(best)}: {result['best_gflops']:.2f} Gflop/s (median of "
        f"{len(result['best_runs'])}), HPL's recommended input {result['baseline_gflops']:.2f} "
        f"({result['best_gflops'] / result['baseline_gflops']:.3f}x); "
        f"{len(result['trials'])} trials in {result['seconds']:.0f} s, "
        f"search {result['stopped']}"
    )
    if loss:
        print("\n".join(render_loss(loss)) + f"\n  (DGEMM rate {dgemm:.2f} Gflop/s: {dgemm_how})")
    else:
        print(f"loss against DGEMM: {dgemm_how if dgemm is None else 'no detailed timing'}")
    print(f"trials kept in {shown(trials_file)}")
    if args.write:
        target = hpl_settings.path_of(site.name)
        tuned = {
            "n": n,
            "ranks": ranks,
            "gflops": round(result["best_gflops"], 2),
            "baseline_gflops": round(result["baseline_gflops"], 2),
            "when": when,
            "trials": shown(trials_file),
        }
        write_atomic(target, hpl_settings.render(best, tuned))
        print(f"wrote {shown(target)}: the HPL check uses it from its next run")
    return 0

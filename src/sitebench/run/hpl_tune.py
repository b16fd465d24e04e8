"""HPL tuner: search HPL.dat's input for the fastest on a site, within a time budget.

``./sitebench tune hpl --site S`` (src/sitebench/cli/tune.py) runs the site's Spack-built
``xhpl`` directly with ``mpirun`` (one rank per core, one BLAS thread per rank, as the HPL
check runs it) in a scratch directory, trial after trial, at one N. The method:

1. **baseline**: HPL's recommended input (``sites.hpl_settings.DEFAULTS``, the grid closest
   to square with P <= Q), the input the check used before tuning.
2. **one factor at a time**, in the order of their expected weight (NB, the grid, look-ahead
   depth, broadcast, panel and recursive factorisation, NBMIN, NDIV, swapping and its
   threshold, L1 and U forms, equilibration, the process mapping): every candidate of a
   factor with the others at the best so far; the best candidate is adopted when it beats
   the current best by more than ``min_gain`` (0.5 %) twice: it is run again at once
   ("recheck"), and its lower run becomes the bar the next candidates must pass.
3. **local search** around that best: the neighbours of each ordered factor (the next
   smaller and larger NB, NBMIN, NDIV, depth, threshold) and every other value of each
   named one, each with the others at the current best; a better one (rechecked as above)
   is adopted at once, and passes repeat until one adopts nothing or the budget ends.
4. **confirmation**: the best and the baseline, alternating, ``confirm`` more runs each
   (time reserved for it from the start); the best wins only when the median of all its
   runs beats the baseline's by more than ``min_gain``, so a lucky run on a shared machine
   does not become the site's input: otherwise HPL's recommended input is kept.

An input already measured (same settings) is not run again before the confirmation. A
trial whose residual check fails, that fails to run, or that takes more than three times
the baseline (``timeout``) is kept as failed and never chosen. Every trial is returned
(and kept by the command in ``.sitebench/tune/<site>/hpl-<UTC time>.json``).
"""

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.parsers import ParseError
from sitebench.parsers import hpl as hpl_parser
from sitebench.run.hpl_input import hpl_dat, process_grid
from sitebench.sites import hpl_settings

#: Block sizes tried (HPL's TUNING: 32 to 256; tuned BLAS often like 192-384).
NB_VALUES = (64, 96, 128, 160, 192, 224, 256, 288, 320, 384)

#: Factors with a natural order: the local search tries the next smaller and larger value.
ORDERED = ("nb", "nbmin", "ndiv", "depth", "swap_threshold")


def grids(ranks):
    """Every P x Q = ranks, the closest to square (P <= Q) first, then by P."""
    first = process_grid(ranks)
    others = [(p, ranks // p) for p in range(1, ranks + 1) if ranks % p == 0]
    return [first] + [g for g in others if g != first]


def space(ranks, n):
    """factor -> candidate values, in the order the search visits the factors."""
    return {
        "nb": [v for v in NB_VALUES if v <= n],
        "grid": grids(ranks),
        "depth": [0, 1, 2],
        "bcast": list(hpl_settings.CHOICES["bcast"]),
        "pfact": list(hpl_settings.CHOICES["pfact"]),
        "rfact": list(hpl_settings.CHOICES["rfact"]),
        "nbmin": [1, 2, 4, 8, 16],
        "ndiv": [2, 3, 4],
        "swap": list(hpl_settings.CHOICES["swap"]),
        "swap_threshold": [32, 64, 128, 256],
        "l1": list(hpl_settings.CHOICES["l1"]),
        "u": list(hpl_settings.CHOICES["u"]),
        "equilibration": [True, False],
        "pmap": list(hpl_settings.CHOICES["pmap"]),
    }


def baseline(ranks):
    """HPL's recommended input on ``ranks``: the settings the search starts from."""
    return {**hpl_settings.DEFAULTS, "grid": process_grid(ranks)}


def as_file_settings(settings):
    """The search's settings (``grid``: (P, Q)) as hpl.yaml's keys (``p``, ``q``)."""
    out = {k: v for k, v in settings.items() if k != "grid"}
    out["p"], out["q"] = settings["grid"]
    return out


def valid(settings):
    """Whether HPL accepts the combination (it would skip the test otherwise)."""
    return settings["nbmin"] <= settings["nb"]


def relevant(factor, settings):
    """The swapping threshold only matters to the mixed swap."""
    return factor != "swap_threshold" or settings["swap"] == "mix"


def _key(settings):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in settings.items()))


class _Search:
    def __init__(self, trial, factors, budget, clock, confirm, min_gain, log):
        self.trial = trial
        self.factors = factors
        self.budget = budget
        self.clock = clock
        self.confirm = confirm
        self.min_gain = min_gain
        self.log = log
        self.start = clock()
        self.trials = []
        self.seen = {}
        self.timeout = None
        self.stopped = "converged"

    def elapsed(self):
        return self.clock() - self.start

    def estimate(self):
        """Seconds the next trial may take: the longest of the last three."""
        recent = [t["seconds"] for t in self.trials[-3:]]
        return max(recent) if recent else 0.0

    def reserve(self):
        return 2 * self.confirm * self.estimate()

    def fits(self):
        return self.elapsed() + self.estimate() + self.reserve() <= self.budget

    def run(self, settings, phase):
        began = self.clock()
        out = self.trial(dict(settings), self.timeout)
        seconds = self.clock() - began
        record = {
            "number": len(self.trials) + 1,
            "phase": phase,
            "settings": as_file_settings(settings),
            "gflops": out.get("gflops"),
            "seconds": seconds,
            "error": out.get("error"),
            "time_s": out.get("time_s"),
            "phases": out.get("phases", {}),
        }
        self.trials.append(record)
        self.seen.setdefault(_key(settings), record["gflops"])
        shown = f"{record['gflops']:.2f} Gflop/s" if record["gflops"] else record["error"]
        self.log(f"  trial {record['number']:3d} {phase:12s} {describe(settings)}: {shown}")
        return record["gflops"]

    def measure(self, settings, phase):
        """Gflop/s of ``settings`` (an earlier trial's where it ran), or None: failed, or
        no budget left (``self.stopped`` says so)."""
        if not valid(settings):
            return None
        if _key(settings) in self.seen:
            return self.seen[_key(settings)]
        if not self.fits():
            self.stopped = "budget"
            return None
        return self.run(settings, phase)

    def better(self, gflops, than):
        return gflops is not None and gflops > than * (1 + self.min_gain)

    def adopt(self, settings, gflops, than):
        """Whether ``settings`` (measured at ``gflops``) replaces a best of ``than``: only when a
        second run of it beats ``than`` too. Returns its Gflop/s, the lower of its two runs
        (a single lucky run does not raise the bar the others must pass), or None."""
        if not self.better(gflops, than):
            return None
        if not self.fits():
            self.stopped = "budget"
            return None
        again = self.run(settings, "recheck")
        if again is None:
            self.seen[_key(settings)] = None
            return None
        # Remembered at its lower run, so a later pass does not recheck a lucky run again.
        self.seen[_key(settings)] = min(gflops, again)
        return min(gflops, again) if self.better(again, than) else None


def search(
    trial, factors, start, budget, clock=time.monotonic, confirm=2, min_gain=0.005, log=print
):
    """Tune ``start`` (settings with ``grid``) over ``factors`` (:func:`space`) within
    ``budget`` seconds of ``clock``. ``trial(settings, timeout)`` runs one input and returns
    ``{"gflops": float or None, "error": str, "time_s": float, "phases": {...}}``.

    Returns ``{"best", "best_gflops", "baseline", "baseline_gflops", "trials", "stopped",
    "seconds"}``: the chosen settings (hpl.yaml keys), the medians of their runs, every trial
    in order, why the search ended ("converged" or "budget") and its length."""
    s = _Search(trial, factors, budget, clock, confirm, min_gain, log)
    base = dict(start)
    base_gflops = s.run(base, "baseline")
    if base_gflops is None:
        raise SitebenchError(
            f"HPL failed at its recommended input: {s.trials[0]['error']}",
            "run the site's xhpl by hand in a directory with HPL.dat to see why",
        )
    # A trial may take three times the baseline before it is stopped as hopeless.
    s.timeout = 3 * s.trials[0]["seconds"] + 5
    best, best_gflops = dict(base), base_gflops

    log("one factor at a time:")
    for factor, values in factors.items():
        if s.stopped == "budget":
            break
        if not relevant(factor, best):
            continue
        found = {}
        for value in values:
            if value == best[factor]:
                continue
            found_gflops = s.measure({**best, factor: value}, "one-factor")
            if found_gflops is not None:
                found[value] = found_gflops
            if s.stopped == "budget":
                break
        if found:
            value = max(found, key=found.get)
            adopted = s.adopt({**best, factor: value}, found[value], best_gflops)
            if adopted:
                best, best_gflops = {**best, factor: value}, adopted

    log("local search around the best:")
    improved = s.stopped != "budget"
    while improved and s.stopped != "budget":
        improved = False
        for factor, values in factors.items():
            if s.stopped == "budget":
                break
            if not relevant(factor, best):
                continue
            for value in neighbours(factor, values, best[factor]):
                gflops = s.measure({**best, factor: value}, "local")
                adopted = s.adopt({**best, factor: value}, gflops, best_gflops)
                if adopted:
                    best, best_gflops = {**best, factor: value}, adopted
                    improved = True
                if s.stopped == "budget":
                    break

    runs = {
        name: [
            t["gflops"]
            for t in s.trials
            if t["settings"] == as_file_settings(settings) and t["gflops"] is not None
        ]
        for name, settings in (("best", best), ("baseline", base))
    }
    if _key(best) != _key(base) and confirm:
        log("confirmation (the best and the baseline, alternating):")
        s.timeout = None
        for round_ in range(confirm):
            for name, settings in _in_turn(round_, [("best", best), ("baseline", base)]):
                gflops = s.run(settings, f"confirm-{name}")
                if gflops is not None:
                    runs[name].append(gflops)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    chosen = best if medians["best"] > medians["baseline"] * (1 + min_gain) else base
    return {
        "best": as_file_settings(chosen),
        "best_gflops": medians["best"] if chosen is best else medians["baseline"],
        "best_runs": runs["best"] if chosen is best else runs["baseline"],
        "searched_best": as_file_settings(best),
        "searched_best_runs": runs["best"],
        "baseline": as_file_settings(base),
        "baseline_gflops": medians["baseline"],
        "baseline_runs": runs["baseline"],
        "trials": s.trials,
        "stopped": s.stopped,
        "seconds": s.elapsed(),
    }


def neighbours(factor, values, current):
    """The values the local search tries next to ``current``."""
    if factor in ORDERED:
        if current not in values:
            return []
        i = values.index(current)
        return [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
    return [v for v in values if v != current]


def _in_turn(round_, items):
    shift = round_ % len(items)
    return items[shift:] + items[:shift]


def describe(settings):
    """One line of an input: its NB and grid, then only what differs from HPL's defaults."""
    p, q = settings["grid"] if "grid" in settings else (settings["p"], settings["q"])
    parts = [f"NB={settings['nb']} {p}x{q}"]
    for key, default in hpl_settings.DEFAULTS.items():
        if key != "nb" and settings.get(key, default) != default:
            parts.append(f"{key}={settings[key]}")
    return " ".join(parts)


# --- real trials: the site's xhpl under mpirun --------------------------------------------


def installed_xhpl(spack, env_dir, site="local", toolchain=None):
    """The site's Spack-built xhpl, the one its HPL check runs (with ``toolchain``, a
    :class:`~sitebench.sites.toolchains.Toolchain`, where the environment has one per
    toolchain)."""
    from sitebench.spack import toolchain_roots

    root = None
    if toolchain is not None:
        root = toolchain_roots.root_for(env_dir, "hpl", toolchain.extras())
    proc = spack.run(
        "-e",
        env_dir,
        "find",
        "--format",
        "{prefix}",
        f"/{root}" if root else "hpl",
        capture=True,
        check=False,
    )
    prefixes = proc.stdout.split() if proc.returncode == 0 else []
    if len(prefixes) != 1:
        raise SitebenchError(
            f"expected one installed hpl in {env_dir}, found {prefixes or 'none'}",
            f"build it: ./sitebench run --site {site} -- -n HplCheck",
        )
    exe = Path(prefixes[0]) / "bin" / "xhpl"
    if not exe.is_file():
        raise SitebenchError(f"{exe} does not exist", "reinstall hpl: ./sitebench spack ...")
    return exe


def mpirun_env():
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }


def xhpl_trial(exe, n, ranks, scratch=None, mpirun="mpirun"):
    """A trial function for :func:`search`: ``exe`` at order ``n`` on ``ranks`` ranks (one per
    core, bound), in a fresh directory under ``scratch`` (default: the system's temp)."""

    def trial(settings, timeout=None):
        p, q = settings["grid"]
        with tempfile.TemporaryDirectory(dir=scratch, prefix="hpl-tune-") as work:
            Path(work, "HPL.dat").write_text(hpl_dat(n, settings["nb"], p, q, settings))
            command = [mpirun, "-np", str(ranks), "--bind-to", "core", str(exe)]
            try:
                proc = subprocess.run(
                    command,
                    cwd=work,
                    env=mpirun_env(),
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return {"gflops": None, "error": f"stopped after {timeout:.0f} s (timeout)"}
        if proc.returncode != 0:
            return {
                "gflops": None,
                "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}",
            }
        try:
            result = hpl_parser.parse(proc.stdout)
        except ParseError as err:
            return {"gflops": None, "error": str(err)}
        if not result.all_passed:
            return {"gflops": None, "error": "residual check failed or test skipped"}
        test = result.tests[0]
        return {
            "gflops": test.gflops,
            "time_s": test.time_s,
            "phases": hpl_parser.detailed_timing(proc.stdout),
        }

    return trial


def hpl_flops(n):
    """HPL's operation count for order ``n`` (the one its Gflop/s divides)."""
    return 2.0 / 3.0 * n**3 + 1.5 * n**2


def loss_against_dgemm(n, time_s, phases, dgemm_gflops):
    """Where the time beyond the DGEMM rate goes, from HPL's detailed timing: seconds per
    phase, summing to the loss (``time_s`` - the time of HPL's flops at the DGEMM rate).

    HPL prints each phase as the slowest rank's sum, to 0.01 s. The DGEMM-rate time of all of
    HPL's flops is set against the update, where nearly all of them are; the panel
    factorisation (``rfact``: pfact and mxswp), the row swaps (``laswp``, inside the update),
    the triangular solve and the rest (broadcasts, waits, set-up: the wall time not in any
    phase) are losses in full. None where the run printed no detailed timing."""
    if not phases or "update" not in phases or not dgemm_gflops:
        return None
    ideal = hpl_flops(n) / (dgemm_gflops * 1e9)
    rfact, update = phases.get("rfact", 0.0), phases["update"]
    laswp, uptrsv = phases.get("laswp", 0.0), phases.get("uptrsv", 0.0)
    parts = {
        "panel factorisation (rfact)": rfact,
        "row swaps (laswp)": laswp,
        "update beyond the DGEMM rate": update - laswp - ideal,
        "triangular solve (up tr sv)": uptrsv,
        "other (broadcasts, waits, set-up)": time_s - rfact - update - uptrsv,
    }
    return {
        "time_s": time_s,
        "dgemm_time_s": ideal,
        "loss_s": time_s - ideal,
        "ratio": ideal / time_s,
        "parts": parts,
        "largest": max(parts, key=parts.get),
    }

"""Two sites x 5 years of nightly runs, indexed, for ``perf exchange`` to time ``compare``
(and ``regressions``, ``references``) over the whole history as a user runs them.

Every run is the real input run as another night (:class:`Nights`: its figures moved as
figures moved between two real nights), accepted as a pull accepts it (a line per run in
the exchange's per-site log, :data:`sitebench.results.exchange.RUNS_LOG`) and indexed by
the store's own ``refresh`` (its segments, its compaction, its ``runs.json``), a refresh a
week. What is left out is git: the runs' three indexed files are handed to the refresh from
memory (its ``read_runs``) instead of read with ``git cat-file`` (that read is the refresh's
cost, measured by the pull part of the benchmark; here what matters is the index a site
holds after 5 years).
The history is kept in ``.sitebench/perf-exchange/history-5y/`` (a rerun with the same
input reuses it).
"""

import contextlib
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

from sitebench.common import paths
from sitebench.perf import federation
from sitebench.results import compare, exchange, figures, figures_file, propose, regress, rundirs
from sitebench.results import runfiles
from sitebench.results import store

NIGHTS = 1825
SITES = ("site00", "site01")
#: Nights accepted between two refreshes while the history is made (a pull a week).
NIGHTS_PER_REFRESH = 7
#: 2: figures move as they moved between the kept pair (with one kept run, as before).
FORMAT = 2


def _oid(*parts):
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


class Nights:
    """The input run as night ``night`` of a site: the real run's report with each figure
    and each case's run time moved by a factor drawn from what moved between two real
    nights (the log of its ratio, figure by figure: :func:`_real_moves`), with the night's
    name and times. The federation's synthetic runs are not used: at the one-run
    calibration they make new host fingerprints, problem sizes and figure names per night,
    which two real nights keep (a two-site compare then has thousands of keys where real
    nights have 400)."""

    def __init__(self, name):
        files = federation.run_files(name)
        self.name = name
        self.files = {rel: files[rel] for rel in rundirs.INDEXED_FILES if rel in files}
        self.report = json.loads(self.files[rundirs.REPORT])
        self.started = self.report["session_info"]["time_start"]
        self.values = []  # (a figure's or a case's list, where its value is, the value)
        for run in self.report["runs"]:
            for case in run["testcases"]:
                if isinstance(case.get("time_run"), (int, float)):
                    self.values.append((case, "time_run", case["time_run"]))
                for entry in (case.get("perfvalues") or {}).values():
                    if isinstance(entry, list) and isinstance(entry[0], (int, float)):
                        self.values.append((entry, 0, entry[0]))
        self.moves = _real_moves()

    def files_of(self, night, index):
        """{relative: bytes} of the indexed files of site ``index``'s run of ``night`` (its
        figures.json in place of its report)."""
        run = federation.run_name(night, index)
        rng = random.Random(night * 1000003 + index)
        for holder, key, value in self.values:
            holder[key] = value * math.exp(rng.choice(self.moves))
        stamp = run.split("-")[0][:-1] + "+0000"
        self.report["session_info"]["time_start"] = stamp
        self.report["session_info"]["time_end"] = stamp
        # What every site takes of a run: its figures.json, made as a stored run's is.
        files = {
            **{rel: data for rel, data in self.files.items() if rel != rundirs.REPORT},
            rundirs.FIGURES: figures_file.encode(figures_file.derive(self.report)),
        }
        return run, {
            rel: data.replace(self.name.encode(), run.encode()) for rel, data in files.items()
        }


def _real_moves():
    """log(second / first) of every figure two real nights share (both signs): the kept
    pair (:func:`sitebench.perf.federation.pair`), or with one kept run the calibration
    pair committed under ``results/local/``."""
    names = federation.pair()
    first, second = (
        {
            (r["check"], r["params"], r["environ"], r["figure"]): r["value"]
            for r in figures.rows_of_run(_kept_run(name), True)
        }
        for name in (names if len(names) == 2 else federation.CALIBRATION)
    )
    moves = [
        math.log(second[key] / value)
        for key, value in first.items()
        if value and value > 0 and (second.get(key) or 0) > 0
    ]
    return moves + [-move for move in moves]


def _kept_run(name):
    """The kept input run ``name`` (an archive of ``perf/inputs/`` or a committed run)."""
    files = federation.run_files(name)

    def read(relative, _limit):
        if relative not in files:
            raise runfiles.MissingFile(f"no {relative}")
        return files[relative]

    return rundirs.parse_run("local", name, name, read)


def _runs_from_memory(nights, made):
    """A reader for the store's refresh (its ``read_runs``): the accepted runs made by
    ``nights`` in memory, not read from git."""

    def read_runs(_results_root, entries):
        for entry in entries:
            site, run, _tree, _commit = entry
            name, files = nights.files_of(*made[run])

            def read(relative, _limit, files=files):
                if relative not in files:
                    raise runfiles.MissingFile(f"no {relative}")
                return files[relative]

            yield entry, rundirs.parse_run(site, name, name, read)

    return read_runs


@contextlib.contextmanager
def _own_store(where):
    """The history's index in ``where/store`` (the benchmark makes its other stores anew)."""
    saved = os.environ.get("SITEBENCH_STORE_DIR")
    os.environ["SITEBENCH_STORE_DIR"] = str(where / "store")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SITEBENCH_STORE_DIR", None)
        else:
            os.environ["SITEBENCH_STORE_DIR"] = saved


def build(where, name, nights=NIGHTS, progress=print):
    with _own_store(where):
        return _build(where, name, nights, progress)


def _build(where, name, nights, progress):
    """The results directory ``where/results`` (its exchange log of ``SITES`` x ``nights``
    accepted runs) and its index, made once per input and kept; {seconds, runs}."""
    marker = where / "made.json"
    want = {"nights": nights, "sites": list(SITES), "input": name, "format": FORMAT}
    indexed = all(
        (store.store_dir(where / "results") / site / "runs.json").is_file() for site in SITES
    )  # the index is found by the results directory's path: a moved one is made anew
    if indexed and marker.is_file() and json.loads(marker.read_text()).get("params") == want:
        return json.loads(marker.read_text())
    shutil.rmtree(where, ignore_errors=True)
    root = where / "results"
    ex = exchange.Exchange(root)
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(ex.git_dir)], check=True)
    made = {}
    t0 = time.perf_counter()
    read_runs = _runs_from_memory(Nights(name), made)
    for start in range(0, nights, NIGHTS_PER_REFRESH):
        taken = []
        for night in range(start, min(nights, start + NIGHTS_PER_REFRESH)):
            for index, site in enumerate(SITES):
                run = federation.run_name(night, index)
                made[run] = (night, index)
                taken.append((site, run, _oid("tree", run), _oid("commit", run)))
        ex._log_runs(taken)
        store.refresh_all(root, read_runs=read_runs)
        if start % 182 < NIGHTS_PER_REFRESH:
            progress(f"  5-year history of two sites: {start + NIGHTS_PER_REFRESH} nights")
    info = {
        "params": want,
        "runs": len(made),
        "build_s": time.perf_counter() - t0,
    }
    marker.write_text(json.dumps(info))
    return info


def store_bytes(root):
    """{site: bytes of its index (segments and runs list)} for the results directory."""
    base = store.store_dir(root)
    return {
        site: sum(p.stat().st_size for p in (base / site).iterdir() if p.is_file())
        for site in SITES
    }


def _cli_seconds(root, *args):
    """Seconds of ``./sitebench ARGS`` (the wrapper as a user runs it) on ``root``."""
    env = {**os.environ, "SITEBENCH_RESULTS_DIR": str(root)}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(paths.ROOT / "sitebench"), *args], capture_output=True, text=True, env=env
    )
    spent = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"./sitebench {' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return spent, proc.stdout


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _compare(root):
    a, b = (compare.Side.parse(site, root) for site in SITES)
    table = compare.compare(a, b, results_root=root)
    if not len(table):
        raise RuntimeError("compare of the two synthetic sites found no common figure")
    return table


def _regressions(root):
    return regress.check_site(SITES[1], results_root=root)


def _references(root):
    return propose.propose(SITES[1], root=root, warn=lambda message: None)


def measure(where, rounds, progress=print):
    with _own_store(where):
        return _measure(where, rounds, progress)


def _measure(where, rounds, progress):
    """Each command over the kept 5-year history: library calls (after a warm-up call)
    and ``./sitebench compare`` / ``regressions`` (the CLI, a new process each), round
    after round; {name: [seconds]} with the table's rows and the history's index bytes."""
    root = where / "results"
    calls = {"compare": _compare, "regressions": _regressions, "references": _references}
    commands = {
        "compare_cli": ("compare", *SITES),
        "regressions_cli": ("regressions", SITES[1]),
    }
    for fn in calls.values():
        fn(root)  # imports, and a first refresh with nothing new
    times = {name: [] for name in [*calls, *commands, "refresh_unchanged"]}
    rows = None
    for _ in range(rounds):
        # What a refresh costs a site for the history it holds (nothing new to index).
        spent, indexed = _timed(lambda: store.refresh_all(root))
        if sum(indexed.values()):
            raise RuntimeError("a refresh of the kept history with nothing new indexed runs")
        times["refresh_unchanged"].append(spent)
        for name, fn in calls.items():
            spent, out = _timed(lambda fn=fn: fn(root))
            times[name].append(spent)
            rows = len(out) if name == "compare" else rows
        for name, args in commands.items():
            times[name].append(_cli_seconds(root, *args)[0])
    for name, spent in times.items():
        progress(f"  {name} over two sites' history: {statistics.median(spent):.2f} s")
    con = store.connect(store.store_dir(root), list(SITES))
    counted = con.execute("SELECT count(*) FROM figures").fetchone()[0]
    return {
        "rows": rows,
        "figures": counted,
        "times_s": times,
        "store_bytes": store_bytes(root),
        "segments": {
            site: len(list((store.store_dir(root) / site).glob("fig-*.parquet"))) for site in SITES
        },
        "python": sys.version.split()[0],
    }

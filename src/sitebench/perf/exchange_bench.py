"""``./sitebench perf exchange``: the results exchange of a federation, 100 sites x 365 nights.

The history is made from two real runs of today's quick suite (:mod:`sitebench.perf.federation`:
what differs between two real nights differs per synthetic night), one commit per site and
night, signed with that site's SSH key as its publish signs it, written with ``git
fast-import`` into a shared repository kept in ``.sitebench/perf-exchange/`` (reruns reuse it;
each round adds a night). Making 36,500 runs of a 3 MB suite on a 2-core machine takes hours,
so the history is a slice, ``sites`` x ``nights`` (default 100 x 3), and what grows with the
history is measured on it and projected linearly (every projected figure says so and keeps
what it was projected from). Measured, through the public functions only (``exchange.pull``,
``store.refresh_all``, ``compare.compare``), so it measures whatever they do:

* a new site's first pull of the whole slice, every commit verified, then the store's refresh
  (figures and provenance of every run, ready to compare): timed, and the site's disk
  (``results/`` with its exchange copy) and file count after it, per run, projected to
  100 sites x 1 year and x 5 years;
* per round, one more night of the 100 sites pushed (100 signed commits), then timed: that
  site's ``pull`` of it (and of that the verification), the store's refresh after it, and a
  refresh with nothing new (what the history costs every refresh, for the projection);
* the shared repository, packed (``git repack -a -d``), per run, and the night's own pack;
* ``compare``, ``regressions`` and ``references`` of two sites over ``pair_nights`` (default
  1,825: 5 years) nightly runs each (:mod:`sitebench.perf.compare_history`: the real input
  run night after night, indexed by the store's own refresh), measured, as library calls and
  as ``./sitebench compare`` / ``regressions``; that index's bytes per site are the store's
  part of a site's disk at 5 years;
* ``show SITE/RUN`` of one run's bulk, when the exchange keeps bulk on demand (a pull that
  writes every run's files has nothing to show: recorded as not applicable).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from sitebench.common import paths
from sitebench.perf import compare_history, federation
from sitebench.perf.measure import now, ratio
from sitebench.results import exchange, store, trust, verify

GOALS = {
    "disk_gb_5y": 20.0,
    "files_5y": 2_000_000,
    "pull_s": 10.0,
    "refresh_s": 2.0,
    "first_pull_1y_s": 600.0,
    "compare_5y_s": 2.0,
    "show_s": 5.0,
}
YEAR, FIVE_YEARS = 365, 1825
ENV = ("SITEBENCH_SITES_ROOT", "SITEBENCH_TRUST_DIR", "SITEBENCH_KEYS_DIR", "SITEBENCH_STORE_DIR")


def _git(cwd, *args):
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


def _packed_bytes(bare):
    for line in _git(bare, "count-objects", "-v").splitlines():
        if line.startswith("size-pack:"):
            return int(line.split()[1]) * 1024
    return 0


def disk(root):
    """(bytes on disk, files) under ``root``, and the same for its exchange copy alone:
    what the file system holds (allocated blocks of every file and directory)."""
    parts = {"results": [0, 0], "exchange": [0, 0]}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        part = parts["exchange" if rel.split(os.sep)[0] == exchange.EXCHANGE_DIR else "results"]
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            part[0] += st.st_blocks * 512
            part[1] += name in filenames
    return {k: {"bytes": v[0], "files": v[1]} for k, v in parts.items()}


def _key_of(keys):
    return lambda site: keys[site]


def _history(bare, tmpl, nights, sites, keys, progress):
    """Append ``nights`` of ``sites`` to ``bare``, signed; seconds (made, signed)."""
    since = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "-q", "--verify", "refs/heads/main"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    t0 = time.perf_counter()
    federation.fast_import(bare, tmpl, nights, sites)
    made = time.perf_counter() - t0
    t0 = time.perf_counter()
    federation.sign(bare, since or None, _key_of(keys))
    signed = time.perf_counter() - t0
    progress(
        f"  {len(nights)} night(s) of {len(sites)} sites: made {made:.0f} s, signed {signed:.0f} s"
    )
    return made, signed


def real_growth(base, names):
    """Bytes the second real night adds to a packed repository holding the first (both
    repacked as ``git gc --aggressive`` does): what the synthetic nights are held to."""
    where = base / "real-pair.git"
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(where)], check=True)
    sizes = []
    for i, name in enumerate(names):
        files = federation.run_files(name)
        proc = subprocess.Popen(
            ["git", "-C", str(where), "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE
        )
        out = [b"commit refs/heads/main\ncommitter perf <perf@sitebench> 0 +0000\ndata 0\n"]
        if i:
            out.append(b"from refs/heads/main^0\n")
        for rel, data in sorted(files.items()):
            path = f"local/{name}/{rel}".encode()
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(data), data))
        proc.communicate(b"".join(out) + b"done\n")
        _git(where, "repack", "-a", "-d", "-f", "-q", "--depth=50", "--window=250")
        sizes.append(_packed_bytes(where))
    shutil.rmtree(where, ignore_errors=True)
    return {"runs": list(names), "first_bytes": sizes[0], "second_adds_bytes": sizes[1] - sizes[0]}


def prepare(base, tmpl, sites, nights, keys, progress):
    """The shared repository of ``sites`` x ``nights``, made once and kept."""
    marker = base / "made.json"
    want = {"sites": sites, "nights": nights, "input": list(tmpl.names), "format": 5}
    if marker.is_file() and json.loads(marker.read_text()).get("params") == want:
        return json.loads(marker.read_text())
    shutil.rmtree(base / "shared.git", ignore_errors=True)
    bare = base / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    made = signed = 0.0
    for start in range(0, nights, 2):
        m, s = _history(
            bare, tmpl, range(start, min(nights, start + 2)), range(sites), keys, progress
        )
        made, signed = made + m, signed + s
    t0 = time.perf_counter()
    _git(bare, "repack", "-a", "-d", "-q")
    _git(bare, "prune")
    repacked = time.perf_counter() - t0
    info = {
        "params": want,
        "runs": sites * nights,
        "generate_s": made,
        "sign_s": signed,
        "repack_s": repacked,
        "packed_bytes": _packed_bytes(bare),
        "slice_tip": _git(bare, "rev-parse", "refs/heads/main").strip(),
        "next_night": nights,
    }
    marker.write_text(json.dumps(info))
    return info


class _VerifyTimer:
    """The time spent verifying while active: in ``verify.check_range``, from when the pull
    started checking the range's signatures (``verify.Signing``, begun while the files it
    verifies are fetched) when it did."""

    def __init__(self):
        self.spent = []
        self.started = []
        self.real = verify.check_range
        self.signing = verify.Signing.__init__

    def __enter__(self):
        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return self.real(*args, **kw)
            finally:
                begun = min([t0, *self.started])
                self.started.clear()
                self.spent.append(time.perf_counter() - begun)

        def signing(signing, *args, **kw):
            self.started.append(time.perf_counter())
            self.signing(signing, *args, **kw)

        verify.check_range = timed
        verify.Signing.__init__ = signing
        return self

    def __exit__(self, *exc):
        verify.check_range = self.real
        verify.Signing.__init__ = self.signing


def _pull_and_index(root, bare):
    """(pulled, indexed, pull s, verify s, refresh s) of one pull into ``root``."""
    with _VerifyTimer() as timer:
        t0 = time.perf_counter()
        pulled = exchange.pull(root, remote=str(bare), branch="main")
        pull_s = time.perf_counter() - t0
    if pulled.refused:
        raise RuntimeError(f"the pull refused synthetic commits: {pulled.refused[:3]}")
    t0 = time.perf_counter()
    indexed = store.refresh_all(root)
    refresh_s = time.perf_counter() - t0
    return pulled, sum(indexed.values()), pull_s, sum(timer.spent), refresh_s


def _show_seconds(root, site, run):
    """Seconds of ``./sitebench show SITE/RUN`` writing one run's bulk, or None when this
    exchange has no such command (every run's files are already written by pull)."""
    cli = paths.ROOT / "src" / "sitebench" / "cli" / "show.py"
    if not cli.is_file():
        return None
    env = {**os.environ, "SITEBENCH_RESULTS_DIR": str(root)}
    # The command as ./sitebench runs it, in this interpreter: the wrapper's own check of
    # the venv (in the state directory, which the benchmark moves) is not the command's.
    command = "import sys; from sitebench.cli import main; sys.exit(main(sys.argv[1:]))"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", command, "show", f"{site}/{run}"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(paths.ROOT / "src")},
    )
    spent = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"./sitebench show {site}/{run} failed: {proc.stderr.strip()[-400:]}")
    return spent


def _compare_history(base, pair_nights, rounds, progress):
    """compare, regressions and references of two sites over ``pair_nights`` nightly runs
    each (:mod:`sitebench.perf.compare_history`), as library calls and through the CLI."""
    where = base / ("history-5y" if pair_nights == FIVE_YEARS else f"history-{pair_nights}")
    name = federation.pair()[0]
    made = compare_history.build(where, name, pair_nights, progress)
    measured = compare_history.measure(where, rounds, progress)
    return {**measured, "nights": pair_nights, "build_s": made["build_s"]}


def bench(rounds=3, sites=100, nights=3, pair_nights=FIVE_YEARS, progress=print):
    base = paths.state_dir() / "perf-exchange"
    base.mkdir(parents=True, exist_ok=True)
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ["SITEBENCH_SITES_ROOT"] = str(base / "sites")
    os.environ["SITEBENCH_TRUST_DIR"] = str(base / "trust")
    os.environ["SITEBENCH_KEYS_DIR"] = str(base / "keys")
    os.environ["SITEBENCH_STORE_DIR"] = str(base / "store")
    try:
        return _bench(base, rounds, sites, nights, pair_nights, progress)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _bench(base, rounds, sites, nights, pair_nights, progress):
    load_start = os.getloadavg()  # a busy shared machine slows every figure: kept with them
    tmpl = federation.template()
    keys = {}
    for site in range(max(sites, 2)):
        name = federation.site_name(site)
        keys[name] = trust.ensure_site_key(name)[0]  # each trusted for its own runs here
    real = real_growth(base, tmpl.names if len(tmpl.names) == 2 else federation.CALIBRATION)
    info = prepare(base, tmpl, sites, nights, keys, progress)
    bare = base / "shared.git"
    # Every measurement starts from the same history (the slice); the nights pushed by an
    # earlier measurement are left behind, and new nights get new numbers.
    _git(bare, "update-ref", "refs/heads/main", info["slice_tip"])
    history_runs = sites * nights
    packed_per_run = info["packed_bytes"] / history_runs
    root = base / "joiner"
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(base / "store", ignore_errors=True)
    progress(f"  a new site's first pull of {history_runs} runs")
    _p, indexed, pull_s, verify_s, refresh_s = _pull_and_index(root, bare)
    if indexed != history_runs:
        raise RuntimeError(f"the store indexed {indexed} of {history_runs} pulled runs")
    first = {
        "runs": history_runs,
        "pull_s": pull_s,
        "verify_s": verify_s,
        "refresh_s": refresh_s,
        "disk": disk(root),
        "store_bytes": disk(store.store_dir(root))["results"]["bytes"],
    }
    first["projected_1y_s"] = (pull_s + refresh_s) * sites * YEAR / history_runs
    times = {"pull": [], "verify": [], "refresh": [], "refresh_unchanged": []}
    night_pack = []
    for _ in range(rounds):
        night = info["next_night"]
        before = _packed_bytes(bare)
        _history(bare, tmpl, range(night, night + 1), range(sites), keys, progress)
        _git(bare, "repack", "-d", "-q")
        night_pack.append((_packed_bytes(bare) - before) / sites)
        _p, indexed, pull_s, verify_s, refresh_s = _pull_and_index(root, bare)
        if indexed != sites:
            raise RuntimeError(f"the store indexed {indexed} of the night's {sites} runs")
        t0 = time.perf_counter()
        if sum(store.refresh_all(root).values()):
            raise RuntimeError("a refresh with nothing new indexed runs")
        times["refresh_unchanged"].append(time.perf_counter() - t0)
        for key, value in (("pull", pull_s), ("verify", verify_s), ("refresh", refresh_s)):
            times[key].append(value)
        info["next_night"] = night + 1
        (base / "made.json").write_text(json.dumps(info))
        progress(f"  night {night}: pull {pull_s:.2f} s, refresh {refresh_s:.2f} s")
    runs_now = sites * (nights + rounds)
    after = disk(root)
    show_s = _show_seconds(root, "site01", federation.run_name(info["next_night"] - 1, 1))
    pair = _compare_history(base, pair_nights, rounds, progress)
    per_run = {
        part: {k: v / runs_now for k, v in after[part].items()} for part in ("results", "exchange")
    }
    site_bytes = per_run["results"]["bytes"] + per_run["exchange"]["bytes"]
    site_files = per_run["results"]["files"] + per_run["exchange"]["files"]
    history_nights = nights + rounds
    unchanged = statistics.median(times["refresh_unchanged"])
    # The store's own bytes at 5 years: its index is one folder per site, so the two-site
    # history's bytes per site times the sites (per night held, if it is shorter).
    store_5y = statistics.mean(pair["store_bytes"].values()) * sites * FIVE_YEARS / pair_nights
    # A night's refresh at 1 year: the one measured, plus what each site's index costs for a
    # longer history, measured on the two-site history (5 years of runs a site, more than a
    # year's: a bound) less what it cost with the runs held now.
    per_site_history = statistics.median(pair["times_s"]["refresh_unchanged"]) / len(
        compare_history.SITES
    )
    extra = sites * max(0.0, per_site_history - unchanged / sites)
    refresh_1y = [r + extra for r in times["refresh"]]
    result = {
        "benchmark": "exchange",
        "federation": True,
        "when": now(),
        "commit": _git(paths.ROOT, "rev-parse", "--short", "HEAD").strip(),
        "input": {
            "runs": list(tmpl.names),
            "files": len(tmpl.files),
            "bytes": tmpl.bytes,
            "varying_files": len(tmpl.varying),
            "varying_bytes": tmpl.volatile_bytes,
            "gz_bytes": [federation.gz_size(n) for n in tmpl.names],
            "calibration": tmpl.calibration,
        },
        "sites": sites,
        "slice_nights": nights,
        "history_nights": history_nights,
        "rounds": rounds,
        "generate_s": info["generate_s"],
        "sign_s": info["sign_s"],
        "repack_s": info["repack_s"],
        "real_pair_packed": real,
        "packed_bytes_per_run": packed_per_run,
        "night_pack_bytes_per_run": night_pack,
        "first_pull": first,
        "times_s": times,
        "refresh_1y_s": refresh_1y,
        "refresh_unchanged_per_site_at_pair_nights_s": per_site_history,
        "disk_after": after,
        "disk_per_run": per_run,
        "disk_5y_bytes": site_bytes * sites * FIVE_YEARS + store_5y,
        "store_5y_bytes": store_5y,
        "files_5y": site_files * sites * FIVE_YEARS,
        "disk_1y_bytes": site_bytes * sites * YEAR,
        "files_1y": site_files * sites * YEAR,
        "compare": pair,
        "show_s": show_s,
        "load": {"start": list(load_start), "end": list(os.getloadavg())},
    }
    result["ratios"] = _ratios(result)
    return result


def _ratios(result):
    g = GOALS
    one = lambda value, goal: ratio([value], [goal])  # noqa: E731 (a projection: one value)
    r = {
        "pull time / 10 s": ratio(result["times_s"]["pull"], [g["pull_s"]] * result["rounds"]),
        "refresh time / 2 s": ratio(
            result["times_s"]["refresh"], [g["refresh_s"]] * result["rounds"]
        ),
        "refresh time at 1 year (projected) / 2 s": ratio(
            result["refresh_1y_s"], [g["refresh_s"]] * result["rounds"]
        ),
        "site's disk at 5 years (projected) / 20 GB": one(
            result["disk_5y_bytes"] / 1e9, g["disk_gb_5y"]
        ),
        "site's files at 5 years (projected) / 2 M": one(result["files_5y"], g["files_5y"]),
        "first pull of 1 year (projected) / 10 min": one(
            result["first_pull"]["projected_1y_s"], g["first_pull_1y_s"]
        ),
    }
    r.update(_compare_ratios(result["compare"]))
    if result["show_s"] is not None:
        r["show SITE/RUN / 5 s"] = one(result["show_s"], g["show_s"])
    return r


#: The commands timed over the two-site history, by their ratio's name at 5 years.
HISTORY_RATIOS = {
    "compare": "compare over 5 years / 2 s",
    "compare_cli": "./sitebench compare over 5 years / 2 s",
    "regressions": "regressions over 5 years / 2 s",
    "regressions_cli": "./sitebench regressions over 5 years / 2 s",
}


def _compare_ratios(c):
    """The compare goal's ratios: measured over 5 years (or projected, in the files kept
    before the history was measured whole; a shorter history has none)."""
    if "projected_5y_s" in c:
        return {"compare over 5 years (projected) / 2 s": ratio([c["projected_5y_s"]], [2.0])}
    if c["nights"] != FIVE_YEARS:
        return {}
    return {
        name: ratio(c["times_s"][key], [GOALS["compare_5y_s"]] * len(c["times_s"][key]))
        for key, name in HISTORY_RATIOS.items()
    }


def _input_line(inp):
    gz = " and ".join(f"{b / 1024:.0f} KiB" if b else "committed" for b in inp["gz_bytes"])
    line = (
        f"input: {' and '.join(inp['runs'])} ({gz}): "
        f"{inp['files']} files, {inp['bytes'] / 2**20:.2f} MiB a run; {inp['varying_files']} "
        f"files made new per night ({inp['varying_bytes'] / 1024:.0f} KiB of their bytes)"
    )
    cal = inp.get("calibration")
    if cal:
        tokens = ", ".join(f"{k} {v[0]:.2f}" for k, v in sorted(cal["tokens"].items()))
        line += (
            f", at the shares that differed between two real nights of "
            f"{' and '.join(cal['runs'])} (tokens: {tokens})"
        )
    return line


def render(result):
    if not result.get("federation"):
        return render_ten_sites(result)
    inp, first = result["input"], result["first_pull"]
    night_pack = statistics.median(result["night_pack_bytes_per_run"])
    real = result["real_pair_packed"]
    sites, runs = result["sites"], first["runs"]
    lines = [
        _input_line(inp),
        *_load_line(result.get("load")),
        f"history: {sites} sites x {result['slice_nights']} nights ({runs:,} signed runs) made "
        f"in {result['generate_s']:.0f} s, signed in {result['sign_s']:.0f} s, repacked in "
        f"{result['repack_s']:.0f} s; then {result['rounds']} more nights pushed",
        f"packed per run: {result['packed_bytes_per_run'] / 1024:.0f} KiB (the history, "
        f"repack -a -d); a night's own pack {night_pack / 1024:.0f} KiB per run",
        f"two real nights packed (gc --aggressive; {', '.join(real['runs'])}): the first "
        f"{real['first_bytes'] / 1024:.0f} KiB, the second adds "
        f"{real['second_adds_bytes'] / 1024:.0f} KiB",
        f"a new site's first pull of {runs:,} runs: pull {first['pull_s']:.1f} s (verify "
        f"{first['verify_s']:.1f} s), refresh {first['refresh_s']:.1f} s; "
        f"projected to {sites} x {YEAR}: {first['projected_1y_s'] / 60:.1f} min",
    ]
    after, per = result["disk_after"], result["disk_per_run"]
    lines.append(
        f"site's disk after {sites} x {result['history_nights']} nights: results/ "
        f"{after['results']['bytes'] / 2**20:.0f} MiB in {after['results']['files']:,} files, "
        f"exchange copy {after['exchange']['bytes'] / 2**20:.0f} MiB in "
        f"{after['exchange']['files']:,} files; per run {per['results']['bytes'] / 1024:.0f} + "
        f"{per['exchange']['bytes'] / 1024:.0f} KiB, {per['results']['files']:.1f} + "
        f"{per['exchange']['files']:.2f} files"
    )
    lines.append(
        f"projected: {sites} x 1 year {result['disk_1y_bytes'] / 1e9:.1f} GB in "
        f"{result['files_1y'] / 1e6:.2f} M files; x 5 years {result['disk_5y_bytes'] / 1e9:.1f} "
        f"GB in {result['files_5y'] / 1e6:.2f} M files"
        + (
            f" (of which the store's index {result['store_5y_bytes'] / 1e9:.2f} GB)"
            if "store_5y_bytes" in result
            else ""
        )
    )
    t = result["times_s"]
    lines.append(f"{'per night of ' + str(sites) + ' sites':<28}{'median s':>10}{'min-max s':>16}")
    for name in ("pull", "verify", "refresh", "refresh_unchanged"):
        v = t[name]
        lines.append(f"{name:<28}{statistics.median(v):>10.2f}{f'{min(v):.2f}-{max(v):.2f}':>16}")
    per_site = result.get("refresh_unchanged_per_site_at_pair_nights_s")
    if per_site is not None:
        lines.append(
            f"refresh at 1 year: the night's plus each site's index cost for a longer history, "
            f"{per_site * 1000:.1f} ms a site with nothing new at {result['compare']['nights']} "
            f"runs (the two-site history): {statistics.median(result['refresh_1y_s']):.2f} s"
        )
    lines += _compare_lines(result["compare"])
    show = result["show_s"]
    lines.append(
        "show SITE/RUN: "
        + (
            f"{show:.2f} s"
            if show is not None
            else "not applicable (pull writes every run's files: nothing is fetched on demand)"
        )
    )
    from sitebench.perf.measure import render_ratios

    lines += render_ratios(result["ratios"])
    return "\n".join(lines)


def _load_line(load):
    if not load:  # a file kept before the load average was
        return []
    start, end = load["start"], load["end"]
    return [
        f"load average (1, 5, 15 min): {start[0]:.2f} {start[1]:.2f} {start[2]:.2f} at the "
        f"start, {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end"
    ]


def _compare_lines(c):
    if "points" in c:  # a file kept before the history was measured whole
        points = ", ".join(
            f"{p['nights']} nights {statistics.median(p['times_s']):.2f} s" for p in c["points"]
        )
        held = c.get("refresh_per_run_s")
        return [
            f"compare of two sites: {points}; {c['per_night_s'] * 1000:.2f} ms a night"
            + (
                f" (its refresh of two sites: {2 * held * 1000:.2f} ms a night held)"
                if held
                else ""
            )
            + f", projected to {FIVE_YEARS} nights: {c['projected_5y_s']:.2f} s"
        ]
    stores = ", ".join(f"{site} {b / 2**20:.1f} MiB" for site, b in c["store_bytes"].items())
    lines = [
        f"two sites x {c['nights']} nights ({c['figures']:,} figures; made in "
        f"{c['build_s']:.0f} s; the store's index: {stores}, "
        f"{max(c['segments'].values())} segments a site); median s [min-max]:"
    ]
    for name, times in c["times_s"].items():
        shown = f"./sitebench {name[:-4]}" if name.endswith("_cli") else f"{name} (library)"
        lines.append(
            f"  {shown:<34}{statistics.median(times):>8.2f}  [{min(times):.2f}-{max(times):.2f}]"
        )
    return lines


#: The goals of the earlier benchmark's kept files (10 sites, publish timed too).
GOALS_S = {"publish": 10.0, "pull": 10.0, "refresh": 2.0}


def render_ten_sites(result):
    """A kept file of the earlier benchmark (10 sites x 365 nights of a 2026-11-22 run)."""
    lines = [
        f"results repository: {result['runs_before']:,} runs ({result['sites']} sites x "
        f"{result['history_nights']} nights, {result['run_files']} files and "
        f"{result['run_bytes'] / 1024:.0f} KiB each); generated in {result['generate_s']:.0f} s, "
        f"cloned in {result['clone_s']:.0f} s, indexed in {result['index_s']:.0f} s (kept)",
        f"{'step':<10}{'median s':>10}{'min-max s':>16}{'goal':>8}{'ratio to goal':>15}",
    ]
    for name, goal in GOALS_S.items():
        t = result["times_s"][name]
        med = statistics.median(t)
        lines.append(
            f"{name:<10}{med:>10.2f}{f'{min(t):.2f}-{max(t):.2f}':>16}{goal:>7.0f}s"
            f"{med / goal:>15.3f}"
        )
    v, p = result["times_s"].get("verify"), result["times_s"]["pull"]
    if v:
        share = statistics.median([a / b for a, b in zip(v, p)])
        lines.append(
            f"of the pull, verifying its {result['sites'] - 1} signed commits took "
            f"{statistics.median(v):.2f} s (share {share:.3f})"
        )
    g = result["growth_kib_per_run"]
    lines.append(
        f"packed repository growth per run: {statistics.median(g):.0f} KiB "
        f"[{min(g):.0f}-{max(g):.0f}] (median of {result['rounds']} nights)"
    )
    return "\n".join(lines)

"""``./sitebench perf exchange``: the results exchange through git at scale.

A results repository already holding ``sites`` x ``nights`` nightly runs (default 10 x 365)
is generated once with ``git fast-import`` and kept, with a site's clone of it and the
store's index of that clone, in ``.sitebench/perf-exchange/`` (reruns reuse them; each round
adds one night). Each synthetic run is the size of a real quick run: the files of a real
run of ``results/local/`` (110 files, 884 KiB), of which the 55 that differed between two
real nights (430 KiB: outputs, perflogs, report, provenance) are made different per run and
the others are the same bytes every night, as they are in real runs. Each round:

* another night of the other sites is pushed to the shared repository, one commit per site
  signed with that site's SSH key (as their publish makes them), then timed: ``pull`` of it
  into the site's results directory, every commit verified (paths, sizes, signatures against
  the trust list of the 10 sites) and its runs exported (goal <= 10 s), and of that, the
  verification alone (its share of the pull);
* the store's refresh after that pull (``store.refresh_all``, goal <= 2 s);
* ``publish`` of the site's own new run, signed (goal <= 10 s);
* and the shared repository's growth, packed (``git repack -d``), per run in KiB.

The history before is the baseline the site's exchange accepted when it joined (as
``exchange migrate`` takes a checkout's history); only the nights pushed here are verified.
"""

import json
import shutil
import statistics
import subprocess
import time

from sitebench.common import paths
from sitebench.perf.measure import now, ratio
from sitebench.results import exchange, store, trust, verify

GOALS_S = {"publish": 10.0, "pull": 10.0, "refresh": 2.0}
TEMPLATE_PAIR = ("20261122T152735Z-c5bfbc", "20261122T153111Z-7d0096")


def _git(cwd, *args, **kw):
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, **kw
    ).stdout


def _template():
    """[(relative path, bytes, varies per night)] of a real quick run."""
    a, b = (paths.ROOT / "results/local" / name for name in TEMPLATE_PAIR)
    files = []
    for path in sorted(p for p in a.rglob("*") if p.is_file()):
        rel = path.relative_to(a).as_posix()
        other = b / rel
        data = path.read_bytes()
        varies = not other.is_file() or other.read_bytes() != data
        files.append((rel, data, varies))
    return files


def _run_name(night, site):
    day = time.gmtime(1700000000 + night * 86400)
    return time.strftime("%Y%m%dT020000Z", day) + f"-{site:02d}{night:04x}"


def _run_blob(rel, data, name, night, site):
    """A varying file of the template as the run ``name`` has it: its own name and a value
    of its own, in a form its readers still accept (the store reads every synthetic run;
    one it cannot read would be read again at every refresh)."""
    data = data.replace(b"20261122T152735Z-c5bfbc", name.encode())
    own = (night * 7919 + site * 104729) % 99991
    if rel.endswith(".json"):
        doc = json.loads(data)
        if isinstance(doc, dict):
            doc["synthetic"] = {"run": name, "site": site, "night": night, "value": own}
        return json.dumps(doc, indent=1).encode()
    if rel.startswith("perflogs/"):
        return data  # one record per line: no line of another shape
    return data + f"\n# {name} site{site:02d} night {night} {own}\n".encode()


def _fast_import(bare, template, nights, sites, site_names, message):
    """Append one commit per night (every site's run of that night) to main."""
    proc = subprocess.Popen(
        ["git", "-C", str(bare), "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE
    )
    out = proc.stdin
    marks = {}
    for i, (rel, data, varies) in enumerate(template):
        if not varies:
            marks[rel] = i + 1
            out.write(b"blob\nmark :%d\ndata %d\n" % (i + 1, len(data)) + data + b"\n")
    head = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "-q", "--verify", "refs/heads/main"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    stamp = 1700000000
    for night in nights:
        lines = []
        for site in sites:
            name = _run_name(night, site)
            for rel, data, varies in template:
                path = f"{site_names(site)}/{name}/{rel}"
                if varies:
                    blob = _run_blob(rel, data, name, night, site)
                    lines.append(b"M 100644 inline %s\ndata %d\n" % (path.encode(), len(blob)))
                    lines.append(blob + b"\n")
                else:
                    lines.append(b"M 100644 :%d %s\n" % (marks[rel], path.encode()))
        msg = f"{message} night {night}".encode()
        out.write(b"commit refs/heads/main\n")
        out.write(b"committer perf <perf@sitebench> %d +0000\n" % (stamp + night * 86400))
        out.write(b"data %d\n%s\n" % (len(msg), msg))
        if head:
            out.write(b"from %s\n" % head.encode())
            head = None
        out.write(b"".join(lines))
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")


def _site_name(site):
    return f"site{site:02d}"


def prepare(base, sites, nights, progress=print):
    """The shared repository, a clone for site00 and its store index, made once."""
    marker = base / "made.json"
    want = {
        "sites": sites,
        "nights": nights,
        "template": list(TEMPLATE_PAIR),
        "blobs": 2,
        "exchange": 2,
    }
    if marker.is_file() and json.loads(marker.read_text()).get("params") == want:
        return json.loads(marker.read_text())
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    bare, clone = base / "shared.git", base / "site00"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    template = _template()
    t0 = time.perf_counter()
    for start in range(0, nights, 73):
        _fast_import(
            bare,
            template,
            range(start, min(nights, start + 73)),
            range(sites),
            _site_name,
            "history",
        )
        progress(f"  generated {min(nights, start + 73)} of {nights} nights")
    made = time.perf_counter() - t0
    _git(bare, "repack", "-a", "-d", "-q")
    t0 = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)
    cloned = time.perf_counter() - t0
    joined = exchange.Exchange(clone)
    joined.create(str(bare), "main", "")
    joined.git("update-ref", exchange.ACCEPTED, joined.fetch())  # the history, as migrate takes it
    (base / "sites/site-configs/site00").mkdir(parents=True)
    t0 = time.perf_counter()
    counts = store.refresh_all(clone, base / "store")
    indexed = time.perf_counter() - t0
    if sum(counts.values()) != sites * nights:
        raise RuntimeError(f"the store indexed {counts} of {sites} x {nights} synthetic runs")
    info = {
        "params": want,
        "runs": sites * nights,
        "generate_s": made,
        "clone_s": cloned,
        "index_s": indexed,
        "next_night": nights,
    }
    marker.write_text(json.dumps(info))
    return info


def _packed_kib(bare):
    _git(bare, "repack", "-d", "-q")
    for line in _git(bare, "count-objects", "-v", text=True).splitlines():
        if line.startswith("size-pack:"):
            return int(line.split()[1])
    return 0


def _signed_night(base, bare, template, night, sites):
    """Each other site's run of ``night`` pushed as that site's publish makes it: one commit
    per site, signed with its key, on the shared branch."""
    for site in range(1, sites):
        name = _site_name(site)
        others = base / "others" / name
        run = others / name / _run_name(night, site)
        for rel, data, varies in template:
            (run / rel).parent.mkdir(parents=True, exist_ok=True)
            (run / rel).write_bytes(
                _run_blob(rel, data, run.name, night, site) if varies else data
            )
        sender = exchange.Exchange(others)
        if not sender.exists:
            sender.create(str(bare), "main", "")
        tip = sender.fetch()
        key, _, _ = trust.ensure_site_key(name)
        commit = sender.make_commit(tip, name, [run], "", key)
        if sender.push(commit).returncode != 0:
            raise RuntimeError(f"could not push {name}'s night {night}")
        shutil.rmtree(run)


def bench(rounds=3, sites=10, nights=365):
    import os

    base = paths.state_dir() / "perf-exchange"
    info = prepare(base, sites, nights)
    bare, clone = base / "shared.git", base / "site00"
    saved = {
        k: os.environ.get(k)
        for k in ("SITEBENCH_SITES_ROOT", "SITEBENCH_TRUST_DIR", "SITEBENCH_KEYS_DIR")
    }
    os.environ["SITEBENCH_SITES_ROOT"] = str(base / "sites")
    os.environ["SITEBENCH_TRUST_DIR"] = str(base / "trust")
    os.environ["SITEBENCH_KEYS_DIR"] = str(base / "keys")
    template = _template()
    times = {"pull": [], "verify": [], "refresh": [], "publish": []}
    growth = []
    real_check = verify.check_range
    spent = []

    def timed_check(*args, **kw):
        t0 = time.perf_counter()
        try:
            return real_check(*args, **kw)
        finally:
            spent.append(time.perf_counter() - t0)

    verify.check_range = timed_check
    try:
        for site in range(sites):
            trust.ensure_site_key(_site_name(site))  # each trusted for its own runs here
        for _ in range(rounds):
            night = info["next_night"]
            before = _packed_kib(bare)
            _signed_night(base, bare, template, night, sites)
            spent.clear()
            t0 = time.perf_counter()
            pulled = exchange.pull(clone)
            times["pull"].append(time.perf_counter() - t0)
            times["verify"].append(sum(spent))
            assert not pulled.refused, pulled.refused
            assert sum(len(r) for _s, r in pulled.new) == sites - 1, pulled
            t0 = time.perf_counter()
            indexed = store.refresh_all(clone, base / "store")
            times["refresh"].append(time.perf_counter() - t0)
            # Each pulled run (and our run of the round before) indexed once: a run the store
            # cannot read would be read again at every refresh, and be what is measured.
            assert sum(indexed.values()) == sites - 1 + bool(growth), indexed
            own = clone / "site00" / _run_name(night, 0)
            for rel, data, varies in template:
                (own / rel).parent.mkdir(parents=True, exist_ok=True)
                (own / rel).write_bytes(
                    _run_blob(rel, data, own.name, night, 0) if varies else data
                )
            t0 = time.perf_counter()
            done = exchange.publish("site00", clone, remote=str(bare), branch="main")
            times["publish"].append(time.perf_counter() - t0)
            assert done.published and done.runs == [own.name], done
            growth.append((_packed_kib(bare) - before) / sites)
            info["next_night"] = night + 1
            (base / "made.json").write_text(json.dumps(info))
    finally:
        verify.check_range = real_check
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    result = {
        "benchmark": "exchange",
        "when": now(),
        "sites": sites,
        "history_nights": nights,
        "runs_before": info["runs"],
        "run_bytes": sum(len(d) for _r, d, _v in template),
        "run_files": len(template),
        "generate_s": info["generate_s"],
        "clone_s": info["clone_s"],
        "index_s": info["index_s"],
        "rounds": rounds,
        "times_s": times,
        "growth_kib_per_run": growth,
    }
    result["ratios"] = {
        f"{name} time / {goal:g} s": ratio(times[name], [goal] * rounds)
        for name, goal in GOALS_S.items()
    }
    return result


def render(result):
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

"""Three sites federating real runs through the CLI, as centres would: two checkouts (A and
B: each its own results directory, store, trust list and signing key) exchange a real run
each through a results repository made by ``./sitebench exchange init-remote``, and a third
(C) joins late, pinning the history it joins (``pull --expect``). Every site then compares
the others from figures and provenance alone (no file of another site in its results/), a
run's outputs come back on demand byte for byte (``show``), ``exchange status`` shows the
costs, and after ``exchange prune`` the same bytes come back again.

:func:`federate` is the scenario; tests/test_federation.py plays it with two committed real
runs, tests/test_loop.py with the two runs of today's quick suite it makes."""

import hashlib
import json
import shutil
import time

from exchange_world import World
from sitebench.results.rundirs import new_run_name


def digests(run_dir):
    """{relative path: SHA-256} of every file of a run."""
    return {
        p.relative_to(run_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def files_of_other_sites(site):
    """Files under ``site``'s results/ that belong to no run of its own (the exchange's
    copy and lock aside)."""
    return [
        p
        for p in site.results.rglob("*")
        if p.is_file()
        and not p.relative_to(site.results).parts[0].startswith(".")
        and p.relative_to(site.results).parts[0] != site.name
    ]


def _ok(proc, *codes):
    assert proc.returncode in (codes or (0,)), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _rows(site, a, b):
    """compare's rows of side ``a`` against ``b``, as ``site`` computes them."""
    out = _ok(site.cli("compare", a, b, "--format", "json")).stdout
    rows = json.loads(out)["rows"]
    assert rows, f"{site.name}: compare {a} {b} gave no row"
    return rows


def _figures(rows):
    """The figures of compare's rows, without the order rows come in."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _sides(row, first, second):
    keys = ("check", "params", "problem", "figure", "unit")
    return json.dumps([row.get(k) for k in (*keys, first, second)], sort_keys=True, default=str)


def federate(tmp, run_a, run_b):
    """Play the scenario with the real runs ``run_a`` (site A's) and ``run_b`` (B's; C's run
    is a copy of it under a new name); return {step: seconds}."""
    world = World(tmp)
    a, b, c = world.site("sitea"), world.site("siteb"), world.site("sitec")
    seconds, started = {}, time.monotonic()

    def step(name):
        nonlocal started
        now = time.monotonic()
        seconds[name] = round(now - started, 2)
        started = now

    for site in (a, b, c):
        site.trusts(*[other for other in (a, b, c) if other is not site])
    signers = world.trust_file("sitea", "siteb", "sitec")
    _ok(a.cli("exchange", "init-remote", str(world.bare), "--trust", str(signers)))
    remote = str(world.bare)
    originals = {}
    for site, source, name in ((a, run_a, run_a.name), (b, run_b, run_b.name)):
        shutil.copytree(source, site.results / site.name / name)
        originals[site.name, name] = digests(source)
    step("set up")

    # A and B publish and pull each other.
    for site in (a, b):
        _ok(site.cli("publish", "--site", site.name, "--remote", remote))
    for site in (a, b):
        _ok(site.cli("pull", "--site", site.name, "--remote", remote))
    step("A and B publish, then pull")

    # C joins late, pinned to the history A has accepted, then publishes a run of its own.
    pinned = _ok(a.cli("exchange", "accepted")).stdout.strip()
    assert len(pinned) == 40, pinned
    _ok(c.cli("pull", "--site", c.name, "--remote", remote, "--expect", pinned))
    run_c = new_run_name()
    shutil.copytree(run_b, c.results / c.name / run_c)
    originals[c.name, run_c] = digests(run_b)
    _ok(c.cli("publish", "--site", c.name, "--remote", remote))
    for site in (a, b):
        _ok(site.cli("pull", "--site", site.name))
    step("C joins pinned, publishes; A and B pull")

    # Every site compares the others from figures and provenance alone.
    compared = {}
    for site in (a, b, c):
        compared[site.name] = (
            _rows(site, "sitea", "siteb"),
            _rows(site, "sitec", "sitea"),
        )
        assert files_of_other_sites(site) == [], (site.name, files_of_other_sites(site)[:5])
    for name, rows in compared.items():
        # The same figures on every site, whichever site's own run is on its disk.
        assert [_figures(r) for r in rows] == [_figures(r) for r in compared["sitea"]], name
    # C's run holds B's figures: C against A is A against B, sides swapped, figure by figure.
    a_b, c_a = compared["sitea"]
    assert sorted(_sides(r, "median_a", "median_b") for r in a_b) == sorted(
        _sides(r, "median_b", "median_a") for r in c_a
    )
    assert [r for r in a_b if r.get("ratio") is not None], a_b[:3]
    step("compare on every site")

    # Any run's outputs come back on demand, byte for byte.
    shown = {}
    for site, other, run in ((b, "sitea", run_a.name), (c, "siteb", run_b.name)):
        _ok(site.cli("show", f"{other}/{run}"))
        assert digests(site.results / other / run) == originals[other, run], (site.name, run)
        shown[site.name] = (other, run)
    _ok(a.cli("show", f"sitec/{run_c}"))
    assert digests(a.results / "sitec" / run_c) == originals["sitec", run_c]
    step("show one run on every site")

    status = _ok(b.cli("exchange", "status")).stdout
    row = next(line.split() for line in status.splitlines() if line.startswith("sitea "))
    # runs in the exchange, run directories on disk, of those with bulk
    assert row[1:4] == ["1", "1", "1"], status
    own = next(line.split() for line in status.splitlines() if line.startswith("siteb (own)"))
    assert own[2:5] == ["1", "1", "1"], status
    assert "results/ on disk:" in status and "exchange packed:" in status, status
    step("exchange status")

    # Retention: the shown copy goes, the figures stay, show brings the same bytes back.
    pruned = _ok(b.cli("exchange", "prune", "--days", "0")).stdout
    assert "dropped 1 copies of other sites' runs" in pruned, pruned
    assert files_of_other_sites(b) == []
    assert (b.results / "siteb" / run_b.name).is_dir()  # its own run: never dropped
    assert _figures(_rows(b, "sitea", "siteb")) == _figures(compared["siteb"][0])
    _ok(b.cli("show", f"sitea/{run_a.name}"))
    assert digests(b.results / "sitea" / run_a.name) == originals["sitea", run_a.name]
    step("prune, compare, show again")
    return seconds, status

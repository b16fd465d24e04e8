"""A hostile or broken site cannot fill the others' disks, and each site chooses what it
keeps: bounds on what one site adds (results.limits of site.yaml), one warning line per site,
retention of other sites' bulk (exchange prune / refill) and the disk it costs (exchange
status), on a real bare repository with plain-git pushes (exchange_world.py)."""

import os
import shutil
import subprocess
import time

import pytest

from exchange_world import TEMPLATE, World, git, tree_bytes
from sitebench.cli import main
from sitebench.results import exchange, quarantine, retention, store
from sitebench.sites import exchange_limits

pytestmark = pytest.mark.reliability_input

RUN_FILES = sum(1 for p in TEMPLATE.rglob("*") if p.is_file())
#: The bytes a pull fetches of a run (figures and provenance; the bulk stays on the remote).
RUN_BYTES = sum(
    p.stat().st_size
    for p in TEMPLATE.rglob("*")
    if p.is_file()
    and p.relative_to(TEMPLATE).as_posix().startswith(("report.json", "provenance/", "perflogs/"))
)


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    w.make_remote()
    alpha, beta, mallory = w.site("alpha"), w.site("beta"), w.site("mallory")
    beta.trusts(alpha, mallory)
    alpha.trusts(mallory)
    return w


def configure(world, site, text):
    env = world.sites_root / "environments" / site
    env.mkdir(parents=True, exist_ok=True)
    (env / "spack.yaml").write_text("spack: {specs: []}\n")
    (world.sites_root / "site-configs" / site / "site.yaml").write_text(text)


def pull_as(site, **kw):
    with site.act():
        return exchange.pull(remote=str(site.world.bare), site=site.name, **kw)


def mallory_pushes(world, clone, runs_per_commit, commits=1, broken_report=False):
    """``commits`` signed commits of mallory, each adding ``runs_per_commit`` real runs."""
    key = world.site("mallory").key
    made = []
    for c in range(commits):
        for r in range(runs_per_commit):
            name = f"20261127T{c:02d}{r:02d}00Z-m{c:02d}{r:02d}"
            dest = clone / "mallory" / name
            shutil.copytree(TEMPLATE, dest)
            if broken_report:
                (dest / "report.json").write_text("{not json")
            made.append(name)
        world.push_as(clone, f"results: mallory {c}", key=key)
    return made


#: (site.yaml limits, how mallory pushes (runs per commit, commits), runs of mallory taken)
BOUNDS = {
    "commits_per_night": ("{commits_per_night: 2}", (1, 3), 2),
    "runs_per_night": ("{runs_per_night: 2}", (3, 1), 0),
    "files_per_night": (f"{{files_per_night: {RUN_FILES + 5}}}", (1, 2), 1),
    "bytes_per_night": (f"{{bytes_per_night: {RUN_BYTES + 1000}}}", (1, 2), 1),
    "commits_total": ("{commits_total: 1}", (1, 2), 1),
    "runs_total": ("{runs_total: 3}", (2, 2), 2),
    "files_total": (f"{{files_total: {RUN_FILES * 2}}}", (1, 3), 2),
    "bytes_total": (f"{{bytes_total: {RUN_BYTES * 2 + 10}B}}", (1, 3), 2),
}


LOOSE = "{" + ", ".join(f"{k}: 1000000" for k in exchange_limits.DEFAULTS) + "}"


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_each_bound_is_refused_by_name_and_the_other_sites_still_arrive(world, bound):
    limits, (per_commit, commits), taken = BOUNDS[bound]
    alpha, beta = world.site("alpha"), world.site("beta")
    # The bound binds mallory; alpha gets a looser one of its own (the per-site override).
    configure(world, "beta", f"results:\n  limits: {limits[:-1]}, sites: {{alpha: {LOOSE}}}}}\n")
    first = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    made = mallory_pushes(world, clone, per_commit, commits)
    second = alpha.new_run()
    assert alpha.publish().published

    pulled = pull_as(beta)
    assert beta.runs("alpha") == sorted([first, second]), pulled
    assert beta.runs("mallory") == made[:taken], pulled
    assert pulled.refusals and all(site == "mallory" for site, _, _ in pulled.refusals)
    assert all(f"over the limit {bound} of mallory" in r for _, _, r in pulled.refusals)
    # Quarantined like any refusal, its site in the log.
    logged = quarantine.log_rows(beta.results / ".exchange")
    assert [row[2] for row in logged] == ["mallory"] * len(pulled.refusals)
    # Counted once: the next pull takes alpha's next run and refuses nothing again.
    third = alpha.new_run()
    assert alpha.publish().published
    again = pull_as(beta)
    assert again.new == [("alpha", [third])] and again.refused == [], again


def test_a_site_override_raises_the_bound_for_that_site_only(world):
    alpha, beta = world.site("alpha"), world.site("beta")
    configure(
        world,
        "beta",
        "results:\n  limits: {runs_per_night: 1, sites: {alpha: {runs_per_night: 5}}}\n",
    )
    mine = [alpha.new_run() for _ in range(3)]
    assert alpha.publish().published
    clone = world.hostile_clone()
    mallory_pushes(world, clone, 2)
    pulled = pull_as(beta)
    assert pulled.new == [("alpha", sorted(mine))]
    assert "over the limit runs_per_night of mallory (1)" in pulled.refused[0]


def test_refusals_are_one_line_per_site_and_quarantine_refs_are_capped(world, capsys):
    beta, mallory = world.site("beta"), world.site("mallory")
    configure(world, "beta", "results:\n  quarantine_refs: 5\n")
    clone = world.hostile_clone()
    for i in range(12):  # signed empty commits: nothing to take, a refusal each
        world.push_as(clone, f"empty {i}", key=mallory.key)
    for i in range(3):  # runs of mallory, unsigned
        shutil.copytree(TEMPLATE, clone / "mallory" / f"20261127T0{i}0000Z-u{i}")
        world.push_as(clone, f"unsigned {i}")
    told = beta.cli("pull", "--site", "beta", "--remote", str(world.bare))
    assert told.returncode == 3, told.stdout + told.stderr
    refused = [ln for ln in told.stdout.splitlines() if ln.startswith("REFUSED")]
    assert len(refused) == 2, told.stdout
    assert any("(no run): 12 commits refused" in ln and "adds no run" in ln for ln in refused)
    assert any("mallory: 3 commits refused" in ln and "unsigned" in ln for ln in refused)
    git_dir = beta.results / ".exchange"
    assert len(quarantine.refs(git_dir)) == 5  # the newest five kept for inspection
    rows = quarantine.log_rows(git_dir)
    assert len(rows) == 15 and set(quarantine.refs(git_dir)) == {r[1] for r in rows[-5:]}
    # The command lists every refusal, with its site.
    with beta.act():
        assert main(["exchange", "quarantine"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 15 and sum("mallory unsigned" in ln for ln in shown) == 3


def test_broken_runs_of_one_site_are_one_warning_line_in_compare_and_report(world, capsys):
    alpha, beta = world.site("alpha"), world.site("beta")
    alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    mallory_pushes(world, clone, 6, broken_report=True)  # accepted, then unreadable
    pulled = pull_as(beta)
    assert ("mallory", [f"20261127T00{r:02d}00Z-m00{r:02d}" for r in range(6)]) in pulled.new
    with beta.act():
        main(["compare", "alpha", "mallory"])
        first = capsys.readouterr().err
        main(["report", "--out", str(world.tmp / "report.html")])
        second = capsys.readouterr().err
    for err in (first, second):
        lines = [ln for ln in err.splitlines() if "mallory" in ln]
        assert len(lines) == 1 and "6 warnings" in lines[0], err


def _age(path, days):
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def _figures(beta, site):
    with beta.act():
        con = store.open_store([site])
        return con.sql(f"SELECT count(*) FROM figures WHERE site = '{site}'").fetchall()[0][0]


def test_prune_drops_old_bulk_of_other_sites_never_own_runs_or_figures(world, capsys):
    alpha, beta = world.site("alpha"), world.site("beta")
    old, changed, recent = alpha.new_run(), alpha.new_run(), alpha.new_run()
    assert alpha.publish().published
    own = beta.new_run()
    assert beta.publish().published
    pull_as(beta)
    for run in (old, changed, recent):  # written out on demand, as ./sitebench show does
        beta.show("alpha", run)
    figures_before = {site: _figures(beta, site) for site in ("alpha", "beta")}
    assert figures_before["alpha"] > 0
    own_before = tree_bytes(beta.results / "beta" / own)
    edited = next((beta.results / "alpha" / changed / "output").rglob("*.out"))
    edited.write_text("changed here\n")
    for run in (old, changed):
        _age(beta.results / "alpha" / run, 40)
    _age(beta.results / "beta" / own, 400)

    with beta.act():
        done = retention.prune(exchange.Exchange(beta.results), keep_days=30)
    assert [(s, r) for s, r, _, _ in done.dropped] == [("alpha", old)]
    assert [(s, r) for s, r, _ in done.kept] == [("alpha", changed)]
    assert "not in the exchange's history with these bytes" in done.kept[0][2]
    # The copy went whole: its figures and provenance are read from the exchange's objects.
    assert not (beta.results / "alpha" / old).exists()
    assert tree_bytes(beta.results / "beta" / own) == own_before
    assert tree_bytes(beta.results / "alpha" / recent) == tree_bytes(TEMPLATE)
    assert {site: _figures(beta, site) for site in ("alpha", "beta")} == figures_before
    # On demand, byte for byte, from the exchange's objects.
    proc = beta.cli("exchange", "refill", f"alpha/{old}")
    assert proc.returncode == 0 and "wrote back output" in proc.stdout, proc.stdout + proc.stderr
    assert tree_bytes(beta.results / "alpha" / old) == tree_bytes(TEMPLATE)
    assert {site: _figures(beta, site) for site in ("alpha", "beta")} == figures_before
    # A site that sets keep_days has it applied after each pull.
    configure(world, "beta", "results:\n  keep_days: 30\n")
    _age(beta.results / "alpha" / old, 40)
    pulled = beta.cli("pull", "--site", "beta")
    assert "retention (keep_days 30): dropped 1 copies of other sites' runs" in pulled.stdout
    assert not (beta.results / "alpha" / old).exists()
    assert tree_bytes(beta.results / "beta" / own) == own_before


def _as_an_older_version_pulled(site):
    """``site``'s exchange copy as versions before the partial copy made it: a full bare
    copy of the remote (every blob), its history accepted, no runs log, and every run of
    the other sites written as files into results/ (exported from the accepted tree)."""
    copy = site.results / exchange.EXCHANGE_DIR
    subprocess.run(["git", "init", "-q", "--bare", str(copy)], check=True)
    for key, value in (("remote", str(site.world.bare)), ("branch", "main"), ("prefix", "")):
        git(copy, "config", f"sitebench.{key}", value)
    git(copy, "config", "sitebench.site", site.name)
    git(copy, "fetch", "-q", str(site.world.bare), f"+main:{exchange.ACCEPTED}")
    for other in git(copy, "ls-tree", "-d", "--name-only", exchange.ACCEPTED).stdout.split():
        if other == site.name:
            continue
        tree = f"{exchange.ACCEPTED}:{other}"
        for run in git(copy, "ls-tree", "--name-only", tree).stdout.split():
            dest = site.results / other / run
            dest.mkdir(parents=True)
            archive = subprocess.run(
                ["git", "--git-dir", str(copy), "archive", f"{tree}/{run}"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def test_prune_brings_a_site_pulled_by_an_older_version_to_the_new_footprint(world):
    """A site whose older sitebench wrote every run of the other sites as files: prune logs
    those runs from the accepted history, drops each copy whose every file hashes (git
    hash-object) to its accepted tree, keeps a copy that differs and says so, never touches
    the site's own runs; the figures stay, now read from git, and show gives the bytes back."""
    alpha, beta = world.site("alpha"), world.site("beta")
    runs = [alpha.new_run() for _ in range(4)]
    assert alpha.publish().published
    own = beta.new_run()
    assert beta.publish().published
    shutil.rmtree(beta.results / exchange.EXCHANGE_DIR)
    _as_an_older_version_pulled(beta)
    assert sorted(p.name for p in (beta.results / "alpha").iterdir()) == sorted(runs)
    changed = beta.results / "alpha" / runs[1] / "report.json"
    changed.write_bytes(changed.read_bytes().replace(b"{", b"{ ", 1))  # same JSON, other bytes
    own_before = tree_bytes(beta.results / "beta" / own)
    alpha_files = sum(1 for p in (beta.results / "alpha").rglob("*") if p.is_file())
    assert alpha_files == 4 * RUN_FILES
    (beta.results / "alpha" / runs[2] / "output" / "link").symlink_to(world.bare / "HEAD")
    # Indexed from their files, as the older version left them.
    figures_before = {site: _figures(beta, site) for site in ("alpha", "beta")}
    assert figures_before["alpha"] > 0
    # A first prune keeping 30 days logs the runs and drops none (the copies are new); the
    # store, refreshed after it, reads the log past them (they stay indexed from disk).
    young = beta.cli("exchange", "prune", "--days", "30")
    assert "logged 4 run(s) of other sites that an earlier version pulled" in young.stdout
    assert "dropped 0 copies" in young.stdout, young.stdout + young.stderr
    assert {site: _figures(beta, site) for site in ("alpha", "beta")} == figures_before

    proc = beta.cli("exchange", "prune", "--days", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dropped 2 copies of other sites' runs older than 0 day(s)" in proc.stdout
    assert f"kept alpha/{runs[1]}: report.json is not in the exchange's history" in proc.stdout
    assert f"kept alpha/{runs[2]}: output/link is not a regular file" in proc.stdout
    assert sorted(p.name for p in (beta.results / "alpha").iterdir()) == sorted(runs[1:3])
    assert tree_bytes(beta.results / "beta" / own) == own_before
    # The figures of the dropped copies are read from the exchange's objects now.
    assert {site: _figures(beta, site) for site in ("alpha", "beta")} == figures_before
    # A second prune finds nothing more to log or drop, and keeps the differing copy again.
    again = beta.cli("exchange", "prune", "--days", "0")
    assert "logged" not in again.stdout and "dropped 0 copies" in again.stdout, again.stdout
    assert f"kept alpha/{runs[1]}" in again.stdout
    # Each dropped run comes back on demand, byte for byte.
    shown = beta.cli("show", f"alpha/{runs[0]}")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert tree_bytes(beta.results / "alpha" / runs[0]) == tree_bytes(TEMPLATE)
    assert {site: _figures(beta, site) for site in ("alpha", "beta")} == figures_before


def test_prune_drops_old_quarantine_and_gc_drops_the_objects_no_ref_reaches(world):
    """A refused rewrite (never accepted: only its quarantine ref and the fetched tip hold
    it) carrying a 300 kB file: its bulk never reaches this copy (only figures and
    provenance are fetched); once the remote is restored and the ref is older than
    quarantine_days, prune deletes the ref (git 2.39's gc keeps the few commit and tree
    objects a partial copy fetched from its promisor remote); the log keeps it."""
    alpha, beta = world.site("alpha"), world.site("beta")
    alpha.new_run()
    assert alpha.publish().published
    pull_as(beta)
    good = git(world.bare, "rev-parse", "main").stdout.strip()
    clone = world.hostile_clone()
    root = git(clone, "rev-list", "--max-parents=0", "HEAD").stdout.split()[0]
    git(clone, "reset", "-q", "--hard", root)
    big = clone / "mallory" / "20261127T010000Z-big001"
    shutil.copytree(TEMPLATE, big)
    (big / "blob.bin").write_bytes(os.urandom(300_000))
    world.push_as(clone, "rewrite, big", key=world.site("mallory").key, force=True)
    blob = git(clone, "rev-parse", f"HEAD:mallory/{big.name}/blob.bin").stdout.strip()
    rewrite = git(clone, "rev-parse", "HEAD").stdout.strip()
    assert "history rewrite" in pull_as(beta).refused[0]
    git(world.bare, "update-ref", "refs/heads/main", good)  # the host restores the branch
    assert pull_as(beta).refused == []
    git_dir = beta.results / ".exchange"

    def here(obj):  # asked without fetching (a partial copy would fetch what it lacks)
        return git(git_dir, "-c", "protocol.allow=never", "cat-file", "-e", obj, check=False)

    assert here(blob).returncode != 0  # the refused bulk never came
    assert here(rewrite).returncode == 0 and set(quarantine.refs(git_dir)) == {rewrite}
    with beta.act():
        ex = exchange.Exchange(beta.results)
        kept = retention.prune(ex, keep_days=30)  # the ref is young: kept
        assert kept.refs_dropped == 0
        done = retention.prune(ex, keep_days=30, now=time.time() + 31 * 86400)
    assert done.refs_dropped == 1 and quarantine.refs(git_dir) == {}
    assert here(blob).returncode != 0
    assert done.packed_after <= done.packed_before, done
    assert quarantine.log_rows(git_dir)[0][1:3] == (rewrite, "mallory")  # the record stays


def test_status_figures_match_du_and_git_count_objects(world):
    alpha, beta = world.site("alpha"), world.site("beta")
    for _ in range(2):
        alpha.new_run()
    assert alpha.publish().published
    beta.new_run()
    assert beta.publish().published
    pull_as(beta)
    for run in beta.runs("alpha"):
        beta.show("alpha", run)
    with beta.act():
        ex = exchange.Exchange(beta.results)
        rows = {r.site: r for r in retention.status(ex)}
        packed = retention.packed_bytes(ex)
    for site in ("alpha", "beta"):
        du = subprocess.run(
            ["du", "-s", "-B1", str(beta.results / site)], capture_output=True, text=True
        )
        assert rows[site].disk_bytes == int(du.stdout.split()[0])
        found = subprocess.run(
            ["find", str(beta.results / site), "-type", "f"], capture_output=True, text=True
        )
        assert rows[site].disk_files == len(found.stdout.split())
    assert rows["alpha"].runs == 2 and rows["beta"].runs == 1 and rows["beta"].own
    assert not rows["alpha"].own and rows["alpha"].with_bulk == 2
    counts = dict(
        line.split(": ")
        for line in git(beta.results / ".exchange", "count-objects", "-v").stdout.splitlines()
    )
    assert packed == (int(counts["size-pack"]) + int(counts["size"])) * 1024
    assert 0 < rows["alpha"].packed_bytes <= packed
    assert rows["alpha"].limits["runs_per_night"] == 100
    shown = beta.cli("exchange", "status")
    assert shown.returncode == 0 and "beta (own)" in shown.stdout, shown.stdout + shown.stderr

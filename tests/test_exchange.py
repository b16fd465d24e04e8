"""The results exchange through git (src/sitebench/results/exchange.py), with real parts: a
bare repository on this machine is the shared remote (a file path, no daemon), each site a
clone of it; the runs are copies of a real committed run of results/local/."""

import shutil
import subprocess
import threading

import pytest

from conftest import small_tmpfs, ROOT
from sitebench.common.errors import SitebenchError
from sitebench.results import exchange
from sitebench.results.rundirs import new_run_name

TEMPLATE = ROOT / "results/local/20261122T111440Z-ebb65a"
SITES = ("alpha", "beta", "gamma", "delta")


def git(cwd, *args):
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def world(tmp_path, monkeypatch):
    """The shared bare repository (code + results/README.md) and a way to clone it."""
    sites = tmp_path / "sites"
    for site in SITES:
        (sites / "site-configs" / site).mkdir(parents=True)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(sites))
    bare = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "results").mkdir()
    (seed / "results/README.md").write_text("runs\n")
    (seed / "code.py").write_text("print('code')\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed")
    git(seed, "push", "-q", str(bare), "main")

    def clone(name):
        path = tmp_path / name
        git(tmp_path, "clone", "-q", str(bare), str(path))
        return path / "results"

    return bare, clone


def add_run(results, site):
    dest = results / site / new_run_name()
    shutil.copytree(TEMPLATE, dest)
    return dest.name


def remote_runs(bare):
    """{site: [runs]} in the shared branch, and how often each run's report was added."""
    runs = {}
    for line in git(bare, "ls-tree", "-r", "--name-only", "main", "results").splitlines():
        parts = line.split("/")
        if len(parts) >= 4:
            runs.setdefault(parts[1], set()).add(parts[2])
    added = git(bare, "log", "--diff-filter=A", "--name-only", "--format=", "main")
    reports = [ln for ln in added.splitlines() if ln.endswith("/report.json")]
    return {s: sorted(r) for s, r in runs.items()}, reports


def test_four_sites_publish_five_runs_each_at_once(world):
    bare, clone = world
    clones = {site: clone(f"clone-{site}") for site in SITES}
    made, errors, results = {}, [], []

    def site_night(site):
        try:
            for _ in range(5):
                made.setdefault(site, []).append(add_run(clones[site], site))
                results.append(exchange.publish(site, clones[site], retries=20))
        except Exception as err:  # noqa: BLE001 - reported by the test
            errors.append(err)

    threads = [threading.Thread(target=site_night, args=(s,)) for s in SITES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r.published for r in results), [r.reason for r in results if not r.published]
    runs, reports = remote_runs(bare)
    assert runs == {site: sorted(made[site]) for site in SITES}
    assert len(reports) == 20 and len(set(reports)) == 20  # each exactly once
    # Nothing else changed: the code and the README are the seed's, every run the template's.
    changed = git(bare, "diff", "--name-only", "main~20", "main").splitlines()
    assert all(p.startswith("results/") and p.count("/") >= 3 for p in changed)
    files = sorted(str(p.relative_to(TEMPLATE)) for p in TEMPLATE.rglob("*") if p.is_file())
    tree = git(bare, "ls-tree", "-r", "--name-only", "main", f"results/alpha/{made['alpha'][0]}")
    assert sorted(ln.split("/", 3)[3] for ln in tree.splitlines()) == files
    # Every clone gets them all with pull.
    other = clone("late")
    git(other.parent, "reset", "-q", "--hard", "main~10")
    found = dict(exchange.pull(other))
    assert sum(len(v) for v in found.values()) == 10
    assert sum(len(list((other / s).iterdir())) for s in SITES) == 20


@pytest.mark.reliability_fault
def test_remote_unreachable_keeps_the_run_committed_and_a_later_publish_pushes_it(world):
    bare, clone = world
    results = clone("site")
    first = add_run(results, "alpha")
    hidden = bare.with_name("shared-away.git")
    bare.rename(hidden)
    try:
        done = exchange.publish("alpha", results)
    finally:
        hidden.rename(bare)
    assert not done.published and done.runs == [first]
    assert "shared.git" in done.reason or "repository" in done.reason
    assert f"results/alpha/{first}/report.json" in git(results.parent, "ls-files")
    second = add_run(results, "alpha")
    done = exchange.publish("alpha", results)
    assert done.published and done.runs == sorted([first, second])
    assert remote_runs(bare)[0] == {"alpha": sorted([first, second])}
    assert exchange.publish("alpha", results) == exchange.Published(True, [], "", done.commit)


@pytest.mark.reliability_input
def test_another_sites_modified_run_refuses_naming_the_file(world):
    bare, clone = world
    a, b = clone("a"), clone("b")
    run = add_run(a, "alpha")
    assert exchange.publish("alpha", a).published
    exchange.pull(b)
    victim = b / "alpha" / run / "report.json"
    victim.write_text("{}")
    add_run(b, "beta")
    with pytest.raises(SitebenchError, match=f"results/alpha/{run}/report.json"):
        exchange.publish("beta", b)
    assert "beta" not in remote_runs(bare)[0]


def test_incoming_runs_and_staged_code_are_never_published(world):
    bare, clone = world
    a, b = clone("a"), clone("b")
    incoming = a / "alpha" / ".incoming-20261124T000000Z-abcdef"
    shutil.copytree(TEMPLATE, incoming)
    run = add_run(a, "alpha")
    # The user's staged code change, and another site's push in between (a rebase).
    (a.parent / "code.py").write_text("print('mine')\n")
    git(a.parent, "add", "code.py")
    add_run(b, "beta")
    assert exchange.publish("beta", b).published
    done = exchange.publish("alpha", a)
    assert done.published and done.runs == [run]
    assert "print('code')" in git(bare, "show", "main:code.py")
    assert ".incoming" not in git(bare, "ls-tree", "-r", "--name-only", "main")
    assert git(a.parent, "diff", "--cached", "--name-only").split() == ["code.py"]
    assert incoming.is_dir()


@pytest.mark.reliability_input
@pytest.mark.parametrize("case", ["unknown site", "missing remote", "no such path", "not git"])
def test_bad_configuration_is_refused(world, tmp_path, case):
    _bare, clone = world
    results = clone("site")
    add_run(results, "alpha")
    site, remote = "alpha", None
    if case == "unknown site":
        site = "nowhere"
    elif case == "missing remote":
        remote = "upstream"
    elif case == "no such path":
        remote = str(tmp_path / "gone.git")
    else:
        remote = str(tmp_path / "plain")
        (tmp_path / "plain").mkdir()
    with pytest.raises(SitebenchError) as err:
        exchange.publish(site, results, remote=remote)
    assert err.value.fix
    assert {"unknown site": "nowhere", "missing remote": "upstream"}.get(case, remote) in str(
        err.value
    )


@pytest.mark.reliability_input
def test_results_outside_git_are_refused(world, tmp_path):
    plain = tmp_path / "plain-results"
    add_run(plain, "alpha")
    with pytest.raises(SitebenchError, match="not in a git repository"):
        exchange.publish("alpha", plain)


@pytest.mark.reliability_input
def test_unreachable_url_is_not_published_with_gits_reason(world):
    _bare, clone = world
    results = clone("site")
    run = add_run(results, "alpha")
    done = exchange.publish("alpha", results, remote="file:///nonexistent/results.git")
    assert not done.published and done.runs == [run] and done.reason
    assert "\n" not in done.reason


@pytest.mark.reliability_input
def test_diverged_history_is_refused_and_nothing_pushed(world, tmp_path):
    bare, clone = world
    results = clone("site")
    other = tmp_path / "rewrite"
    subprocess.run(["git", "init", "-q", "-b", "main", str(other)], check=True)
    (other / "new.txt").write_text("another history\n")
    git(other, "add", "-A")
    git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "rewritten")
    git(other, "push", "-q", "--force", str(bare), "main")
    add_run(results, "alpha")
    with pytest.raises(SitebenchError, match="diverged"):
        exchange.publish("alpha", results)
    assert git(bare, "ls-tree", "-r", "--name-only", "main").split() == ["new.txt"]


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs, unmounted at the end."""
    with small_tmpfs(tmp_path / "small-disk", "4m") as mnt:
        yield mnt


@pytest.mark.reliability_fault
def test_disk_full_while_committing_loses_nothing(world, small_disk):
    bare, _clone = world
    clone_dir = small_disk / "clone"
    git(small_disk, "clone", "-q", str(bare), str(clone_dir))
    results = clone_dir / "results"
    run = add_run(results, "alpha")
    before = sorted(p.relative_to(results) for p in (results / "alpha").rglob("*"))
    filler = small_disk / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    with pytest.raises(SitebenchError, match="could not commit"):
        exchange.publish("alpha", results)
    assert sorted(p.relative_to(results) for p in (results / "alpha").rglob("*")) == before
    filler.unlink()
    done = exchange.publish("alpha", results)
    assert done.published and done.runs == [run]
    assert remote_runs(bare)[0] == {"alpha": [run]}


def test_pull_clones_a_separate_results_repository(tmp_path, monkeypatch):
    """The separate repository: runs at its top, results/ (here $SITEBENCH_RESULTS_DIR) a
    clone of it made by pull."""
    sites = tmp_path / "sites"
    (sites / "site-configs/alpha").mkdir(parents=True)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(sites))
    bare = tmp_path / "results.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "README.md").write_text("results of our sites\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed")
    git(seed, "push", "-q", str(bare), "main")
    one, two = tmp_path / "one", tmp_path / "two"
    assert exchange.pull(one, remote=str(bare)) == []
    run = add_run(one, "alpha")
    assert exchange.publish("alpha", one, remote=str(bare)).published
    assert git(bare, "ls-tree", "--name-only", "main").split() == ["README.md", "alpha"]
    assert exchange.pull(two, remote=str(bare)) == [("alpha", [run])]
    assert (two / "alpha" / run / "report.json").is_file()


def test_stale_sites_are_those_whose_newest_run_is_older_than_n_days(tmp_path):
    import datetime as dt

    from sitebench.results.staleness import stale_sites

    for site, day in (("fresh", 23), ("stopped", 10), ("stopped", 2)):
        (tmp_path / site / f"202611{day:02d}T020000Z-abcdef").mkdir(parents=True)
    (tmp_path / "fresh" / ".incoming-20261124T020000Z-abcdef").mkdir()
    now = dt.datetime(2026, 11, 24, 5, tzinfo=dt.timezone.utc)
    assert stale_sites(tmp_path, 3, now) == [
        ("stopped", dt.datetime(2026, 11, 10, 2, tzinfo=dt.timezone.utc))
    ]
    assert stale_sites(tmp_path, 30, now) == []
    assert [s for s, _ in stale_sites(tmp_path, 0.5, now)] == ["stopped", "fresh"]

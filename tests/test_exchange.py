"""The results exchange through git (src/sitebench/results/exchange.py), with real parts: a
bare repository on this machine is the shared remote (a file path, no daemon), each site a
results directory of its own with its own key and trust list (tests/exchange_world.py); the
runs are copies of a real committed run of results/local/. The hostile sites are in
test_hostile_sites.py."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, small_tmpfs
from exchange_world import TEMPLATE, World, git, tree_bytes
from sitebench.common.errors import SitebenchError
from sitebench.results import exchange, trust, verify

SITES = ("alpha", "beta", "gamma", "delta")


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    w.make_remote()
    return w


def trusting_each_other(world, names=SITES):
    sites = [world.site(n) for n in names]
    for site in sites:
        site.trusts(*[s for s in sites if s is not site])
    return sites


def remote_runs(bare, prefix=""):
    """{site: [runs]} in the shared branch, and every report.json ever added."""
    runs = {}
    for line in git(bare, "ls-tree", "-r", "--name-only", "main").stdout.splitlines():
        parts = line[len(prefix) :].split("/")
        if line.startswith(prefix) and len(parts) >= 3:
            runs.setdefault(parts[0], set()).add(parts[1])
    added = git(bare, "log", "--diff-filter=A", "--name-only", "--format=", "main").stdout
    reports = [ln for ln in added.splitlines() if ln.endswith("/report.json")]
    return {s: sorted(r) for s, r in runs.items()}, reports


def test_four_sites_publish_five_runs_each_at_once_signed(world):
    sites = trusting_each_other(world)
    made, errors = {}, []

    def site_night(site):
        for _ in range(5):
            made.setdefault(site.name, []).append(site.new_run())
            proc = site.cli(
                "publish", "--site", site.name, "--remote", str(world.bare), "--retries", "20"
            )
            if proc.returncode != 0:
                errors.append(proc.stdout + proc.stderr)

    threads = [threading.Thread(target=site_night, args=(s,)) for s in sites]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    runs, reports = remote_runs(world.bare)
    assert runs == {name: sorted(made[name]) for name in SITES}
    assert len(reports) == 20 and len(set(reports)) == 20  # each exactly once
    # A late site that trusts them all gets the 20 runs, byte for byte.
    late = world.site("late")
    late.trusts(*sites)
    pulled = late.pull()
    assert pulled.refused == [] and sum(len(r) for _, r in pulled.new) == 20
    # Every commit is signed, by the key of the site whose runs it adds.
    signers = f"gpg.ssh.allowedSignersFile={late.home / 'trust' / 'allowed_signers'}"
    for site in sites:
        log = git(world.bare, "-c", signers, "log", "--format=%G? %GK", "main", "--", site.name)
        assert set(log.stdout.splitlines()) == {f"G {verify.fingerprint(site.public)}"}
    # Nothing of another site is written by a pull; a run comes back whole on demand.
    assert not (late.results / "alpha").exists()
    got = late.show("alpha", made["alpha"][0])
    assert got == late.results / "alpha" / made["alpha"][0]
    assert tree_bytes(got) == tree_bytes(TEMPLATE)


@pytest.mark.reliability_fault
def test_remote_unreachable_keeps_the_run_and_a_later_publish_sends_it(world):
    alpha = world.site("alpha")
    first = alpha.new_run()
    assert alpha.publish().published  # connects the results directory
    second = alpha.new_run()
    hidden = world.bare.with_name("shared-away.git")
    world.bare.rename(hidden)
    try:
        done = alpha.publish()
    finally:
        hidden.rename(world.bare)
    assert not done.published and "shared.git" in done.reason and "\n" not in done.reason
    third = alpha.new_run()
    done = alpha.publish()
    assert done.published and done.runs == sorted([second, third])
    assert remote_runs(world.bare)[0] == {"alpha": sorted([first, second, third])}
    again = alpha.publish()
    assert again.published and again.runs == []


def test_incoming_and_example_runs_are_never_published(world):
    """A half-written incoming run, and the example runs the code's checkout commits under
    results/ (tracked by the code's git: examples, not this site's), stay out."""
    alpha = world.site("alpha")
    incoming = alpha.results / "alpha" / ".incoming-20261124T000000Z-abcdef"
    incoming.parent.mkdir(parents=True)
    incoming.mkdir()
    (incoming / "report.json").write_text("{}")
    example = alpha.new_run()
    git(alpha.results, "init", "-q")
    git(alpha.results, "add", f"alpha/{example}")
    git(alpha.results, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "example")
    run = alpha.new_run()
    done = alpha.publish()
    assert done.published and done.runs == [run]
    published = git(world.bare, "ls-tree", "-r", "--name-only", "main").stdout
    assert ".incoming" not in published and example not in published and run in published
    assert incoming.is_dir()


@pytest.mark.reliability_input
@pytest.mark.parametrize("case", ["unknown site", "code remote", "no such path", "not connected"])
def test_bad_configuration_is_refused(world, tmp_path, case):
    alpha = world.site("alpha")
    alpha.new_run()
    site, remote = "alpha", str(world.bare)
    expect = {"unknown site": "nowhere", "code remote": "exchange migrate"}.get(case)
    if case == "unknown site":
        site = "nowhere"
    elif case == "code remote":
        remote = "origin"
    elif case == "no such path":
        remote = expect = str(tmp_path / "gone.git")
    else:
        remote, expect = None, "not connected to a results repository"
    with alpha.act(), pytest.raises(SitebenchError) as err:
        if case == "not connected":
            exchange.pull()
        else:
            exchange.publish(site, remote=remote)
    assert err.value.fix and expect in str(err.value) + err.value.fix


@pytest.mark.reliability_fault
def test_a_remotes_refusal_is_shown_and_not_tried_again(tmp_path):
    """A protected remote (exchange init-remote) refuses a site it does not trust: its
    hook's own words reach the user, after one push, not six."""
    world = World(tmp_path, protected=True)
    alpha, beta = world.site("alpha"), world.site("beta")
    with alpha.act():
        world.make_remote(signers=trust.allowed_signers_file())  # trusts alpha only
    beta.new_run()
    pushes = []
    real_push = exchange.Exchange.push

    def counted(self, commit):
        pushes.append(commit)
        return real_push(self, commit)

    exchange.Exchange.push = counted
    try:
        done = beta.publish(retries=5)
    finally:
        exchange.Exchange.push = real_push
    assert not done.published and len(pushes) == 1
    assert "sitebench: refused" in done.reason and "not trusted here" in done.reason
    run = alpha.new_run()
    assert alpha.publish().published
    assert remote_runs(world.bare)[0] == {"alpha": [run]}


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "attack", ["code", "forged", "force-push", "delete branch", ".git entry", "other branch"]
)
def test_a_protected_remote_refuses_hostile_pushes_itself(tmp_path, attack):
    from exchange_world import commit_as, plumb_commit

    world = World(tmp_path, protected=True)
    alpha, mallory = world.site("alpha"), world.site("mallory")
    alpha.trusts(mallory)
    with alpha.act():
        world.make_remote(signers=trust.allowed_signers_file())
    run = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    run_dir = "mallory/20261126T010101Z-abcdef"
    if attack == "code":
        (clone / "sitebench").write_text("echo pwned\n")
        proc = world.push_as(clone, "results", key=mallory.key)
    elif attack == "forged":
        (clone / "alpha" / "20261126T010101Z-abcdef").mkdir()
        (clone / "alpha" / "20261126T010101Z-abcdef" / "report.json").write_text("{}")
        proc = world.push_as(clone, "results: alpha", key=mallory.key)
    elif attack == "force-push":
        git(clone, "reset", "-q", "--hard", "HEAD~1")
        proc = world.push_as(clone, "rewrite", key=mallory.key, force=True)
    elif attack == "delete branch":
        proc = git(clone, "push", "-q", "origin", ":main", check=False)
    elif attack == ".git entry":
        plumb_commit(clone, {f"{run_dir}/.git/config": ("100644", b"x")}, key=mallory.key)
        proc = git(clone, "push", "-q", "origin", "HEAD:main", check=False)
    else:
        (clone / run_dir).mkdir(parents=True)
        (clone / run_dir / "report.json").write_text("{}")
        commit_as(clone, "r", key=mallory.key)
        proc = git(clone, "push", "-q", "origin", "HEAD:refs/heads/other", check=False)
    assert proc.returncode != 0, attack
    assert git(world.bare, "for-each-ref", "--format=%(refname)").stdout.split() == [
        "refs/heads/main"
    ]
    assert remote_runs(world.bare)[0] == {"alpha": [run]}
    # The honest site goes on publishing.
    later = alpha.new_run()
    assert alpha.publish().published
    assert remote_runs(world.bare)[0] == {"alpha": sorted([run, later])}


def test_the_host_of_a_protected_remote_trusts_a_new_site_with_trust_add_remote(tmp_path):
    """A site joining a repository made by init-remote: its pushes are refused by the hook
    until the host adds its key to the repository's own trust list, and again once removed.
    The rewritten files keep the mode the pushing users read them with."""
    world = World(tmp_path, protected=True)
    alpha, gamma = world.site("alpha"), world.site("gamma")
    with alpha.act():
        world.make_remote(signers=trust.allowed_signers_file())
    signers = world.bare / "sitebench" / "allowed_signers"
    signers.chmod(0o644)
    gamma.new_run()
    sent = gamma.publish()
    assert not sent.published and "not trusted" in sent.reason, sent
    assert f"trust add SITE KEYFILE --remote {world.bare}" in sent.reason, sent

    host = alpha  # the admin of the host that keeps the repository
    added = host.cli("trust", "add", "gamma", f"{gamma.key}.pub", "--remote", str(world.bare))
    assert added.returncode == 0 and str(signers) in added.stdout, added.stderr
    assert oct(signers.stat().st_mode & 0o777) == "0o644"
    listed = host.cli("trust", "list", "--remote", str(world.bare)).stdout
    assert "gamma" in listed and "alpha" in listed
    # This site's own trust list is not the repository's.
    assert "gamma" not in host.cli("trust", "list").stdout
    sent = gamma.publish()
    assert sent.published and len(sent.runs) == 1, sent

    assert host.cli("trust", "remove", "gamma", "--remote", str(world.bare)).returncode == 0
    gamma.new_run()
    assert not gamma.publish().published

    # Unsigned runs of a named site, if the host allows it (insecure): taken by the hook.
    unsigned = host.cli("trust", "allow-unsigned", "gamma", "--remote", str(world.bare))
    assert unsigned.returncode == 0 and "WARNING" in unsigned.stdout
    clone = world.hostile_clone("gamma")
    (clone / "gamma" / "20261126T020202Z-unsgnd").mkdir(parents=True)
    (clone / "gamma" / "20261126T020202Z-unsgnd" / "report.json").write_text("{}")
    assert world.push_as(clone, "results: gamma").returncode == 0


def test_trust_remote_refuses_a_directory_that_is_not_a_hosted_repository(tmp_path):
    world = World(tmp_path)
    world.make_remote()  # plain git: no trust list of its own
    alpha = world.site("alpha")
    proc = alpha.cli("trust", "list", "--remote", str(world.bare))
    assert proc.returncode == 2 and "not a results repository made by" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_allow_unsigned_takes_that_sites_unsigned_runs_and_no_other(tmp_path):
    world = World(tmp_path)
    world.make_remote()
    beta = world.site("beta")
    clone = world.hostile_clone("delta")
    for site in ("delta", "omega"):
        (clone / site / "20261126T030303Z-unsgnd").mkdir(parents=True)
        (clone / site / "20261126T030303Z-unsgnd" / "report.json").write_text("{}")
        world.push_as(clone, f"results: {site}")
    pulled = beta.pull()
    assert pulled.new == [] and len(pulled.refused) == 2, pulled
    assert beta.cli("trust", "allow-unsigned", "delta").returncode == 0
    # Refused commits stay refused, and count for nothing: each commit is judged against
    # the last one accepted, so delta's next unsigned commit is taken once it no longer
    # carries omega's refused run (it brings its own refused run again, now allowed).
    shutil.rmtree(clone / "omega")
    (clone / "delta" / "20261126T040404Z-unsgnd").mkdir(parents=True)
    (clone / "delta" / "20261126T040404Z-unsgnd" / "report.json").write_text("{}")
    world.push_as(clone, "results: delta")
    pulled = beta.pull()
    runs = ["20261126T030303Z-unsgnd", "20261126T040404Z-unsgnd"]
    assert pulled.new == [("delta", runs)] and pulled.refused == [], pulled
    assert beta.runs("omega") == []


# ssh-keygen as git calls it to verify (find-principals, verify) or to sign, held where the
# test wants the publish killed: the marker says it got there.
_HOLDING_SSH_KEYGEN = """#!/bin/sh
case " $* " in
  *" -Y $SITEBENCH_TEST_HOLD "*|*" -Y find-principals "*)
    [ "$SITEBENCH_TEST_HOLD" = verify ] || [ "$2" = "$SITEBENCH_TEST_HOLD" ] || exec {real} "$@"
    : > "$SITEBENCH_TEST_HELD"; sleep 30;;
esac
exec {real} "$@"
"""


@pytest.mark.reliability_fault
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("step", ["verifying", "signing", "pushing"])
def test_a_publish_killed_at_any_step_leaves_nothing_to_repair(world, tmp_path, step, sig):
    """Killed (the process group, as systemd, scancel and timeouts do) while it verifies what
    came in, signs its commit, or has its push on the wire (the steps a rebase once spanned):
    the next publish sends the run, the incoming run arrives, nothing is lost or locked."""
    alpha, beta = trusting_each_other(world, ("alpha", "beta"))
    alpha.new_run()
    assert alpha.publish().published
    incoming = beta.new_run()
    assert beta.publish().published  # alpha verifies it on its next publish
    env = {**os.environ, **alpha.env, "PYTHONPATH": str(ROOT / "src")}
    held = tmp_path / "held"
    hook = world.bare / "hooks" / "pre-receive"
    if step == "pushing":
        hook.write_text(f"#!/bin/sh\n: > {held}\nsleep 30\n")
        hook.chmod(0o755)
    else:
        wrapper = tmp_path / "bin" / "ssh-keygen"
        wrapper.parent.mkdir()
        wrapper.write_text(_HOLDING_SSH_KEYGEN.format(real=shutil.which("ssh-keygen")))
        wrapper.chmod(0o755)
        env.update(
            PATH=f"{wrapper.parent}:{env['PATH']}",
            SITEBENCH_TEST_HOLD="verify" if step == "verifying" else "sign",
            SITEBENCH_TEST_HELD=str(held),
        )
    run = alpha.new_run()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sitebench", "publish", "--site", "alpha"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not held.exists() and proc.poll() is None:
        time.sleep(0.05)
    assert held.exists(), proc.communicate()
    os.killpg(proc.pid, getattr(signal, sig))
    proc.wait(timeout=30)
    hook.unlink(missing_ok=True)
    done = alpha.publish()
    assert done.published and done.runs == [run], done
    assert run in remote_runs(world.bare)[0]["alpha"]
    assert (alpha.results / "alpha" / run / "report.json").is_file()
    assert alpha.runs("beta") == [incoming]
    assert tree_bytes(alpha.show("beta", incoming)) == tree_bytes(TEMPLATE)
    leftovers = [p.name for p in (alpha.results / ".exchange").rglob("*.lock")]
    assert leftovers == [] and not list((alpha.results / "beta").glob(".incoming-*"))


def _running(pattern):
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def _fill(filler):
    """Write ``filler`` until its file system is full (ENOSPC)."""
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass


@pytest.mark.reliability_fault
def test_pull_onto_a_full_disk_leaves_no_half_run_and_the_next_pull_completes(tmp_path):
    world = World(tmp_path)
    world.make_remote()
    alpha = world.site("alpha")
    run = alpha.new_run()
    assert alpha.publish().published
    with small_tmpfs(tmp_path / "small", "2m") as mnt:
        beta = world.site("beta")
        beta.trusts(alpha)
        beta.env["SITEBENCH_RESULTS_DIR"] = str(mnt / "results")
        beta.results = mnt / "results"
        with beta.act():
            exchange.open_exchange(None, str(world.bare))
        filler = mnt / "filler"
        _fill(filler)
        with pytest.raises((OSError, SitebenchError)):
            beta.pull()
        assert not (beta.results / "alpha" / run).exists()
        assert not list((beta.results / "alpha").glob(".incoming-*"))
        filler.unlink()
        assert beta.pull().new == [("alpha", [run])]
        assert not (beta.results / "alpha").exists()  # another site's run stays in git
        # Written out on demand onto a full disk: nothing half written, the next one whole.
        _fill(filler)
        with pytest.raises((OSError, SitebenchError)):
            beta.show("alpha", run)
        assert not (beta.results / "alpha" / run).exists()
        assert not list((beta.results / "alpha").glob(".incoming-*"))
        filler.unlink()
        assert tree_bytes(beta.show("alpha", run)) == tree_bytes(TEMPLATE)


def test_migrating_from_runs_shared_through_the_codes_remote(tmp_path):
    """The old layout: the sites' checkouts share a remote with the code, runs at
    results/<site>/<run>/. Pull refuses until `exchange migrate`; then runs come through the
    exchange and the code's checkout is never changed again, whatever is pushed."""
    world = World(tmp_path)
    alpha, beta = world.site("alpha"), world.site("beta")
    beta.trusts(alpha)
    shared = tmp_path / "code-and-results.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(shared)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "code.py").write_text("print('code')\n")
    (seed / "results").mkdir()
    old_run = alpha.new_run()
    subprocess.run(["cp", "-r", str(alpha.results / "alpha"), str(seed / "results")], check=True)
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code + a run")
    git(seed, "push", "-q", str(shared), "main")
    checkout = tmp_path / "beta-checkout"
    git(tmp_path, "clone", "-q", str(shared), str(checkout))
    (world.sites_root / "site-configs" / "beta" / "site.yaml").write_text(
        "results: {remote: origin, branch: main}\n"
    )
    (world.sites_root / "environments" / "beta").mkdir(parents=True)
    (world.sites_root / "environments" / "beta" / "spack.yaml").write_text("spack: {}\n")
    beta.env["SITEBENCH_RESULTS_DIR"] = str(checkout / "results")
    beta.results = checkout / "results"
    refused = beta.cli("pull", "--site", "beta")
    assert refused.returncode == 2 and "exchange migrate" in refused.stderr, refused.stderr
    migrated = beta.cli("exchange", "migrate", "--site", "beta")
    assert migrated.returncode == 0, migrated.stderr
    # alpha goes on publishing to the old shared remote (prefix results/), signed; a hostile
    # push changes the code there.
    alpha_checkout = tmp_path / "alpha-checkout"
    git(tmp_path, "clone", "-q", str(shared), str(alpha_checkout))
    new_run = alpha.new_run()
    subprocess.run(
        [
            "cp",
            "-r",
            str(alpha.results / "alpha" / new_run),
            str(alpha_checkout / "results/alpha"),
        ],
        check=True,
    )
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={alpha.key}"]
    git(alpha_checkout, "add", "-A")
    git(
        alpha_checkout,
        *sign,
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@a",
        "commit",
        "-q",
        "-S",
        "-m",
        "r",
    )
    (alpha_checkout / "code.py").write_text("open('PWNED', 'w')\n")
    git(alpha_checkout, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qam", "results")
    git(alpha_checkout, "push", "-q", "origin", "main")
    head = git(checkout, "rev-parse", "HEAD").stdout
    pulled = beta.cli("pull", "--site", "beta")
    assert pulled.returncode == 3, pulled.stdout + pulled.stderr
    assert f"pulled alpha: 1 new run ({new_run}" in pulled.stdout
    assert "code.py" in pulled.stdout and "not a run file" in pulled.stdout
    assert git(checkout, "rev-parse", "HEAD").stdout == head
    assert "print('code')" in (checkout / "code.py").read_text()
    assert (checkout / "results" / "alpha" / old_run).is_dir()


def test_trust_commands_refuse_what_is_not_one_public_key(world, tmp_path):
    alpha, beta = world.site("alpha"), world.site("beta")
    two = tmp_path / "two.pub"
    two.write_text(f"{alpha.public}\n{beta.public}\n")
    for bad, why in ((alpha.key, "not one SSH public key"), (two, "2 key lines")):
        proc = beta.cli("trust", "add", "alpha", str(bad))
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert beta.cli("trust", "add", "alpha", f"{alpha.key}.pub").returncode == 0
    listed = beta.cli("trust", "list").stdout
    assert "alpha" in listed and verify.fingerprint(alpha.public) in listed
    assert beta.cli("trust", "remove", "alpha").returncode == 0
    assert "alpha" not in beta.cli("trust", "list").stdout
    unsigned = beta.cli("trust", "allow-unsigned", "gamma")
    assert "WARNING" in unsigned.stdout and "UNSIGNED" in beta.cli("trust", "list").stdout


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


def test_report_reads_another_sites_run_from_git_and_its_curves_once_shown(world):
    """The report takes another site's run from the exchange (figures, provenance, cases);
    what lives in its outputs (OSU curves) shows once ./sitebench show wrote the run out."""
    from sitebench.report import data

    alpha, beta = trusting_each_other(world, ("alpha", "beta"))
    curves_run = ROOT / "results/local/20261125T095540Z-bb645e"  # a run with OSU curves
    run = alpha.new_run()
    shutil.rmtree(alpha.results / "alpha" / run)
    shutil.copytree(curves_run, alpha.results / "alpha" / run)
    assert alpha.publish().published and beta.pull().new == [("alpha", [run])]
    said = []
    with beta.act():
        before = data.load(warn=said.append)
        beta.show("alpha", run)
        after = data.load(warn=said.append)
    assert said == [] and before.sites == ["alpha"] and list(before.runs.run) == [run]
    assert before.runs.origin.iloc[0].startswith("exchange ")
    assert len(before.figures) == len(after.figures) > 0
    assert len(before.curves) == 0 < len(after.curves)


def test_a_remote_that_ignores_the_blob_filter_sends_runs_whole_and_pull_says_so(world):
    """A server without uploadpack.allowFilter (an old one, or one not made by init-remote,
    reached without the copy's upload-pack settings): everything arrives, every file is
    sized at pull as before, and show writes the run from what is here."""
    alpha, beta = trusting_each_other(world, ("alpha", "beta"))
    run = alpha.new_run()
    assert alpha.publish().published
    with beta.act():
        ex = exchange.open_exchange(None, str(world.bare))
    ex.git("config", "--unset", f"remote.{exchange.PROMISOR}.uploadpack")
    pulled = beta.pull()
    assert pulled.whole and pulled.new == [("alpha", [run])], pulled
    listing = git(ex.git_dir, "rev-list", "--objects", "--missing=print", "--all").stdout
    assert not [line for line in listing.split() if line.startswith("?")]
    assert tree_bytes(beta.show("alpha", run)) == tree_bytes(TEMPLATE)
    told = beta.cli("pull")
    assert told.returncode == 0 and "pulled: no new runs" in told.stdout, told


def test_upgrade_remote_gives_an_old_hook_this_versions_checks_and_keeps_its_trust(tmp_path):
    """A repository init-remote made with an older sitebench whose hook refuses
    ``figures.json`` (made here from today's hook with that name taken out): a run carrying
    one is refused until the host runs ``exchange upgrade-remote``, which changes the hook
    alone (trust list and limits byte for byte the same). A directory init-remote did not
    make is refused, naming what to give."""
    from sitebench.results import figures_file

    world = World(tmp_path, protected=True)
    alpha = world.site("alpha")
    with alpha.act():
        world.make_remote(signers=trust.allowed_signers_file())
    hook = world.bare / "hooks" / "pre-receive"
    text = hook.read_text()
    old = 'RUN_TOP_FILES = ("report.json", "figures.json")'
    assert old in text
    hook.write_text(text.replace(old, 'RUN_TOP_FILES = ("report.json",)'))
    kept = {p.name: p.read_bytes() for p in (world.bare / "sitebench").iterdir()}
    run = alpha.new_run()
    figures_file.write(alpha.results / "alpha" / run)
    refused = alpha.publish()
    assert not refused.published and "figures.json" in refused.reason, refused

    upgraded = alpha.cli("exchange", "upgrade-remote", str(world.bare))
    assert upgraded.returncode == 0 and "trust and limits kept" in upgraded.stdout, upgraded
    assert hook.read_text() == text and os.access(hook, os.X_OK)
    assert {p.name: p.read_bytes() for p in (world.bare / "sitebench").iterdir()} == kept
    sent = alpha.publish()
    assert sent.published and sent.runs == [run], sent
    assert run in remote_runs(world.bare)[0]["alpha"]

    plain = tmp_path / "plain.git"
    subprocess.run(["git", "init", "-q", "--bare", str(plain)], check=True)
    proc = alpha.cli("exchange", "upgrade-remote", str(plain))
    assert proc.returncode == 2 and "not a results repository made by" in proc.stderr
    assert "Traceback" not in proc.stderr

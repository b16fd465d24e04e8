"""Refused commits judged again (``./sitebench exchange quarantine --rejudge``) once this
site's trust list is fixed, through a real bare repository with real signed commits and
plain git pushes: the runs a site published while its key was not trusted here come back
byte for byte; a commit refused for what it is (a file outside the runs, a key still not
trusted) stays refused with its reason; an unknown commit id is a clear error."""

import json
import time

import pytest

from exchange_world import World, git, tree_bytes
from sitebench.results import exchange, quarantine, rejudge, retention, store

pytestmark = pytest.mark.reliability_input


def _hostile_run(world, key, name, extra=None):
    """A run of mallory pushed with plain git (signed with ``key``), plus ``extra`` files."""
    clone = world.hostile_clone()
    run = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{name}"
    (clone / "mallory" / run).mkdir(parents=True)
    (clone / "mallory" / run / "report.json").write_text("{}")
    for path, text in (extra or {}).items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    assert world.push_as(clone, f"results: mallory {name}", key=key).returncode == 0
    return run, git(clone, "rev-parse", "HEAD").stdout.strip()


def _world(tmp_path):
    """beta trusts gamma and mallory, not yet alpha (the admin had not run trust add);
    alpha and gamma trust each other."""
    world = World(tmp_path)
    world.make_remote()
    alpha, beta, gamma = world.site("alpha"), world.site("beta"), world.site("gamma")
    mallory, eve = world.site("mallory"), world.site("eve")
    alpha.trusts(gamma, mallory)
    gamma.trusts(alpha, mallory)
    beta.trusts(gamma, mallory)
    return world, alpha, beta, gamma, mallory, eve


def test_runs_refused_under_an_unfixed_trust_list_come_back_and_real_refusals_stay(tmp_path):
    world, alpha, beta, gamma, mallory, eve = _world(tmp_path)
    first_gamma = gamma.new_run()
    assert gamma.publish().published
    first = alpha.new_run()
    assert alpha.publish().published
    # Refused for what they are: a file outside the runs (signed by a key trusted here),
    # a run signed by a key nobody trusts.
    _, outside = _hostile_run(world, mallory.key, "outside", {"tools/evil.sh": "rm -rf /\n"})
    eve_run, by_eve = _hostile_run(world, eve.key, "eve")
    second = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and len(sent.refused) == 2, sent
    last_gamma = gamma.new_run()
    assert gamma.publish().published

    # gamma's last commit holds alpha's runs too (gamma took them in): refused as well.
    pulled = beta.pull()
    assert pulled.new == [("gamma", [first_gamma])], pulled
    reasons = " | ".join(pulled.refused)
    assert len(pulled.refused) == 5 and "not trusted here" in reasons, pulled.refused
    assert "a key trusted for gamma only" in reasons, reasons
    assert beta.runs("alpha") == [] and beta.runs("gamma") == [first_gamma]
    # The list fixed: a pull alone never looks at the refused commits again.
    added = beta.cli("trust", "add", "alpha", f"{alpha.key}.pub")
    assert added.returncode == 0, added
    assert added.stdout.splitlines()[-1] == (
        "5 commit(s) refused here before stay refused: ./sitebench exchange "
        "quarantine --rejudge judges them again under this list"
    ), added.stdout
    again = beta.pull()
    assert again.new == [] and again.refused == [], again
    assert beta.runs("alpha") == []

    done = beta.cli("exchange", "quarantine", "--rejudge")
    assert done.returncode == exchange.REFUSED_EXIT, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    accepted = [ln for ln in lines if ln.startswith("accepted ")]
    assert len(accepted) == 3, done.stdout
    assert sum(" alpha: 1 run(s) taken (alpha/" in ln for ln in accepted) == 2, accepted
    assert sum(f"1 run(s) taken (gamma/{last_gamma})" in ln for ln in accepted) == 1, accepted
    refused = {ln.split()[2]: ln for ln in lines if ln.startswith("still refused ")}
    assert set(refused) == {outside[:12], by_eve[:12]}, done.stdout
    # Each with the reason the pull gave (eve's commit adds mallory's file too, against
    # the last commit accepted here: refused for that first, then as now).
    said = {commit: reason for _, commit, reason in pulled.refusals}
    for commit in (outside, by_eve):
        assert refused[commit[:12]].endswith(f": {said[commit]}"), (refused, said)
    assert "tools/evil.sh" in said[outside] and "not a run file" in said[outside], said

    # Byte for byte what alpha published, in the store as after a pull.
    assert beta.runs("alpha") == sorted([first, second])
    assert beta.runs("gamma") == sorted([first_gamma, last_gamma])
    for run in (first, second):
        assert tree_bytes(beta.show("alpha", run)) == tree_bytes(alpha.results / "alpha" / run)
    with beta.act():
        store.refresh("alpha")
        indexed = json.loads((store.store_dir() / "alpha" / "runs.json").read_text())["runs"]
    assert sorted(indexed) == sorted([first, second])
    assert eve_run not in beta.runs("mallory")
    ex = exchange.Exchange(beta.results)
    held = quarantine.refs(ex.git_dir)
    assert outside in held and by_eve in held and len(held) == 2, held
    assert set(rejudge.accepted_before(ex)) == set(pulled.left_out) - {outside, by_eve}

    # The accepted ref moved to the branch's tip, as a pull would have moved it: beta's next
    # publish builds on a tree holding alpha's and gamma's runs, and alpha takes it.
    tip = git(world.bare, "rev-parse", "main").stdout.strip()
    assert ex.rev(exchange.ACCEPTED) == tip
    mine = beta.new_run()
    assert beta.publish().published
    shared = git(world.bare, "ls-tree", "-d", "--name-only", "-r", "main").stdout.split()
    for path in (f"alpha/{first}", f"alpha/{second}", f"gamma/{last_gamma}", f"beta/{mine}"):
        assert path in shared, shared
    alpha.trusts(beta)
    taken = alpha.pull()
    assert dict(taken.new) == {"beta": [mine], "gamma": [last_gamma]}, taken
    assert taken.refused == [], taken

    # Said once: a second re-judgement and a pull take nothing twice.
    before = {p: p.read_bytes() for p in (ex.git_dir / exchange.RUNS_LOG).glob("*.tsv")}
    twice = beta.cli("exchange", "quarantine", "--rejudge")
    assert twice.returncode == exchange.REFUSED_EXIT, twice
    assert twice.stdout.count("before (an earlier --rejudge)") == 3, twice.stdout
    later = beta.pull()
    assert later.new == [] and later.refused == [], later
    assert {p: p.read_bytes() for p in before} == before
    listed = beta.cli("exchange", "quarantine").stdout
    marked = {ln.split()[1] for ln in listed.splitlines() if ln.endswith(": accepted)")}
    assert marked == {c[:12] for c in rejudge.accepted_before(ex)}, listed
    assert len(listed.splitlines()) == 5, listed  # the record kept
    with beta.act():
        counted = {row.site: row.refused for row in retention.status(ex)}
    assert counted.get("alpha") == 0 and counted.get("gamma") == 0, counted


def test_a_commit_still_refused_keeps_its_reason_and_one_asked_by_id(tmp_path):
    world, alpha, beta, gamma, mallory, eve = _world(tmp_path)
    assert beta.pull().refused == []
    _, by_eve = _hostile_run(world, eve.key, "eve")
    assert len(beta.pull().refused) == 1
    beta.trusts(alpha)  # not eve
    ex = exchange.Exchange(beta.results)
    logged = quarantine.log_rows(ex.git_dir)
    done = beta.cli("exchange", "quarantine", "--rejudge", by_eve[:9])
    assert done.returncode == exchange.REFUSED_EXIT, done
    assert done.stdout.startswith(f"still refused {by_eve[:12]} mallory: ")
    assert "not trusted here" in done.stdout, done.stdout
    # Same reason: the record is not written again; the commit is still held.
    assert quarantine.log_rows(ex.git_dir) == logged
    assert by_eve in quarantine.refs(ex.git_dir) and not rejudge.accepted_before(ex)


@pytest.mark.parametrize("asked", ["0123456789ab", "not-a-commit", "12"])
def test_rejudging_an_unknown_commit_says_what_to_give(tmp_path, asked):
    world, alpha, beta, gamma, mallory, eve = _world(tmp_path)
    alpha.new_run()
    assert alpha.publish().published
    assert len(beta.pull().refused) == 1
    ex = exchange.Exchange(beta.results)
    logged = quarantine.log_rows(ex.git_dir)
    done = beta.cli("exchange", "quarantine", "--rejudge", asked)
    assert done.returncode == 2, done
    assert f"{asked!r} is not a commit refused here" in done.stderr, done.stderr
    assert "./sitebench exchange quarantine lists it" in done.stderr, done.stderr
    assert quarantine.log_rows(ex.git_dir) == logged and not rejudge.accepted_before(ex)


@pytest.mark.reliability_fault
def test_a_rejudge_killed_before_its_records_is_done_again_whole(tmp_path, monkeypatch):
    """Killed after the runs were taken and the accepted ref moved, before the quarantine
    records: the next --rejudge finishes it, each run logged once."""
    world, alpha, beta, gamma, mallory, eve = _world(tmp_path)
    run = alpha.new_run()
    assert alpha.publish().published
    [(_, commit, _)] = beta.pull().refusals
    beta.trusts(alpha)

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(rejudge, "_record", killed)
    with beta.act(), pytest.raises(KeyboardInterrupt):
        rejudge.rejudge()
    monkeypatch.undo()
    ex = exchange.Exchange(beta.results)
    assert beta.runs("alpha") == [run] and not rejudge.accepted_before(ex)
    with beta.act():
        done = rejudge.rejudge()
    assert done.accepted == [(commit, "alpha", [])], done  # its run was taken already
    logged = (ex.git_dir / exchange.RUNS_LOG / "alpha.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in logged] == [run], logged
    assert len(rejudge.accepted_before(ex)) == 1 and quarantine.refs(ex.git_dir) == {}

"""The federation's registry of sites and keys (results/README.md, "Keys and the registry"),
end to end between three sites and a host through a real bare repository, plain
(``git init --bare``) and protected (``exchange init-remote``): sites registered by the
host and imported with its pinned key, a key rotated under the old one, a key revoked and
the runs it signed after its time retracted, a late joiner; and the hostile registry
changes, pushed with plain git, each refused with its reason while the others go on."""

import json
import time

import pytest

from exchange_world import World, git
from sitebench.common.errors import SitebenchError
from sitebench.results import exchange, registry, store, verify

pytestmark = pytest.mark.reliability_input

REG = verify.REGISTRY_FILE


def _federation(tmp_path, protected):
    """A host (its registry key pinned by every site) that registered alpha and beta; both
    imported the registry: neither trusts the other but through it."""
    world = World(tmp_path, protected=protected)
    host, alpha, beta = world.site("host"), world.site("alpha"), world.site("beta")
    with host.act():
        # The protected remote's hook pins the host key init-remote made.
        world.make_remote(signers=world.trust_file("host"))
    assert host.cli("pull", "--remote", str(world.bare)).returncode == 0
    told = host.cli("trust", "host-key")
    assert told.returncode == 0, told
    world.host_fp = told.stdout.splitlines()[1].split(": ", 1)[0]
    for site in (alpha, beta):
        done = host.cli("trust", "register", site.name, f"{site.key}.pub")
        assert done.returncode == 0 and "registered" in done.stdout, done
    again = host.cli("trust", "register", "alpha", f"{beta.key}.pub")
    assert again.returncode == 2 and "alpha is registered already" in again.stderr, again
    for site in (alpha, beta):
        assert site.cli("pull", "--remote", str(world.bare)).returncode == 0
        done = site.cli("trust", "import", "--host", world.host_fp)
        assert done.returncode == 0 and "imported 2 key(s) of 2 site(s)" in done.stdout, done
    return world


def _registered(world, site):
    text = git(world.bare, "show", f"main:{REG}").stdout
    return [line for line in text.splitlines() if line.startswith(f"{site} ")]


def _indexed(site, other):
    with site.act():
        store.refresh(other.name)
        path = store.store_dir() / other.name / "runs.json"
        return sorted(json.loads(path.read_text())["runs"])


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
def test_keys_rotated_revoked_retracted_and_a_late_joiner_between_three_sites(tmp_path, protected):
    world = _federation(tmp_path, protected)
    host, alpha, beta = world.site("host"), world.site("alpha"), world.site("beta")
    first = alpha.new_run()
    assert alpha.publish().published
    assert beta.pull().new == [("alpha", [first])]  # alpha's key came from the registry

    # Rotation: alpha's new key announced under its old one; beta learns it on pull and
    # takes the run the new key signed in the same pull.
    old_key = alpha.key.read_bytes()
    done = alpha.cli("trust", "rotate", "alpha")
    assert done.returncode == 0 and "new key" in done.stdout, done
    assert alpha.key.read_bytes() != old_key
    second = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [second], sent
    pulled = beta.pull()
    assert pulled.new == [("alpha", [second])] and pulled.refused == [], pulled
    listed = beta.cli("trust", "list").stdout
    rows = [line for line in listed.splitlines() if line.startswith("alpha ")]
    assert len(rows) == 2 and any("valid-before=" in row for row in rows), listed
    # The old key signs nothing new: a thief's commit with it is refused.
    retired = next(alpha.key.parent.glob("alpha.retired-*[!b]"))
    clone = world.hostile_clone()
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-stolen"
    (clone / "alpha" / name).mkdir(parents=True)
    (clone / "alpha" / name / "report.json").write_text("{}")
    pushed = world.push_as(clone, "results: alpha", key=retired)
    assert (pushed.returncode != 0) == protected, pushed.stderr
    if not protected:
        assert "not at the commit's time" in " | ".join(beta.pull().refused)

    # Revocation shared: beta's key is stolen at `since`; alpha accepted a run signed
    # after it before the host's revocation reached it. The revocation retracts it.
    before = beta.new_run()
    assert beta.publish().published
    time.sleep(1.2)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    time.sleep(1.2)
    stolen = beta.new_run()
    assert beta.publish().published
    assert alpha.pull().new == [("beta", sorted([before, stolen]))]
    assert _indexed(alpha, beta) == sorted([before, stolen])
    done = host.cli("trust", "revoke", "beta", "--since", since, "--shared")
    assert done.returncode == 0 and "every site learns it" in done.stdout, done
    assert any('valid-before="' in line for line in _registered(world, "beta"))
    alpha.pull()
    assert 'valid-before="' in alpha.cli("trust", "list").stdout.split("beta", 1)[1]
    assert _indexed(alpha, beta) == [before]  # out of compare, regressions, references
    assert sorted(exchange.Exchange(alpha.results).accepted_runs("beta")["beta"]) == sorted(
        [before, stolen]
    )  # kept aside, not deleted
    status = alpha.cli("exchange", "status")
    assert status.returncode == 0 and "1 run(s) of beta retracted" in status.stdout, status
    assert stolen in status.stdout
    with alpha.act():
        assert list(registry.retracted(exchange.Exchange(alpha.results))["beta"]) == [stolen]

    # A late joiner: gamma pins the host's key and the history alpha accepted, and takes
    # the registry and the runs: the rotated key's, never the revoked key's late one.
    gamma = world.site("gamma")
    assert host.cli("trust", "register", "gamma", f"{gamma.key}.pub").returncode == 0
    alpha.pull()
    pinned = alpha.cli("exchange", "accepted").stdout.split()[0]
    done = gamma.cli("trust", "import", "--host", world.host_fp)
    assert done.returncode == 0, done
    joined = gamma.cli("pull", "--remote", str(world.bare), "--expect", pinned)
    assert joined.returncode in (0, 3), joined
    assert gamma.runs("alpha") == sorted([first, second])
    assert gamma.runs("beta") == [before]
    mine = gamma.new_run()
    assert gamma.publish().published
    got = alpha.pull()
    assert got.new == [("gamma", [mine])], got
    # What alpha signs from now on leaves the retracted run out (named): gamma, which never
    # took it, and beta, whose run it is, accept alpha's commit; alpha can still read it.
    third = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [third], sent
    assert git(world.bare, "ls-tree", "main", "--", f"beta/{stolen}").stdout == ""
    assert git(world.bare, "ls-tree", "main", "--", f"beta/{before}").stdout != ""
    for site in (gamma, beta):
        got = site.pull()
        assert ("alpha", [third]) in got.new, got
    assert (alpha.show("beta", stolen) / "report.json").is_file()
    assert _indexed(alpha, beta) == [before]


def _pub(site):
    return " ".join(site.public.split()[:2])


HOSTILE = {
    "a non-host commit registering a site": (
        lambda w: (w.site("mallory").key, lambda t: t + f"mallory {_pub(w.site('mallory'))}\n"),
        "only the host registers a site",
    ),
    "a registry rewrite": (
        lambda w: (
            w.site("host").home / "keys" / registry.HOST_KEY,
            lambda t: "".join(ln + "\n" for ln in t.splitlines() if not ln.startswith("beta ")),
        ),
        "rewrites or removes earlier entries",
    ),
    "a second site claiming an existing name": (
        lambda w: (w.site("beta").key, lambda t: t + f"alpha {_pub(w.site('mallory'))}\n"),
        "a second site claiming the name alpha",
    ),
    "a rotation signed by neither the old key nor the host": (
        lambda w: (
            w.site("mallory").key,
            lambda t: t
            + f'alpha valid-before="20261101000000Z" {_pub(w.site("alpha"))}\n'
            + f"alpha {_pub(w.site('mallory'))}\n",
        ),
        "neither the host's key nor alpha's",
    ),
    "a registry change with a run": (
        lambda w: (
            w.site("host").home / "keys" / registry.HOST_KEY,
            lambda t: t + f"mallory {_pub(w.site('mallory'))}\n",
        ),
        "a registry change is a commit of its own",
    ),
}


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_registry_change_is_refused_and_the_others_go_on(tmp_path, protected, case):
    world = _federation(tmp_path, protected)
    alpha, beta = world.site("alpha"), world.site("beta")
    world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published
    make, reason = HOSTILE[case]
    key, edit = make(world)
    clone = world.hostile_clone()
    (clone / REG).write_text(edit((clone / REG).read_text()))
    if case == "a registry change with a run":
        (clone / "mallory" / first).mkdir(parents=True)
        (clone / "mallory" / first / "report.json").write_text("{}")
    pushed = world.push_as(clone, "registry", key=key)
    assert (pushed.returncode != 0) == protected, pushed.stderr
    if protected:
        assert reason in pushed.stderr, pushed.stderr
    else:
        refused = " | ".join(beta.pull().refused)
        assert reason in refused, refused
    second = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [second], sent
    assert beta.pull().new == [("alpha", sorted({first, second} - set(beta.runs("alpha"))))] or (
        beta.runs("alpha") == sorted([first, second])
    )
    assert beta.runs("alpha") == sorted([first, second])
    # The registry on the remote read with plain git holds no refused line.
    text = git(world.bare, "show", f"main:{REG}").stdout
    assert "mallory" not in text and len(_registered(world, "beta")) == 1
    assert len(_registered(world, "alpha")) == 1


# -- one key per site: what the registry brings against what this site trusts already -----


def _announced_by_mallory(world, key):
    """mallory (registered) ends its key and announces ``key`` (a public key line anyone
    can copy) as its next one: a rotation the registry's own rules accept, pushed with
    plain git."""
    mallory = world.site("mallory")
    clone = world.hostile_clone()
    text = (clone / REG).read_text()
    ends = registry.utc(time.time() + 60)
    text += f'mallory valid-before="{ends}" {_pub(mallory)}\nmallory {key}\n'
    (clone / REG).write_text(text)
    return world.push_as(clone, "registry: mallory rotated", key=mallory.key)


def _with_mallory(tmp_path):
    world = _federation(tmp_path, protected=False)
    mallory = world.site("mallory")
    done = world.site("host").cli("trust", "register", "mallory", f"{mallory.key}.pub")
    assert done.returncode == 0, done
    return world


def test_a_registry_giving_a_key_trusted_here_for_another_site_is_set_aside(tmp_path):
    """beta trusts gamma's key by hand (gamma is not in the registry); mallory announces
    gamma's public key as its own next key, then pushes a run signed with it. beta's pull
    goes on: alpha's honest run arrives, mallory's line for the key is set aside (named once,
    with the fix), the key signs for gamma only, so mallory's run is refused. Once beta
    drops its line, a pull with nothing new takes the registry line."""
    world = _with_mallory(tmp_path)
    alpha, beta, gamma = world.site("alpha"), world.site("beta"), world.site("gamma")
    assert beta.pull().refused == []  # mallory's key came in with the registry
    beta.trusts(gamma)
    fp = verify.fingerprint(gamma.public)
    assert _announced_by_mallory(world, _pub(gamma)).returncode == 0
    honest = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-copied"
    (clone / "mallory" / name).mkdir(parents=True)
    (clone / "mallory" / name / "report.json").write_text("{}")
    assert world.push_as(clone, "results: mallory", key=gamma.key).returncode == 0

    pulled = beta.pull()
    assert pulled.new == [("alpha", [honest])], pulled
    assert len(pulled.refused) == 1 and "mallory" in pulled.refused[0], pulled.refused
    assert name not in beta.runs("mallory")
    assert len(pulled.set_aside) == 1, pulled.set_aside
    told = pulled.set_aside[0]
    assert told.startswith("mallory: ") and fp in told and "gamma" in told, told
    assert f"./sitebench trust remove gamma --fingerprint {fp} and pull again" in told, told
    signers = beta.home / "trust" / "allowed_signers"
    held = signers.read_text()
    assert f"gamma {gamma.public}" in held and f"mallory {_pub(gamma)}" not in held, held
    assert 'mallory valid-before="' in held, held  # the rest of the registry was taken
    # Every later pull says it, one line, and goes on.
    again = beta.cli("pull", "--remote", str(world.bare))
    assert again.returncode == 0, again
    shown = [ln for ln in again.stdout.splitlines() if ln.startswith("SET ASIDE ")]
    assert shown == [f"SET ASIDE {told}"], again.stdout
    status = beta.cli("exchange", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    aside = [ln for ln in status.stdout.splitlines() if "SET ASIDE" in ln or fp in ln]
    assert aside, status.stdout

    assert beta.cli("trust", "remove", "gamma", "--fingerprint", fp).returncode == 0
    pulled = beta.pull()
    assert pulled.new == [] and pulled.set_aside == [], pulled
    assert f"mallory {_pub(gamma)}" in signers.read_text()
    ex = exchange.Exchange(beta.results)
    assert (
        ex.setting_of(registry.IMPORTED)
        == git(world.bare, "rev-parse", f"main:{REG}").stdout.strip()
    )
    assert not (ex.git_dir / registry.ASIDE).exists()


def test_a_sites_own_key_trusted_here_for_another_site_is_not_trusted_again(tmp_path):
    """gamma, not registered yet, sent its public key around; mallory announces it as its
    own next key. gamma sets its trust directory up anew (the key kept) and takes the
    registry in: its own key now stands for mallory there. Making sure of its key (trust
    key, publish) refuses to trust it for gamma too, changes nothing and says what to
    fix."""
    world = _with_mallory(tmp_path)
    alpha, gamma = world.site("alpha"), world.site("gamma")
    fp = verify.fingerprint(gamma.public)
    assert _announced_by_mallory(world, _pub(gamma)).returncode == 0
    assert alpha.pull().refused == []
    signers = gamma.home / "trust" / "allowed_signers"
    signers.unlink()
    assert gamma.cli("trust", "import", "--host", world.host_fp).returncode == 0
    pinned = alpha.cli("exchange", "accepted").stdout.split()[0]
    joined = gamma.cli("pull", "--remote", str(world.bare), "--expect", pinned)
    assert joined.returncode in (0, 3), joined
    before = signers.read_text()
    assert f"mallory {_pub(gamma)}" in before and "\ngamma " not in f"\n{before}"
    told = gamma.cli("trust", "key", "gamma")
    assert told.returncode == 2, told
    for named in (fp, "gamma and mallory", "one key per site", "this site's own key"):
        assert named in told.stderr, told.stderr
    assert f"./sitebench trust remove SITE --fingerprint {fp}" in told.stderr
    assert "./sitebench trust key gamma" in told.stderr
    assert signers.read_text() == before
    gamma.new_run()
    with pytest.raises(SitebenchError, match="one key per site"):
        gamma.publish()
    assert signers.read_text() == before


@pytest.mark.parametrize("separator", [" ", "\t"], ids=["space", "tab"])
def test_a_hosted_line_of_a_key_the_registry_ended_keeps_it_valid_for_nothing(tmp_path, separator):
    """The host's own list (init-remote) trusts alpha's key by hand too, written before
    the registry (OpenSSH reads a tab after the principal as a blank). alpha rotates; a
    thief's push with the old key is refused by the hook: the registry's line, ending the
    key, takes the place of the hand-written one. With a tab that line was kept beside it
    (the hook read the principal up to a space only), and git took the old key as valid."""
    world = _federation(tmp_path, protected=True)
    alpha = world.site("alpha")
    hosted = world.bare / "sitebench" / "allowed_signers"
    hosted.write_text(hosted.read_text() + f"alpha{separator}{alpha.public}\n")
    done = alpha.cli("trust", "rotate", "alpha")
    assert done.returncode == 0, done
    retired = next(alpha.key.parent.glob("alpha.retired-*[!b]"))
    time.sleep(1.2)  # past the old key's valid-before (whole seconds, both ends included)
    clone = world.hostile_clone()
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-stolen"
    (clone / "alpha" / name).mkdir(parents=True)
    (clone / "alpha" / name / "report.json").write_text("{}")
    pushed = world.push_as(clone, "results: alpha", key=retired)
    assert pushed.returncode != 0 and "not at the commit's time" in pushed.stderr, pushed.stderr
    assert git(world.bare, "ls-tree", "main", "--", f"alpha/{name}").stdout == ""


def test_a_commented_out_key_line_owns_no_key(tmp_path, monkeypatch):
    """An admin comments a key's line out ("# gamma ssh-ed25519 ..."): OpenSSH and git skip
    it, and so does one-key-per-site. The registry giving that key to gamma, and trust add,
    take it (the comment stays); the list names no site "#"."""
    from sitebench.results import trust

    monkeypatch.setenv("SITEBENCH_TRUST_DIR", str(tmp_path / "trust"))
    trust.make_key(tmp_path / "gamma", "gamma")
    public = (tmp_path / "gamma.pub").read_text().strip()
    signers = trust.allowed_signers_file()
    signers.parent.mkdir()
    signers.write_text(f"# gamma {public}\n")
    trust.merge_lines([f"gamma {public}"])
    assert signers.read_text() == f"# gamma {public}\ngamma {public}\n"
    signers.write_text(f"# beta {public}\n")
    assert trust.add("gamma", tmp_path / "gamma.pub") == verify.fingerprint(public)
    assert [row[0] for row in trust.listing()] == ["gamma"]


def test_a_run_refused_while_its_registry_line_was_set_aside_comes_back_on_rejudge(tmp_path):
    """As above, mallory's run arrives signed by the key beta trusted for gamma: refused,
    the registry line set aside. Once beta drops its line, ``exchange quarantine --rejudge``
    takes the line (as a pull would), verifies the run under the list as it is now and takes
    it, byte for byte as pushed; asked before the list was fixed, it stays refused."""
    world = _with_mallory(tmp_path)
    beta, gamma = world.site("beta"), world.site("gamma")
    assert beta.pull().refused == []
    beta.trusts(gamma)
    fp = verify.fingerprint(gamma.public)
    assert _announced_by_mallory(world, _pub(gamma)).returncode == 0
    clone = world.hostile_clone()
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-aside"
    (clone / "mallory" / name).mkdir(parents=True)
    (clone / "mallory" / name / "report.json").write_text('{"runs": []}\n')
    assert world.push_as(clone, "results: mallory", key=gamma.key).returncode == 0
    pushed = git(clone, "rev-parse", "HEAD").stdout.strip()
    pulled = beta.pull()
    assert [c for _, c, _ in pulled.refusals] == [pushed] and pulled.set_aside, pulled

    early = beta.cli("exchange", "quarantine", "--rejudge", pushed)  # the list not fixed yet
    assert early.returncode == exchange.REFUSED_EXIT, early
    assert early.stdout.startswith(f"still refused {pushed[:12]} mallory: "), early.stdout
    removed = beta.cli("trust", "remove", "gamma", "--fingerprint", fp)
    assert removed.returncode == 0 and "1 commit(s) refused here before" in removed.stdout
    assert name not in beta.runs("mallory")
    # No pull needed in between: the line set aside is taken first, as a pull takes it.
    done = beta.cli("exchange", "quarantine", "--rejudge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"accepted {pushed[:12]} mallory: 1 run(s) taken (mallory/{name})\n"
    assert name in beta.runs("mallory")
    assert f"mallory {_pub(gamma)}" in (beta.home / "trust" / "allowed_signers").read_text()
    later = beta.pull()
    assert later.new == [] and later.refused == [] and later.set_aside == [], later
    with beta.act():
        shown = exchange.show("mallory", name)
    assert (shown / "report.json").read_bytes() == b'{"runs": []}\n'
    assert sorted(p.name for p in shown.rglob("*")) == ["report.json"]

"""The hostile-site suite: a site with nothing but ``git push`` to the shared results
repository tries to run code on the others, forge or alter their runs, and crash or mislead
their compare. Each case is pushed with plain git (or git's plumbing) to a real bare
repository between two honest publishes of ``alpha``; then ``alpha`` publishes and ``beta``
pulls and compares. Each asserts: the payload never ran (its marker is absent), nothing
outside the results was read (a secret's text is nowhere), no honest run was lost, the
refusal names its reason, and the honest runs around it arrived."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT
from sitebench.common.errors import SitebenchError
from sitebench.cli import main
from sitebench.results import shared_remote, verify
from exchange_world import (
    TEMPLATE,
    World,
    commit_as,
    git,
    plumb_commit,
    raw_tree,
    signed_trees,
    tree_bytes,
    tree_entries,
    write_commit,
)

pytestmark = pytest.mark.reliability_input

RUN = "20261126T010101Z-h0st1l"


def payload(world):
    """Python that leaves a marker if it is ever run or imported."""
    return f"open({str(world.marker)!r}, 'w').write('ran')\n"


def run_files(world, site="mallory", run=RUN, extra=None):
    """A real run's files at <site>/<run>/ of a hostile clone, as (path: (mode, bytes))."""
    files = {
        f"{site}/{run}/{p.relative_to(TEMPLATE).as_posix()}": ("100644", p.read_bytes())
        for p in TEMPLATE.rglob("*")
        if p.is_file()
    }
    files.update(extra or {})
    return files


def write_tree(clone, files):
    for path, (_, data) in files.items():
        dest = clone / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


# -- the cases: each does its damage in a clone and says the reason it expects -------------


def code(path):
    def case(world, clone, m):
        write_tree(clone, {path: ("100644", payload(world).encode())})
        world.push_as(clone, "results: mallory: 1 run", key=m.key)
        return "not a run file"

    case.__name__ = f"code {path}"
    return case


def mixed_run_and_code(world, clone, m):
    write_tree(clone, run_files(world))
    write_tree(clone, {"src/sitebench/__init__.py": ("100644", payload(world).encode())})
    world.push_as(clone, "results: mallory: 1 run", key=m.key)
    return "not a run file"


def top_level(name):
    def case(world, clone, m):
        plumb_commit(clone, {name: ("100644", b"[submodule]\n")}, key=m.key)
        git(clone, "push", "-q", "origin", "HEAD:main")
        return "not inside a run directory"

    case.__name__ = f"top-level {name}"
    return case


def in_run(name, mode="100644", data=b"x", expect="", site="mallory"):
    def case(world, clone, m):
        files = run_files(world, site=site)
        content = str(world.secret).encode() if data == "SECRET" else data
        files[f"{site}/{RUN}/{name}"] = (mode, content)
        plumb_commit(clone, files, key=m.key)
        git(clone, "push", "-q", "origin", "HEAD:main")
        return expect

    case.__name__ = f"in a run: {name!r} {mode}"
    return case


def symlink_run_dir(world, clone, m):
    plumb_commit(clone, {f"mallory/{RUN}": ("120000", b"../../..")}, key=m.key)
    git(clone, "push", "-q", "origin", "HEAD:main")
    return "not inside a run directory"


def symlink_site_dir(world, clone, m):
    plumb_commit(clone, {"mallory": ("120000", b"/")}, key=m.key)
    git(clone, "push", "-q", "origin", "HEAD:main")
    return "not inside a run directory"


def bad_name(path, expect):
    def case(world, clone, m):
        plumb_commit(clone, {path: ("100644", b"{}")}, key=m.key)
        git(clone, "push", "-q", "origin", "HEAD:main")
        return expect

    case.__name__ = f"name {path!r}"
    return case


def oversized_file(world, clone, m):
    # In perflogs/: every site takes it with the figures, so a pull sizes it (a file of
    # the bulk is sized when the run is written out: test_oversized_bulk_...).
    big = {f"mallory/{RUN}/perflogs/big.bin": ("100644", b"0" * 300_000)}
    write_tree(clone, run_files(world, extra=big))
    world.push_as(clone, "results: mallory", key=m.key)
    return "over the cap of 200000 per file"


def oversized_run(world, clone, m):
    extra = {
        f"mallory/{RUN}/provenance/part{i}.bin": ("100644", bytes([i]) * 150_000) for i in range(8)
    }
    write_tree(clone, run_files(world, extra=extra))
    world.push_as(clone, "results: mallory", key=m.key)
    return "over the cap of 1000000 bytes"


def alpha_run(clone):
    return sorted((clone / "alpha").iterdir())[0]


def edit_published(world, clone, m):
    report = alpha_run(clone) / "report.json"
    report.write_text(report.read_text().replace('"result": "pass"', '"result": "fail"', 1) + " ")
    world.push_as(clone, "results: alpha: fix", key=m.key)
    return "modifies"


def edit_published_signed_by_owner(world, clone, m):
    report = alpha_run(clone) / "report.json"
    report.write_text(report.read_text() + " ")
    world.push_as(clone, "results: alpha: fix", key=world.site("alpha").key)
    return "modifies"


def delete_published(world, clone, m):
    shutil.rmtree(alpha_run(clone))
    world.push_as(clone, "results: alpha: cleanup", key=m.key)
    return "deletes"


def delete_one_file(world, clone, m):
    next(alpha_run(clone).rglob("*.out")).unlink()
    world.push_as(clone, "results: alpha", key=m.key)
    return "deletes"


def extend_published(world, clone, m):
    (alpha_run(clone) / "output" / "extra.json").write_text("{}")
    world.push_as(clone, "results: alpha", key=m.key)
    return "adds files to the published run alpha/"


def forged_in_alphas_name(world, clone, m):
    write_tree(clone, run_files(world, site="alpha"))
    world.push_as(clone, "results: alpha: 1 run", key=m.key)
    return "a key trusted for mallory only"


def forged_unsigned(world, clone, m):
    write_tree(clone, run_files(world, site="alpha"))
    world.push_as(clone, "results: alpha: 1 run")
    return "unsigned commit with runs of alpha"


def own_run_unsigned(world, clone, m):
    write_tree(clone, run_files(world))
    world.push_as(clone, "results: mallory: 1 run")
    return "unsigned commit with runs of mallory"


def untrusted_key(world, clone, m):
    eve = world.site("eve")  # a key nobody trusts
    write_tree(clone, run_files(world))
    world.push_as(clone, "results: mallory: 1 run", key=eve.key)
    return "signed by a key not trusted here"


def bad_signature(world, clone, m):
    write_tree(clone, run_files(world))
    git(clone, "add", "-A")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={m.key}"]
    git(clone, *sign, "-c", "user.name=m", "-c", "user.email=m@m", "commit", "-qS", "-m", "r")
    # The same commit with its message changed under the signature.
    raw = git(clone, "cat-file", "commit", "HEAD").stdout.replace("\n\nr\n", "\n\nR\n")
    forged = write_commit(clone, raw)
    git(clone, "push", "-q", "origin", f"{forged}:main")
    return "bad signature"


BROKEN_ARMOR = (
    "-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ==not base64\n-----END SSH SIGNATURE-----"
)


def _gpgsig(armor):
    return "gpgsig " + "\n ".join(armor.strip("\n").split("\n"))


def _resigned(clone, signature):
    """Commit the clone's files unsigned, then put ``signature(payload)`` (armored text) in
    its ``gpgsig`` header by hand, as a site with plain git and ssh-keygen can, and push;
    ``signature`` may give whole header lines (starting ``gpgsig``) instead."""
    commit_as(clone, "r")
    raw = git(clone, "cat-file", "commit", "HEAD").stdout
    head, _, message = raw.partition("\n\n")
    header = signature(raw)
    header = header if header.startswith("gpgsig") else _gpgsig(header)
    forged = write_commit(clone, f"{head}\n{header}\n\n{message}")
    git(clone, "push", "-q", "origin", f"{forged}:main")


def _ssh_sign(key, namespace):
    def sign(payload):
        return subprocess.run(
            ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", namespace],
            input=payload,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    return sign


def malformed_signature(world, clone, m):
    write_tree(clone, run_files(world))
    _resigned(clone, lambda payload: BROKEN_ARMOR)
    return "bad signature"


def two_signatures(world, clone, m):
    """Two ``gpgsig`` headers, a malformed one, then mallory's good signature of its own
    run: git reads them as one signature (the first block), never the good one alone."""
    write_tree(clone, run_files(world))
    good = _ssh_sign(m.key, "git")
    _resigned(clone, lambda payload: _gpgsig(BROKEN_ARMOR) + "\n" + _gpgsig(good(payload)))
    return "bad signature"


def other_namespace(world, clone, m):
    """mallory's own key, trusted for its runs, signing under the namespace ``file``: git
    verifies under ``git`` only (a signature made for something else is not a commit's)."""
    write_tree(clone, run_files(world))
    _resigned(clone, _ssh_sign(m.key, "file"))
    return "bad signature"


def signed_by_another_sites_key_by_hand(world, clone, m):
    """alpha's run signed by hand with mallory's key (trusted here, for mallory)."""
    write_tree(clone, run_files(world, site="alpha"))
    _resigned(clone, _ssh_sign(m.key, "git"))
    return "a key trusted for mallory only"


def rewrite_dropping_alphas_run(world, clone, m):
    root = git(clone, "rev-list", "--max-parents=0", "HEAD").stdout.split()[0]
    git(clone, "reset", "-q", "--hard", root)
    write_tree(clone, run_files(world))
    world.push_as(clone, "results: mallory", key=m.key, force=True)
    return "history rewrite"


def rewrite_altering_alphas_run(world, clone, m):
    report = alpha_run(clone) / "report.json"
    report.write_text(report.read_text() + " ")
    world.push_as(clone, "results: alpha", key=m.key, amend=True, force=True)
    return "history rewrite"


def branch_deleted(world, clone, m):
    # git refuses to delete a bare repository's current branch by default; a host may not.
    git(world.bare, "config", "receive.denyDeleteCurrent", "ignore")
    git(clone, "push", "-q", "origin", ":main")
    return "history rewrite"


def merge_commit(world, clone, m):
    base = git(clone, "rev-parse", "HEAD").stdout.strip()
    git(clone, "checkout", "-q", "-b", "side")
    write_tree(clone, run_files(world))
    world.push_as(clone, "side")
    git(clone, "checkout", "-q", "-B", "main", base)
    write_tree(clone, run_files(world, run="20261126T020202Z-other1"))
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=m", "-c", "user.email=m@m", "commit", "-qm", "x")
    git(clone, "-c", "user.name=m", "-c", "user.email=m@m", "merge", "-q", "--no-edit", "side")
    git(clone, "push", "-q", "origin", "HEAD:main")
    return "merge commit"


CASES = [
    code("src/sitebench/__init__.py"),
    code("sitebench"),
    code("requirements.txt"),
    code("site-configs/alpha/reframe.py"),
    code("reframe-checks/evil_check.py"),
    code("spack-repo/packages/hpl/package.py"),
    code("results/alpha/20261126T000000Z-aaaaaa/report.json"),
    mixed_run_and_code,
    top_level(".gitmodules"),
    top_level(".gitattributes"),
    in_run("rfm_job.out", mode="120000", data="SECRET", expect="is a symlink"),
    in_run("sub", mode="160000", data="1" * 40, expect="a gitlink"),
    in_run(".git/config", data=b"[core]\n\tfsmonitor = touch PWNED\n", expect="git's own"),
    in_run("..", expect="path component '..'"),
    in_run("a\nb", expect="control character"),
    in_run("a\\b", expect="backslash"),
    symlink_run_dir,
    symlink_site_dir,
    bad_name("mallory/not-a-run/report.json", "invalid run name"),
    bad_name(f".hidden/{RUN}/report.json", "invalid site name"),
    bad_name("mallory/notes.txt", "not inside a run directory"),
    oversized_file,
    oversized_run,
    edit_published,
    edit_published_signed_by_owner,
    delete_published,
    delete_one_file,
    extend_published,
    forged_in_alphas_name,
    forged_unsigned,
    own_run_unsigned,
    untrusted_key,
    bad_signature,
    malformed_signature,
    two_signatures,
    other_namespace,
    signed_by_another_sites_key_by_hand,
    rewrite_dropping_alphas_run,
    rewrite_altering_alphas_run,
    branch_deleted,
    merge_commit,
]


@pytest.fixture
def world(tmp_path, monkeypatch):
    w = World(tmp_path)
    w.marker = tmp_path / "PWNED"
    w.secret = tmp_path / "secret.txt"
    w.secret.write_text("SECRET-7f3a9c-never-read\n")
    w.make_remote()
    alpha, beta, mallory = w.site("alpha"), w.site("beta"), w.site("mallory")
    for honest in (alpha, beta):
        honest.env["SITEBENCH_EXCHANGE_MAX_FILE"] = "200000"
        honest.env["SITEBENCH_EXCHANGE_MAX_RUN"] = "1000000"
    beta.trusts(alpha, mallory)
    alpha.trusts(mallory)
    return w


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_hostile_push_is_refused_and_honest_runs_arrive(world, case, capsys):
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published
    assert beta.pull().new == [("alpha", [first])]

    clone = world.hostile_clone()
    expected = case(world, clone, mallory)

    second = alpha.new_run()
    sent = alpha.publish()
    pulled = beta.pull()

    rewrite = "history rewrite" in expected
    refused = " | ".join(pulled.refused)
    assert expected in refused, (expected, pulled)
    assert expected in " | ".join(sent.refused), sent
    if rewrite:
        # Publishing on top would bless the rewrite: alpha's run waits, nothing lost.
        assert not sent.published and second in alpha.runs("alpha")
        assert beta.runs("alpha") == [first]
        # The way back (README): alpha puts the history it verified back on the remote,
        # alpha's waiting run goes out with its next publish and beta takes it.
        told = beta.cli("pull")
        assert told.returncode == 3 and "./sitebench exchange restore" in told.stdout, told
        restored = alpha.cli("exchange", "restore")
        assert restored.returncode == 0 and "restored the remote's branch" in restored.stdout
        assert "nothing to restore" in alpha.cli("exchange", "restore").stdout
        again = alpha.publish()
        assert again.published and again.runs == [second], again
        pulled = beta.pull()
        assert pulled.new == [("alpha", [second])] and pulled.refused == [], pulled
    else:
        # A deleted run of alpha's is sent again by alpha's next publish: restored.
        assert sent.published and second in sent.runs and set(sent.runs) <= {first, second}
        assert beta.runs("alpha") == sorted([first, second])
        assert pulled.new == [("alpha", [second])]
    assert beta.runs("mallory") == []
    assert_signed_only_verified(world, alpha)
    # Kept aside for inspection, named with its reason.
    refs = git(beta.results / ".exchange", "for-each-ref", "refs/sitebench/quarantine/").stdout
    assert refs.strip()

    # The CLI in-process: a crash would raise here, a refusal is listed with its reason.
    with beta.act():
        assert main(["compare", "alpha", f"alpha/{first}"]) in (0, 1)
        assert main(["exchange", "quarantine"]) == 0
    shown = capsys.readouterr()
    assert expected in shown.out
    assert not world.marker.exists()
    _assert_secret_unread(world, shown.out + shown.err)
    # Nothing of another site was written by the pulls; the honest alpha's own copy and
    # the published one, written out on demand, agree byte for byte.
    assert not (beta.results / "alpha").exists() and not (beta.results / "mallory").exists()
    for run in beta.runs("alpha"):
        assert tree_bytes(beta.show("alpha", run)) == tree_bytes(TEMPLATE)


def test_a_hostile_sites_own_honest_looking_run_is_accepted(world):
    """The control: the same path as the cases, a run signed by its own site's trusted key,
    is taken (so the refusals above are the rules', not a broken exchange)."""
    mallory, beta = world.site("mallory"), world.site("beta")
    clone = world.hostile_clone()
    write_tree(clone, run_files(world))
    world.push_as(clone, "results: mallory: 1 run", key=mallory.key)
    pulled = beta.pull()
    assert pulled.refused == [] and pulled.new == [("mallory", [RUN])]
    assert tree_bytes(beta.show("mallory", RUN)) == tree_bytes(TEMPLATE)


KILLED_BY_ITS_SIGNATURE = """#!/bin/sh
# ssh-keygen as git runs it, but the git reading a malformed signature dies as git 2.39 dies
# of SIGPIPE when ssh-keygen exits before taking the payload (every time, or once).
sig=""; prev=""
for a in "$@"; do [ "$prev" = "-s" ] && sig=$a; prev=$a; done
case "$*" in *check-novalidate*)
    if grep -q "not base64" "$sig" && { [ "$ONCE" = always ] || [ ! -e "$ONCE" ]; }; then
        [ "$ONCE" = always ] || touch "$ONCE"
        kill -PIPE "$PPID"; exit 255
    fi;;
esac
exec ssh-keygen "$@"
"""


@pytest.mark.parametrize("dies", ["once", "always"])
def test_a_git_a_malformed_signature_kills_is_read_again_and_never_trusted(world, dies):
    """git 2.39 dies of SIGPIPE, now and then, reading a malformed signature (ssh-keygen
    refuses it before reading the payload git writes): its log then leaves the commit out.
    The commit is read again by a git of its own; a git that dies every time refuses it."""
    from sitebench.results.verify import UNREAD_SIGNATURE

    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    program = world.tmp / "ssh-keygen-killing-git"
    program.write_text(KILLED_BY_ITS_SIGNATURE)
    program.chmod(0o755)
    beta.env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="gpg.ssh.program")
    beta.env["GIT_CONFIG_VALUE_0"] = str(program)
    beta.env["ONCE"] = "always" if dies == "always" else str(world.tmp / "died-once")
    clone = world.hostile_clone()
    malformed_signature(world, clone, mallory)
    first = alpha.new_run()
    assert alpha.publish().published
    pulled = beta.pull()
    expected = "bad signature" if dies == "once" else UNREAD_SIGNATURE
    assert len(pulled.refused) == 1 and expected in pulled.refused[0], pulled
    assert dies == "always" or (world.tmp / "died-once").exists()
    assert pulled.new == [("alpha", [first])] and beta.runs("mallory") == []


def test_pull_cli_exits_3_naming_the_refused_commit(world):
    beta = world.site("beta")
    clone = world.hostile_clone()
    write_tree(clone, {"src/sitebench/__init__.py": ("100644", payload(world).encode())})
    world.push_as(clone, "results: mallory", key=world.site("mallory").key)
    proc = beta.cli("pull", "--remote", str(world.bare))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "REFUSED commit" in proc.stdout and "not a run file" in proc.stdout
    assert "runs refused" in proc.stdout
    # Asked again, nothing new is refused twice over, and the exit stays clean.
    again = beta.cli("pull")
    assert again.returncode == 0 and "no new runs" in again.stdout, again.stdout


def test_launcher_from_inside_a_results_directory_imports_nothing_from_it(world, tmp_path):
    """A site named like the package, with an ``__init__.py`` in a run, then the CLI run
    from inside the results directory: nothing of it is imported."""
    mallory, beta = world.site("mallory"), world.site("beta")
    clone = world.hostile_clone()
    evil = payload(world).encode()
    files = run_files(world, site="sitebench", extra={})
    files[f"sitebench/{RUN}/__init__.py"] = ("100644", evil)
    files["sitebench/__init__.py"] = ("100644", evil)
    write_tree(clone, files)
    world.push_as(clone, "results", key=mallory.key)
    beta.pull()
    (beta.results / "sitebench").mkdir(exist_ok=True)
    (beta.results / "sitebench" / "__init__.py").write_bytes(evil)  # as if copied by hand
    launcher = subprocess.run(
        [str(ROOT / "sitebench"), "trust", "list"],
        cwd=beta.results,
        capture_output=True,
        text=True,
        env={**os.environ, **beta.env},
    )
    assert launcher.returncode == 0, launcher.stderr
    assert not world.marker.exists()


def assert_signed_only_verified(world, site):
    """The remote read with plain git: every commit git verifies as ``site``'s holds
    nothing but the seed's README and ``site``'s own runs, byte for byte the template's (no
    content another site pushed and ``site`` refused is ever under its signature). The
    commits beta refused are left out: a stolen key's, not the site's."""
    refused = git(
        world.site("beta").results / ".exchange",
        "for-each-ref",
        "--format=%(objectname)",
        "refs/sitebench/quarantine/",
    ).stdout.split()
    template = {
        p.relative_to(TEMPLATE).as_posix(): git(TEMPLATE, "hash-object", str(p)).stdout.strip()
        for p in TEMPLATE.rglob("*")
        if p.is_file()
    }
    signed = signed_trees(world.bare, site)
    assert signed, "no commit of the site on the branch"
    for commit, files in signed.items():
        if commit in refused:
            continue
        for path, blob in files.items():
            if path == "README.md":
                continue
            owner, run, rel = (path.split("/", 2) + ["", ""])[:3]
            assert owner == site.name and template.get(rel) == blob, (commit[:12], path)


def _assert_secret_unread(world, output):
    secret = world.secret.read_text().strip()
    assert secret not in output
    for site in world.sites.values():
        for path in site.home.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), path


# -- hostile content a site may publish in its own name: taken, and read defensively -------


def _report(mutate):
    def make(world):
        doc = json.loads((TEMPLATE / "report.json").read_text())
        return json.dumps(mutate(doc, world)).encode()

    return make


def _paths_to_secret(doc, world):
    for case in doc["runs"][0]["testcases"]:
        for key in ("outputdir", "stagedir", "filename", "prefix"):
            case[key] = str(world.secret.parent)
        case["job_stdout"] = str(world.secret)
        case["job_stderr"] = "../../../../secret.txt"
        case["build_stdout"] = str(world.secret)
    return doc


def _wrong_types(doc, world):
    doc["runs"][0]["testcases"] = {"not": "a list"}
    return doc


def _wrong_perfvars(doc, world):
    for case in doc["runs"][0]["testcases"]:
        case["perfvars"] = "fast"
        case["check_vars"] = ["x"]
    return doc


CONTENT = {
    "report paths to the secret": {"report.json": _report(_paths_to_secret)},
    "report of wrong types": {"report.json": _report(_wrong_types)},
    "perfvars of wrong types": {"report.json": _report(_wrong_perfvars)},
    "deeply nested report": {"report.json": lambda w: b"[" * 90_000 + b"]" * 90_000},
    "report not JSON": {"report.json": lambda w: b"\xff\xfe{not json"},
    "report a bare number": {"report.json": lambda w: b"1e999999"},
    "provenance a list": {"provenance/provenance.json": lambda w: b"[1, 2, 3]"},
    "perflog garbage": {
        "perflogs/local/default/StreamCheck.log": lambda w: b"\x00|||" * 10_000 + b"\n"
    },
}


@pytest.mark.parametrize("name", sorted(CONTENT))
def test_hostile_content_in_a_sites_own_run_is_read_defensively(world, name, tmp_path, capsys):
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    honest = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    files = run_files(world)
    for rel, make in CONTENT[name].items():
        files[f"mallory/{RUN}/{rel}"] = ("100644", make(world))
    write_tree(clone, files)
    world.push_as(clone, "results: mallory: 1 run", key=mallory.key)
    pulled = beta.pull()
    assert pulled.refused == [] and ("mallory", [RUN]) in pulled.new
    with beta.act():
        codes = [
            main(["compare", "alpha", "mallory"]),
            main(["regressions", "mallory"]),
            main(["compare", "alpha", f"alpha/{honest}"]),
            main(["report", "--out", str(tmp_path / "report.html")]),
        ]
    out = capsys.readouterr()
    assert all(code in (0, 1, 2) for code in codes), codes
    assert "Traceback" not in out.err
    assert not world.marker.exists()
    _assert_secret_unread(world, out.out + out.err + (tmp_path / "report.html").read_text())


# -- second round (issue 39): trees git's fsck refuses, what publish signs, baselines ------


def _good_run_tree(clone):
    """(root tree of HEAD plus a well-formed mallory run, that run's tree) in ``clone``."""
    write_tree(clone, run_files(None))
    git(clone, "add", "-A")
    root = git(clone, "write-tree").stdout.strip()
    return root, git(clone, "rev-parse", f"{root}:mallory/{RUN}").stdout.strip()


def _push_run_tree(world, clone, m, run_tree):
    """Commit HEAD's tree plus ``mallory/<RUN>`` = ``run_tree`` (any bytes), signed by
    mallory's own trusted key, and push it with plain git; the push's result."""
    site = raw_tree(clone, [("40000", RUN, run_tree)])
    entries = [e for e in tree_entries(clone, "HEAD") if e[1] != "mallory"]
    entries.append(("040000", "mallory", site))
    top = raw_tree(clone, sorted(entries, key=lambda e: e[1] + ("/" if "40000" in e[0] else "")))
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={m.key}"]
    commit = git(
        clone,
        *sign,
        "-c",
        "user.name=m",
        "-c",
        "user.email=m@m",
        "commit-tree",
        top,
        "-S",
        "-p",
        "HEAD",
        "-m",
        "results: mallory: 1 run",
    ).stdout.strip()
    return git(clone, "push", "-q", "origin", f"{commit}:refs/heads/main", check=False)


def _malformed(kind):
    def case(world, clone, m):
        _, good = _good_run_tree(clone)
        entries = tree_entries(clone, good)
        other = (
            subprocess.run(
                ["git", "-C", str(clone), "hash-object", "-w", "--stdin"],
                input=b"{}",
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .strip()
        )
        if kind == "duplicate report.json":
            at = [e[1] for e in entries].index("report.json")
            entries.insert(at + 1, ("100644", "report.json", other))
            expect = "'report.json' twice"
        elif kind == "a file and a folder named output":
            at = [e[1] for e in entries].index("output")
            entries.insert(at, ("100644", "output", other))
            expect = "'output' twice (a file and a folder of one name)"
        elif kind == "a blob entry pointing at a tree":
            # A tree found nowhere else in the push (git's pack-objects refuses one it
            # also walks as a tree).
            tree = raw_tree(clone, [("100644", "x", other)])
            entries = [(mo, n, tree if n == "report.json" else sha) for mo, n, sha in entries]
            expect = "is listed as a blob but is a tree"
        else:  # unsorted
            entries.reverse()
            expect = "out of git's order"
        return _push_run_tree(world, clone, m, raw_tree(clone, entries)), expect

    case.__name__ = kind
    return case


def _top_of_run(name):
    def case(world, clone, m):
        files = run_files(world)
        files[f"mallory/{RUN}/{name}"] = ("100644", payload(world).encode())
        write_tree(clone, files)
        git(clone, "add", "-A", "-f")
        root = git(clone, "write-tree").stdout.strip()
        run_tree = git(clone, "rev-parse", f"{root}:mallory/{RUN}").stdout.strip()
        return _push_run_tree(world, clone, m, run_tree), "is not a file a run holds"

    case.__name__ = f"{name} at a run's top"
    return case


SECOND_ROUND = [
    _malformed("duplicate report.json"),
    _malformed("a file and a folder named output"),
    _malformed("a blob entry pointing at a tree"),
    _malformed("unsorted entries"),
    _top_of_run("sitecustomize.py"),
    _top_of_run("evil.pth"),
    _top_of_run("sitebench/__init__.py"),
]


def _world(tmp_path, protected, trusting_mallory=("alpha", "beta")):
    world = World(tmp_path, protected=protected)
    world.marker = tmp_path / "PWNED"
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    beta.trusts(alpha)
    for name in trusting_mallory:
        world.site(name).trusts(mallory)
    world.make_remote(signers=world.trust_file("alpha", "beta", "mallory", "gamma"))
    return world


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
@pytest.mark.parametrize("case", SECOND_ROUND, ids=lambda c: c.__name__)
def test_a_tree_git_refuses_is_one_refused_commit_and_every_site_goes_on(
    tmp_path, protected, case
):
    """A run of mallory's own, signed by its trusted key, whose tree git's fsck refuses (or
    that holds files Python would import from a run folder): refused with its reason by
    every pull; alpha keeps publishing, beta and a newcomer keep pulling, and no commit
    alpha signs holds any of it. A protected remote refuses the push itself."""
    world = _world(tmp_path, protected)
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published
    assert beta.pull().new == [("alpha", [first])]

    pushed, expected = case(world, world.hostile_clone(), mallory)
    assert (pushed.returncode != 0) == protected, pushed.stderr

    second = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [second], sent
    pulled = beta.pull()
    assert pulled.new == [("alpha", [second])], pulled
    if not protected:
        assert expected in " | ".join(pulled.refused), pulled
        assert expected in " | ".join(sent.refused), sent
    assert beta.runs("mallory") == []
    assert_signed_only_verified(world, alpha)
    # Later pulls and a site joining now: no traceback, no refusal left to block them.
    again = beta.cli("pull")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    gamma = world.site("gamma")
    gamma.trusts(alpha)
    joined = gamma.cli("pull", "--remote", str(world.bare))
    assert joined.returncode in (0, 3) and "Traceback" not in joined.stderr, joined.stderr
    assert gamma.runs("alpha") == sorted([first, second])
    assert not world.marker.exists()


def test_with_the_tree_checks_off_a_run_no_file_system_holds_stops_nothing(tmp_path, monkeypatch):
    """Defence in depth: with the fsck-like checks switched off, a duplicate entry passes
    verification; pull writes nothing (the run stays in git) and ``show`` refuses to write
    it with a clear error (no FileExistsError, no half run), and alpha's runs still arrive."""
    from sitebench.common.errors import SitebenchError
    from sitebench.results import verify

    monkeypatch.setattr(verify, "_check_trees", lambda *args: "")
    # and their reading of a whole range at once (each commit then checked on its own)
    monkeypatch.setattr(verify, "tree_reasons", lambda *args: {})
    world = _world(tmp_path, protected=False)
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    pushed, _ = SECOND_ROUND[0](world, world.hostile_clone(), mallory)
    assert pushed.returncode == 0
    run = alpha.new_run()
    assert alpha.publish().published
    pulled = beta.pull()
    assert ("alpha", [run]) in pulled.new, pulled
    with pytest.raises(SitebenchError) as err:
        beta.show("mallory", RUN)
    assert "cannot be written as files (FileExistsError" in str(err.value)
    assert not (beta.results / "mallory" / RUN).exists()
    assert not list((beta.results / "mallory").glob(".incoming-*"))
    assert beta.show("alpha", run).is_dir()


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
def test_what_a_site_refused_is_left_out_and_accepted_where_it_was_taken(tmp_path, protected):
    """Trust lists differ: beta (and the host) trust mallory, alpha does not. Alpha's
    publish leaves mallory's run out of what it signs, naming the commit; beta, which took
    that run, accepts alpha's commit all the same and keeps mallory's run."""
    world = _world(tmp_path, protected, trusting_mallory=("beta",))
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    clone = world.hostile_clone()
    write_tree(clone, run_files(world))
    assert world.push_as(clone, "results: mallory: 1 run", key=mallory.key).returncode == 0
    theirs = git(clone, "rev-parse", "HEAD").stdout.strip()
    assert beta.pull().new == [("mallory", [RUN])]

    run = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [run], sent
    assert "not trusted here" in " | ".join(sent.refused)
    assert f"Sitebench-Left-Out: {theirs}" in git(world.bare, "log", "-1", "main").stdout
    assert_signed_only_verified(world, alpha)
    pulled = beta.pull()
    assert pulled.refused == [] and pulled.new == [("alpha", [run])], pulled
    assert beta.runs("mallory") == [RUN]
    # mallory's next run is judged on what it adds, at both sites.
    later = mallory.new_run()
    mallory.trusts(alpha)
    assert mallory.publish().published
    assert beta.pull().new == [("mallory", [later])]
    assert alpha.publish().refused  # alpha still refuses mallory's runs, still publishes


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
def test_a_deletion_that_names_a_commit_is_still_a_deletion(tmp_path, protected):
    """Naming a commit in the trailer leaves out only runs that commit added: mallory
    removing alpha's run and naming an unrelated commit is refused as a deletion."""
    world = _world(tmp_path, protected)
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published
    beta.pull()
    clone = world.hostile_clone()
    root = git(clone, "rev-list", "--max-parents=0", "HEAD").stdout.split()[0]
    shutil.rmtree(alpha_run(clone))
    write_tree(clone, run_files(world))
    pushed = world.push_as(
        clone, f"results: mallory\n\nSitebench-Left-Out: {root}", key=mallory.key
    )
    assert (pushed.returncode != 0) == protected
    if not protected:
        assert "deletes" in " | ".join(beta.pull().refused)
    second = alpha.new_run()
    assert alpha.publish().published
    assert beta.pull().new == [("alpha", [second])]
    assert beta.runs("alpha") == sorted([first, second]) and beta.runs("mallory") == []


def test_a_site_joining_during_a_force_push_pins_its_baseline_and_never_restores_it(tmp_path):
    """Three honest sites and mallory on a plain remote. Mallory rewrites the branch;
    gamma joins meanwhile and takes the rewrite as its baseline, delta joins pinning
    alpha's commit and is refused. Alpha restores (recording the rewrite on the remote):
    gamma is told to re-pin, its restore pushes nothing, and its pull --expect joins the
    history the others hold; delta's pinned pull then works."""
    world = _world(tmp_path, protected=False)
    alpha, mallory = world.site("alpha"), world.site("mallory")
    gamma, delta = world.site("gamma"), world.site("delta")
    for joiner in (gamma, delta):
        joiner.trusts(alpha, mallory)
    first = alpha.new_run()
    assert alpha.publish().published
    with alpha.act():
        assert main(["exchange", "accepted"]) == 0
    pinned = git(world.bare, "rev-parse", "main").stdout.strip()

    clone = world.hostile_clone()
    rewrite_dropping_alphas_run(world, clone, mallory)
    rewritten = git(world.bare, "rev-parse", "main").stdout.strip()

    took = gamma.cli("pull", "--remote", str(world.bare))
    assert took.returncode == 0 and gamma.runs("mallory") == [RUN], took.stdout
    refused = delta.cli("pull", "--remote", str(world.bare), "--expect", pinned)
    assert refused.returncode == 2 and f"does not hold {pinned}" in refused.stderr, refused
    assert delta.runs("mallory") == [] and delta.runs("alpha") == []

    assert alpha.cli("exchange", "restore").returncode == 0
    assert git(world.bare, "rev-parse", "main").stdout.strip() == pinned
    told = gamma.cli("pull")
    assert told.returncode == 3 and "pull --expect COMMIT (never restore)" in told.stdout, told
    restore = gamma.cli("exchange", "restore")
    assert restore.returncode == 2 and "refused as a rewrite" in restore.stderr, restore
    assert git(world.bare, "rev-parse", "main").stdout.strip() == pinned  # nothing pushed
    assert git(world.bare, "rev-parse", f"refs/sitebench/refused/{rewritten}").returncode == 0

    repinned = gamma.cli("pull", "--expect", pinned[:12])
    assert repinned.returncode == 0 and gamma.runs("alpha") == [first], repinned
    joined = delta.cli("pull", "--expect", pinned)
    assert joined.returncode == 0 and delta.runs("alpha") == [first], joined
    second = alpha.new_run()
    assert alpha.publish().published
    for site in (gamma, delta):
        done = site.cli("pull")
        assert done.returncode == 0 and site.runs("alpha") == sorted([first, second]), done


def test_a_protected_remote_is_joined_with_the_commit_a_site_gives(tmp_path):
    world = _world(tmp_path, protected=True)
    alpha, gamma = world.site("alpha"), world.site("gamma")
    gamma.trusts(alpha)
    run = alpha.new_run()
    assert alpha.publish().published
    pinned = git(world.bare, "rev-parse", "main").stdout.strip()
    wrong = gamma.cli("pull", "--remote", str(world.bare), "--expect", "0123456789ab")
    assert wrong.returncode == 2 and "does not hold 0123456789ab" in wrong.stderr
    assert gamma.runs("alpha") == []
    joined = gamma.cli("pull", "--expect", pinned)
    assert joined.returncode == 0 and gamma.runs("alpha") == [run], joined


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m"


def _mallorys_run(world, mutate):
    """mallory publishes, in its own name and with its trusted key, a run whose report
    ``mutate`` changed; beta pulls it."""
    clone = world.hostile_clone()
    files = run_files(world)
    doc = json.loads((TEMPLATE / "report.json").read_text())
    mutate(doc["runs"][0]["testcases"])
    files[f"mallory/{RUN}/report.json"] = ("100644", json.dumps(doc).encode())
    write_tree(clone, files)
    assert world.push_as(clone, "results: mallory", key=world.site("mallory").key).returncode == 0
    assert ("mallory", [RUN]) in world.site("beta").pull().new


def test_control_characters_from_another_site_never_reach_the_terminal(tmp_path):
    """A toolchain and a check named with terminal escape sequences: compare's table and
    its caveat line (two toolchains pooled), regressions and the error lines print them
    spelled out, never raw."""

    def named(cases):
        for case in cases:
            if case["display_name"].startswith("StreamCheck %scale=quick %threads=all"):
                case["environ"] = f"gnu{ESCAPES}"
                case["display_name"] = f"StreamCheck{ESCAPES} %scale=quick %threads=all"

    world = _world(tmp_path, protected=False)
    alpha, beta = world.site("alpha"), world.site("beta")
    alpha.new_run()
    assert alpha.publish().published
    _mallorys_run(world, named)
    outputs = [
        beta.cli("compare", "alpha", "mallory"),
        beta.cli("regressions", "mallory"),
        beta.cli("compare", "alpha", f"mallory%gnu{ESCAPES}x"),
    ]
    assert "pools the figures of 2 toolchains" in outputs[0].stdout, outputs[0]
    assert "\\x1b]0;owned\\x07" in outputs[0].stdout
    for proc in outputs:
        assert "Traceback" not in proc.stderr, proc.stderr
        for text in (proc.stdout, proc.stderr):
            assert not any(ch in text for ch in "\x1b\x07\x9b"), repr(text)


def test_a_wrong_typed_name_in_a_run_is_null_and_the_run_stays(tmp_path):
    """results/README.md: values of the wrong type are stored as null and the run named,
    never skipped. A display_name that is a number and one that is a list."""

    def wrong(cases):
        cases[1]["display_name"] = 42
        cases[-1]["display_name"] = ["HplCheck"]
        cases[-1]["environ"] = {"not": "a name"}

    world = _world(tmp_path, protected=False)
    beta = world.site("beta")
    _mallorys_run(world, wrong)
    from sitebench.results import store

    with beta.act():
        warnings = []
        store.refresh_all(warn=warnings.append)
        con = store.connect(sites=["mallory"])
        runs = con.execute("SELECT count(*) FROM runs WHERE site = 'mallory'").fetchone()[0]
        nulls = con.execute(
            'SELECT count(*) FROM figures WHERE site = ? AND "check" IS NULL', ["mallory"]
        ).fetchone()[0]
        kept = con.execute(
            'SELECT count(*) FROM figures WHERE site = ? AND "check" = ?',
            ["mallory", "StreamCheck"],
        ).fetchone()[0]
        flagged = store.flagged(["mallory"])
    assert runs == 1 and nulls > 0 and kept > 0, (runs, nulls, kept, warnings)
    assert flagged and flagged[0][1] == RUN and "wrong type" in flagged[0][2], flagged


def test_a_protected_remote_takes_pushes_from_its_group(tmp_path):
    """init-remote's repository: every directory group-writable and setgid from the start
    (and those a push adds), so the other members of its group can push (git's own
    core.sharedRepository=group, set by git init --shared)."""
    old = os.umask(0o022)
    try:
        world = _world(tmp_path, protected=True)
        alpha = world.site("alpha")
        alpha.new_run()
        assert alpha.publish().published
    finally:
        os.umask(old)
    assert git(world.bare, "config", "core.sharedRepository").stdout.strip() in ("group", "1")
    for where in ("objects", "refs"):
        for path in [
            world.bare / where,
            *(p for p in (world.bare / where).rglob("*") if p.is_dir()),
        ]:
            mode = path.stat().st_mode
            assert mode & 0o2070 == 0o2070, (path, oct(mode))


def test_runs_written_from_the_exchange_get_the_sites_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        world = _world(tmp_path, protected=False)
        alpha, beta = world.site("alpha"), world.site("beta")
        run = alpha.new_run()
        assert alpha.publish().published
        assert beta.pull().new == [("alpha", [run])]
        top = beta.show("alpha", run)
    finally:
        os.umask(old)
    for path in [top, *top.rglob("*")]:
        want = 0o755 if path.is_dir() else 0o644
        assert path.stat().st_mode & 0o777 == want, (path, oct(path.stat().st_mode))


# -- keys with a lifecycle, runs bounded in time ---------------------------------------------


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
def test_a_run_from_the_future_is_refused(tmp_path, protected):
    """Run times are bounded by their commit's, and commit times by now: a run named 2030,
    and a commit dated 2030, are each refused (a key's validity is checked at the commit's
    time, so that time cannot run ahead)."""
    world = _world(tmp_path, protected)
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    clone = world.hostile_clone()
    write_tree(clone, run_files(world, run="20300101T000000Z-future"))
    pushed = world.push_as(clone, "results: mallory", key=mallory.key)
    assert (pushed.returncode != 0) == protected, pushed.stderr
    if protected:
        assert "dated after its commit" in pushed.stderr
        git(clone, "reset", "-q", "--hard", "origin/main")
    clone2 = world.hostile_clone()
    write_tree(clone2, run_files(world))
    git(clone2, "add", "-A")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={mallory.key}"]
    git(
        clone2,
        *sign,
        "-c",
        "user.name=m",
        "-c",
        "user.email=m@m",
        "commit",
        "-qS",
        "-m",
        "r",
        env={
            "GIT_COMMITTER_DATE": "2030-01-01T00:00:00Z",
            "GIT_AUTHOR_DATE": "2030-01-01T00:00:00Z",
        },
    )
    pushed = git(clone2, "push", "-q", "origin", "HEAD:main", check=False)
    assert (pushed.returncode != 0) == protected, pushed.stderr
    run = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [run], sent
    pulled = beta.pull()
    assert pulled.new == [("alpha", [run])] and beta.runs("mallory") == [], pulled
    if not protected:
        refused = " | ".join(pulled.refused)
        assert "dated after its commit" in refused and "committed in the future" in refused
    assert_signed_only_verified(world, alpha)


def test_clocks_may_disagree_by_ten_minutes_and_no_more(world):
    """results/README.md: a run is not dated after its commit, nor a commit after now, with
    10 minutes of clock skew. mallory pushes a commit dated 5 minutes ahead holding a run
    named 9 minutes after it (both taken), one dated 15 minutes ahead, and one dated now
    holding a run named 11 minutes ahead (both refused, by reason)."""
    beta, mallory = world.site("beta"), world.site("mallory")
    clone = world.hostile_clone()
    now = time.time()

    def push(commit_ahead, run_ahead, tag):
        run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now + run_ahead)) + f"-skew{tag}"
        write_tree(clone, run_files(world, run=run))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + commit_ahead))
        env = {"GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
        git(clone, "add", "-A")
        sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={mallory.key}"]
        ident = ["-c", "user.name=m", "-c", "user.email=m@m"]
        git(clone, *sign, *ident, "commit", "-qS", "-m", f"results: {tag}", env=env)
        assert git(clone, "push", "-q", "origin", "HEAD:main", check=False).returncode == 0
        return run

    within = push(300, 300 + 540, "a")
    push(900, 0, "b")
    push(0, 660, "c")
    pulled = beta.pull()
    refused = " | ".join(pulled.refused)
    assert pulled.new == [("mallory", [within])], pulled
    assert "committed in the future" in refused and "is dated after its commit" in refused
    assert len(pulled.refused) == 2, pulled


@pytest.mark.parametrize("protected", [False, True], ids=["plain remote", "init-remote"])
def test_a_revoked_key_signs_nothing_after_its_time_and_a_new_key_takes_over(tmp_path, protected):
    """alpha's key is stolen at ``since``: beta, the host and alpha itself revoke it from
    then on, with git's own validity period; what it signed before stays, a run the thief
    pushes in alpha's name after it is refused, and alpha's new key (trusted from
    ``since``) publishes again, leaving the thief's commit out. gamma joins later with
    beta's trust list and gets the same runs."""
    world = _world(tmp_path, protected)
    alpha, beta, gamma = world.site("alpha"), world.site("beta"), world.site("gamma")
    first = alpha.new_run()
    assert alpha.publish().published
    time.sleep(1.2)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    time.sleep(1.2)
    revoke = ["trust", "revoke", "alpha", "--since", since]
    if protected:
        assert alpha.cli(*revoke, "--remote", str(world.bare)).returncode == 0
    clone = world.hostile_clone()
    write_tree(clone, run_files(world, site="alpha"))
    pushed = world.push_as(clone, "results: alpha: 1 run", key=alpha.key)  # the thief
    assert (pushed.returncode != 0) == protected, pushed.stderr
    if protected:
        assert "not at the commit's time" in pushed.stderr
    for site in (beta, alpha):
        done = site.cli(*revoke)
        assert done.returncode == 0 and "1 key(s) valid only before" in done.stdout, done
    pulled = beta.pull()
    assert pulled.new == [("alpha", [first])], pulled
    if not protected:
        assert "not at the commit's time" in " | ".join(pulled.refused)
    assert "valid-before=" in beta.cli("trust", "list").stdout

    # The new key: alpha makes it, beta (and the host) trust it from the theft on.
    for suffix in ("", ".pub"):
        os.rename(f"{alpha.key}{suffix}", f"{alpha.key}.stolen{suffix}")
    with alpha.act():
        from sitebench.results import trust

        trust.ensure_site_key("alpha")
    rotated = ["trust", "add", "alpha", f"{alpha.key}.pub", "--valid-after", since]
    assert beta.cli(*rotated).returncode == 0
    if protected:
        assert alpha.cli(*rotated, "--remote", str(world.bare)).returncode == 0
    third = alpha.new_run()
    sent = alpha.publish()
    assert sent.published and sent.runs == [third], sent
    assert beta.pull().new == [("alpha", [third])]
    assert beta.runs("alpha") == sorted([first, third])
    # A late joiner with beta's trust list takes the same runs, and not the thief's.
    (gamma.home / "trust" / "allowed_signers").write_text(
        (beta.home / "trust" / "allowed_signers").read_text()
    )
    assert gamma.cli("pull", "--remote", str(world.bare)).returncode in (0, 3)
    assert gamma.runs("alpha") == sorted([first, third])


def _one_key_two_windows(world, signers, separator=" "):
    """``signers`` (an allowed_signers file) also trusts mallory's key for alpha, but only
    before the last day: mallory's key is valid for mallory now and for alpha no longer.
    ``separator``: what stands after the principal on mallory's line (OpenSSH takes a tab
    as it takes a space)."""
    mallory = world.site("mallory")
    ended = time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() - 86400))
    text = Path(signers).read_text(encoding="utf-8")
    assert f"mallory {mallory.public}\n" in text, text
    text = text.replace(f"mallory {mallory.public}", f"mallory{separator}{mallory.public}")
    Path(signers).write_text(text + f'alpha valid-before="{ended}" {mallory.public}\n')
    return verify.fingerprint(mallory.public)


def _alphas_run_signed_by_mallory(world):
    clone = world.hostile_clone()
    write_tree(clone, run_files(world, site="alpha"))
    return world.push_as(clone, "results: alpha: 1 run", key=world.site("mallory").key)


@pytest.mark.parametrize("separator", [" ", "\t"], ids=["space", "tab"])
def test_one_key_trusted_for_two_sites_in_two_windows_signs_for_neither(tmp_path, separator):
    """A hand-written allowed_signers trusts mallory's key for mallory (always) and for
    alpha (until yesterday). git checks the key's period for the site find-principals
    names (mallory, valid now), and the fingerprint maps to both: a run of alpha's signed
    by it today, outside alpha's window, was accepted. Now the list is refused by name
    before anything is judged, trust add refuses to build such a list, and once the line
    goes the run is refused as another site's. With a tab after ``mallory`` (OpenSSH reads
    it; the list was read as splitting at a space only, so mallory's line was no key) the
    run was accepted until 2026-11-28."""
    world = _world(tmp_path, protected=False)
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    fp = _one_key_two_windows(world, beta.home / "trust" / "allowed_signers", separator)
    assert _alphas_run_signed_by_mallory(world).returncode == 0
    honest = alpha.new_run()
    assert alpha.publish().published
    with pytest.raises(SitebenchError) as refused:
        beta.pull()
    for named in (fp, "alpha and mallory", "one key per site", "trust remove"):
        assert named in str(refused.value), refused.value
    assert beta.runs("alpha") == []
    told = beta.cli("pull", "--remote", str(world.bare))
    assert told.returncode == 2 and fp in told.stderr, told

    # The fix: the key stays mallory's only; the forged run is refused as another site's.
    gone = beta.cli("trust", "remove", "alpha", "--fingerprint", fp)
    assert gone.returncode == 0, gone
    pulled = beta.pull()
    assert pulled.new == [("alpha", [honest])], pulled
    assert "runs of alpha signed by" in " | ".join(pulled.refused), pulled
    # trust add never builds such a list again, here or on a protected remote's.
    hosted = world.tmp / "hosted.git"
    shared_remote.init_remote(hosted, world.trust_file("alpha", "mallory"))
    for where in ([], ["--remote", str(hosted)]):
        before = beta.cli("trust", "list", *where).stdout
        added = beta.cli("trust", "add", "alpha", f"{mallory.key}.pub", *where)
        assert added.returncode == 2, added
        for named in (fp, "alpha and mallory", "one key per site"):
            assert named in added.stderr, added.stderr
        assert beta.cli("trust", "list", *where).stdout == before
    assert_signed_only_verified(world, alpha)


def test_a_protected_remote_refuses_one_key_for_two_sites(tmp_path):
    """init-remote refuses a trust file giving one key to two sites; a hosted list edited
    by hand to do so makes its hook refuse the commits that key signs, by name."""
    world = World(tmp_path, protected=True)
    world.site("alpha")
    signers = world.trust_file("alpha", "mallory")
    fp = _one_key_two_windows(world, signers)
    with pytest.raises(SitebenchError, match="one key per site") as refused:
        world.make_remote(signers=signers)
    assert fp in str(refused.value) and not world.bare.exists()
    world.make_remote(signers=world.trust_file("alpha", "mallory"))
    _one_key_two_windows(world, world.bare / "sitebench" / "allowed_signers")
    pushed = _alphas_run_signed_by_mallory(world)
    assert pushed.returncode != 0 and "one key per site" in pushed.stderr, pushed.stderr
    assert fp in pushed.stderr and "alpha and mallory" in pushed.stderr


# -- the on-demand path: another site's bulk stays on the remote until show asks ------------

OUT = "output/local/default/gnu/HplCheck_1941fa00/rfm_job.out"


def _absent(site, blob):
    """Whether ``site``'s exchange copy lacks ``blob`` (asked without fetching it)."""
    out = git(site.results / ".exchange", "rev-list", "--objects", "--missing=print", "--all")
    return f"?{blob}" in out.stdout.split()


def _blob(clone, path):
    return git(clone, "rev-parse", f"HEAD:{path}").stdout.strip()


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({f"mallory/{RUN}/output/big.bin": ("100644", b"0" * 300_000)}, "over the cap of 200000"),
        (
            {f"mallory/{RUN}/output/p{i}.bin": ("100644", bytes([i]) * 150_000) for i in range(8)},
            f"mallory/{RUN} is [0-9]+ bytes in [0-9]+ files, over the cap of 1000000 per run "
            r"\(sizes asked before fetching\); nothing fetched",
        ),
    ],
    ids=["file_over_cap", "run_over_cap"],
)
def test_oversized_bulk_is_never_fetched_and_show_refuses_it(world, extra, expected):
    beta, mallory = world.site("beta"), world.site("mallory")
    clone = world.hostile_clone()
    write_tree(clone, run_files(world, extra=extra))
    world.push_as(clone, "results: mallory", key=mallory.key)
    pulled = beta.pull()
    # Its figures arrive (its index files were sized); its bulk was never fetched.
    assert pulled.refused == [] and pulled.new == [("mallory", [RUN])], pulled
    assert all(_absent(beta, _blob(clone, path)) for path in extra)
    with pytest.raises(SitebenchError, match=expected) as err:
        beta.show("mallory", RUN)
    assert "nothing written" in str(err.value)
    assert not (beta.results / "mallory").exists() or not any((beta.results / "mallory").iterdir())
    # Nothing of the bulk arrived: a file over the per-file cap is never sent, and a run
    # whose files are each under it but whose total is over the per-run cap is judged from
    # the sizes the remote gives before a byte of it is fetched.
    assert all(_absent(beta, _blob(clone, path)) for path in extra)


def test_bulk_rewritten_after_its_figures_were_taken_is_refused_show_gives_the_accepted(world):
    """A later commit changing an accepted run's output is refused; neither the accepted
    commit here nor alpha's next signed commit holds the change (each commit is judged
    against the last accepted one, publish signs the accepted tree), and show writes the
    run as accepted."""
    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published and beta.pull().new == [("alpha", [first])]
    clone = world.hostile_clone()
    (clone / "alpha" / first / OUT).write_bytes(b"rewritten after its figures were taken\n")
    world.push_as(clone, "results: alpha: output", key=mallory.key)
    second = alpha.new_run()
    assert alpha.publish().published
    pulled = beta.pull()
    assert pulled.new == [("alpha", [second])], pulled
    assert any("modifies" in line and OUT in line for line in pulled.refused), pulled
    tip = git(beta.results / ".exchange", "rev-parse", "refs/sitebench/accepted").stdout.strip()
    changed = git(beta.results / ".exchange", "rev-parse", f"{tip}:alpha/{first}/{OUT}")
    assert changed.stdout.strip() != _blob(clone, f"alpha/{first}/{OUT}")
    assert (
        git(TEMPLATE, "hash-object", str(TEMPLATE / OUT)).stdout.strip() == changed.stdout.strip()
    )
    assert_signed_only_verified(world, alpha)
    assert tree_bytes(beta.show("alpha", first)) == tree_bytes(TEMPLATE)
    assert tree_bytes(beta.show("alpha", second)) == tree_bytes(TEMPLATE)


def test_a_remote_that_now_serves_other_bytes_for_a_run_is_refused_by_show(world):
    """The remote's history is replaced by one whose run of alpha has other output bytes
    under the same path: show fetches by the accepted tree's id, so it gets nothing of
    the new bytes, names the run, and writes nothing."""
    alpha, beta = world.site("alpha"), world.site("beta")
    run = alpha.new_run()
    assert alpha.publish().published and beta.pull().new == [("alpha", [run])]
    clone = world.hostile_clone()
    (clone / "alpha" / run / OUT).write_bytes(b"other bytes, same path\n")
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=m", "-c", "user.email=m@m", "commit", "-q", "--amend", "-m", "x")
    shutil.rmtree(world.bare)  # a remote rebuilt from the altered history only
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(world.bare)], check=True)
    git(clone, "push", "-q", str(world.bare), "HEAD:main")
    with pytest.raises(SitebenchError, match=f"no longer serves the run alpha/{run}") as err:
        beta.show("alpha", run)
    assert "nothing written" in str(err.value)
    assert not (beta.results / "alpha" / run).exists()
    assert not list((beta.results / "alpha").glob(".incoming-*"))
    # Its figures are those verified here: the store still reads them from the copy.
    with beta.act():
        from sitebench.results import store

        assert store.refresh("alpha") == 1
        runs = store.connect(sites=["alpha"]).sql("SELECT run, origin FROM runs").fetchall()
    assert [r for r, _ in runs] == [run] and runs[0][1].startswith("exchange ")


def test_the_store_indexes_other_sites_runs_from_git_once_and_refuses_hostile_ones(
    world, monkeypatch
):
    """Runs of other sites are indexed from the exchange's objects: only those accepted
    since the last refresh, never ``lstat``-ed, not again once written out by show; a
    hostile report is named on one line and skipped, the others indexed."""
    from sitebench.results import runfiles, store
    from sitebench.results.rundirs import load_run

    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    first = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    deep = {f"mallory/{RUN}/report.json": ("100644", b"[" * 5000 + b"]" * 5000)}
    write_tree(clone, run_files(world, extra=deep))
    world.push_as(clone, "results: mallory", key=mallory.key)
    assert beta.pull().refused == []
    said = []
    with beta.act():
        assert store.refresh_all(warn=said.append) == {"alpha": 1, "mallory": 0}
        assert [line for line in said if f"mallory/{RUN}" in line] == said and len(said) == 1
        assert "report.json" in said[0]
        second = alpha.new_run()
        assert alpha.publish().published and beta.pull().new == [("alpha", [second])]

        def no_lstat(run_path, relatives):
            raise AssertionError(f"lstat of {run_path}: a run from git has no files to stat")

        monkeypatch.setattr(runfiles, "stats", no_lstat)
        assert store.refresh("alpha") == 1  # only the run the pull brought
        beta.show("alpha", first)
        assert store.refresh("alpha") == 0  # written out: the same tree, indexed once
        con = store.connect(sites=["alpha"])
        runs = con.sql("SELECT run, origin FROM runs ORDER BY run").fetchall()
        count = con.execute("SELECT count(*) FROM figures WHERE run = ?", [first]).fetchall()[0][0]
    assert [r for r, _ in runs] == sorted([first, second])
    assert all(origin.startswith("exchange ") for _, origin in runs)
    with beta.act():
        expected = len(list(store.figures.rows_of_run(load_run(TEMPLATE), job_wall=True)))
    assert count == expected > 0


def _keypair(tmp_path, name):
    key = tmp_path / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key, (tmp_path / f"{name}.pub").read_text().split()[:2]


def test_one_ssh_keygen_per_commit_reads_every_signature_as_git_does(tmp_path):
    """verify.ssh_verified (one ``ssh-keygen -Y verify -I <site>`` per commit, the site a
    commit adds runs of) says good only where git's own check (``%G?``/``%GK``, two
    ssh-keygen per commit) says G with the same key, and for a good signature it does say
    so (the fast path is taken, not skipped): a commit signed by the site's key; by another
    site's key, an unknown key, a key past its valid-before or before its valid-after at
    the commit's time; under the namespace ``file``; with a malformed or doubled
    ``gpgsig``; and unsigned."""
    from sitebench.results import verify

    bare = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    keys = {name: _keypair(tmp_path, name) for name in ("alpha", "beta", "old", "new", "eve")}
    committed = 1767225600  # 2026-01-01T00:00:00Z
    signers = tmp_path / "allowed_signers"
    signers.write_text(
        f"alpha {' '.join(keys['alpha'][1])}\n"
        f"beta {' '.join(keys['beta'][1])}\n"
        f'gamma valid-before="20251201000000Z" {" ".join(keys["old"][1])}\n'
        f'delta valid-after="20260201000000Z" {" ".join(keys["new"][1])}\n'
    )
    tree = subprocess.run(
        ["git", "--git-dir", str(bare), "mktree"], input="", capture_output=True, text=True
    ).stdout.strip()

    def commit(site, header=None):
        payload = (
            f"tree {tree}\nauthor a <a@a> {committed} +0000\n"
            f"committer a <a@a> {committed} +0000\n\nresults: {site}: 1 run\n"
        )
        text = payload
        if header:
            head, _, message = payload.partition("\n\n")
            text = f"{head}\n{header(payload)}\n\n{message}"
        sha = write_commit(bare, text)
        return sha, site

    def signed(key, namespace="git", twice=False):
        def header(payload):
            armor = _ssh_sign(key, namespace)(payload)
            return "\n".join([_gpgsig(armor)] * (2 if twice else 1))

        return header

    cases = {
        "own key": commit("alpha", signed(keys["alpha"][0])),
        "another site's key": commit("alpha", signed(keys["beta"][0])),
        "unknown key": commit("alpha", signed(keys["eve"][0])),
        "past valid-before": commit("gamma", signed(keys["old"][0])),
        "before valid-after": commit("delta", signed(keys["new"][0])),
        "namespace file": commit("alpha", signed(keys["alpha"][0], "file")),
        "two gpgsig": commit("alpha", signed(keys["alpha"][0], twice=True)),
        "malformed": commit("alpha", lambda payload: _gpgsig(BROKEN_ARMOR)),
        "unsigned": commit("alpha"),
    }
    rules = verify.Rules(allowed_signers=str(signers))
    repo = verify.Git(bare)
    fast = verify.ssh_verified(repo, rules, dict(cases.values()))
    logged = verify._logged(repo, rules, [sha for sha, _ in cases.values()], verify=True)
    seen = {name: (logged[sha][:2], fast.get(sha)) for name, (sha, _) in cases.items()}
    for name, ((status, key), found) in seen.items():
        if found:
            assert (status, key) == ("G", found[0]) and found[1] == committed, (name, seen)
    assert [name for name, (_, found) in seen.items() if found] == ["own key"], seen
    assert seen["own key"][0][0] == "G" and seen["another site's key"][0][0] == "G", seen
    assert {seen[n][0][0] for n in ("unknown key", "past valid-before", "before valid-after")} == {
        "U"
    }, seen
    assert seen["namespace file"][0][0] == "B" and seen["unsigned"][0][0] == "N", seen


@pytest.mark.parametrize(
    "listing, revoked",
    [
        ("alpha,beta {key}", False),
        ("alph? {key}", False),
        ('alpha namespaces="git" {key}', False),
        ("alpha {key}", True),
    ],
    ids=["two principals", "a pattern", "another option", "a revocation file"],
)
def test_what_the_fast_check_cannot_read_as_git_does_is_left_to_git(tmp_path, listing, revoked):
    """results/README.md: a trust list with several principals on a line, patterns or other
    options, or a ``gpg.ssh.revocationFile`` set for git, is judged by git itself, never by
    the one-ssh-keygen-per-commit check: it says nothing of a commit alpha's key signed,
    and git's verdict is the one taken (G here, but not where the revocation file names
    alpha's key: the fast check, which passes git no revocation file, would have said
    good)."""
    from sitebench.results import verify

    bare = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    key, public = _keypair(tmp_path, "alpha")
    signers = tmp_path / "allowed_signers"
    signers.write_text(listing.format(key=" ".join(public)) + "\n")
    if revoked:
        revocations = tmp_path / "revoked_keys"
        revocations.write_text(" ".join(public) + "\n")
        git(bare, "config", "gpg.ssh.revocationFile", str(revocations))
    tree = subprocess.run(
        ["git", "--git-dir", str(bare), "mktree"], input="", capture_output=True, text=True
    ).stdout.strip()
    now = int(time.time())
    payload = (
        f"tree {tree}\nauthor a <a@a> {now} +0000\n"
        f"committer a <a@a> {now} +0000\n\nresults: alpha: 1 run\n"
    )
    head, _, message = payload.partition("\n\n")
    armor = _ssh_sign(key, "git")(payload)
    sha = write_commit(bare, f"{head}\n{_gpgsig(armor)}\n\n{message}")
    rules = verify.Rules(allowed_signers=str(signers))
    repo = verify.Git(bare)
    assert verify.ssh_verified(repo, rules, {sha: "alpha"}) == {}
    status, fp = verify._logged(repo, rules, [sha], verify=True)[sha][:2]
    assert (status == "G") != revoked, (status, fp)
    if revoked:
        # Without the revocation file, the fast check would have taken it.
        git(bare, "config", "--unset", "gpg.ssh.revocationFile")
        assert sha in verify.ssh_verified(repo, rules, {sha: "alpha"})


# -- figures.json: what every site takes of a run, audited against its report by show -------


def _figures_of(doc):
    from sitebench.results import figures_file

    return figures_file.encode(figures_file.derive(doc))


def test_a_run_travels_as_its_figures_and_show_brings_back_its_report(world):
    """A run holding figures.json: a pull takes it and the provenance, never report.json
    nor perflogs/ (bulk, as output/); the store indexes from it the figures the full report
    gives; show writes the run back byte for byte (the figures pass the audit)."""
    from sitebench.results import figures, figures_file, store
    from sitebench.results.rundirs import load_run

    alpha, beta = world.site("alpha"), world.site("beta")
    run = alpha.new_run()
    figures_file.write(alpha.results / "alpha" / run)
    assert alpha.publish().published and beta.pull().new == [("alpha", [run])]
    copy = world.tmp / "alpha-copy"
    git(world.tmp, "clone", "-q", str(world.bare), str(copy))
    taken = {p: _blob(copy, f"alpha/{run}/{p}") for p in tree_bytes(TEMPLATE)}
    taken["figures.json"] = _blob(copy, f"alpha/{run}/figures.json")
    absent = {path for path, blob in taken.items() if _absent(beta, blob)}
    assert "report.json" in absent and "figures.json" not in absent
    assert any(p.startswith("perflogs/") for p in absent)
    assert not any(p.startswith("provenance/") for p in absent)
    expected = {
        (r["check"], r["params"], r["environ"], r["figure"], r["value"])
        for r in figures.rows_of_run(load_run(TEMPLATE), job_wall=True)
    }
    with beta.act():
        assert store.refresh_all() == {"alpha": 1}
        got = store.connect(sites=["alpha"]).sql(
            'SELECT "check", params, environ, figure, value FROM figures'
        )
        assert set(got.fetchall()) == expected and expected
    assert tree_bytes(beta.show("alpha", run)) == tree_bytes(alpha.results / "alpha" / run)


def _forged_value(doc):
    figures = json.loads(_figures_of(doc))
    for case in figures["runs"][0]["testcases"]:
        for entry in (case.get("perfvalues") or {}).values():
            entry[0] = entry[0] * 10  # ten times what the report measured
    return {"figures.json": json.dumps(figures).encode()}


def _without_report(doc):
    return {"figures.json": _figures_of(doc), "report.json": None}


def _garbage_report(doc):
    return {"figures.json": _figures_of(doc), "report.json": b"\xff\xfe{not json"}


@pytest.mark.parametrize(
    "forge, expected",
    [
        (_forged_value, r"case '[^']+': perfvalues differ\(s\) from report.json"),
        (_without_report, "it has no report.json to back its figures.json"),
        (_garbage_report, "its report.json is not JSON"),
    ],
    ids=["figures_its_report_does_not_hold", "no_report", "report_not_json"],
)
def test_figures_a_report_does_not_back_are_refused_by_show(world, forge, expected, capsys):
    """mallory signs a figures.json its report.json does not hold (or has no readable
    report): its figures arrive (a pull never fetches the report), and show, which fetches
    the report, refuses the run naming it, writing nothing, and sets it aside: its figures
    leave the store, and compare, regressions and report each say so in one line."""
    from sitebench.results import store

    alpha, beta = world.site("alpha"), world.site("beta")
    honest = alpha.new_run()
    assert alpha.publish().published
    clone = world.hostile_clone()
    files = run_files(world)
    for name, data in forge(json.loads((TEMPLATE / "report.json").read_text())).items():
        if data is None:
            del files[f"mallory/{RUN}/{name}"]
        else:
            files[f"mallory/{RUN}/{name}"] = ("100644", data)
    write_tree(clone, files)
    assert world.push_as(clone, "results: mallory", key=world.site("mallory").key).returncode == 0
    pulled = beta.pull()
    assert pulled.refused == [] and ("mallory", [RUN]) in pulled.new, pulled
    with beta.act():
        assert store.refresh_all() == {"alpha": 1, "mallory": 1}
        assert _figure_count(store, "mallory") > 0
    for _ in range(2):  # refused again: listed once
        with pytest.raises(SitebenchError, match=expected) as err:
            beta.show("mallory", RUN)
    message = str(err.value)
    assert f"mallory/{RUN}: the figures every site took of it are not what its report" in message
    assert "nothing written" in message and "do not trust its figures" in err.value.fix
    assert "set aside here" in message
    assert not (beta.results / "mallory" / RUN).exists()
    assert not list((beta.results / "mallory").glob(".incoming-*"))
    capsys.readouterr()
    with beta.act():
        assert store.refresh_all() == {"alpha": 0, "mallory": 0}
        assert _figure_count(store, "mallory") == 0 and _figure_count(store, "alpha") > 0
        for argv in (
            ["compare", "alpha", "mallory"],
            ["regressions", "mallory"],
            ["report", "--out", str(world.tmp / "report.html")],
            ["exchange", "status"],
        ):
            main(argv)
            shown = capsys.readouterr()
            lines = [ln for ln in (shown.err + shown.out).splitlines() if "set aside" in ln]
            assert len(lines) == 1, (argv, shown)
            assert "1 run(s) of mallory set aside" in lines[0] and RUN in lines[0], lines
    assert beta.runs("alpha") == [honest] and beta.runs("mallory") == [RUN]


def _figure_count(store, site):
    return store.connect(sites=[site]).sql("SELECT count(*) FROM figures").fetchall()[0][0]


def test_a_figures_json_over_the_caps_is_refused(world, monkeypatch):
    """figures.json is sized as the report is: over the store's report cap the store names
    the run on one line and indexes the others; over the exchange's per-file cap a pull
    refuses the commit (the file is fetched with the provenance, so sized there)."""
    from sitebench.results import figures_file, store

    alpha, beta, mallory = world.site("alpha"), world.site("beta"), world.site("mallory")
    run = alpha.new_run()
    figures_file.write(alpha.results / "alpha" / run)
    files = run_files(world)
    doc = json.loads((TEMPLATE / "report.json").read_text())
    files[f"mallory/{RUN}/figures.json"] = ("100644", _figures_of(doc))
    clone = world.hostile_clone()
    write_tree(clone, files)
    world.push_as(clone, "results: mallory", key=mallory.key)
    assert alpha.publish().published
    assert sorted(beta.pull().new) == [("alpha", [run]), ("mallory", [RUN])]
    size = (alpha.results / "alpha" / run / "figures.json").stat().st_size
    monkeypatch.setenv("SITEBENCH_MAX_REPORT_BYTES", str(size - 1))
    said = []
    with beta.act():
        assert store.refresh_all(warn=said.append) == {"alpha": 0, "mallory": 0}
    assert len(said) == 2 and all("figures.json is" in s and "over the" in s for s in said), said
    monkeypatch.setenv("SITEBENCH_MAX_REPORT_BYTES", str(size))
    with beta.act():
        assert store.refresh_all(warn=said.append) == {"alpha": 1, "mallory": 1}
    other = "20261126T020202Z-h0st1l"
    big = {f"mallory/{other}/figures.json": ("100644", b" " * 300_000 + b"{}")}
    clone = world.hostile_clone()
    write_tree(clone, run_files(world, run=other, extra=big))
    world.push_as(clone, "results: mallory", key=mallory.key)
    pulled = beta.pull()
    assert pulled.new == [] and len(pulled.refused) == 1, pulled
    assert f'{other}/figures.json" is 300002 bytes, over the cap of 200000 per file' in (
        pulled.refused[0]
    )


def test_verdicts_are_the_same_checked_in_parallel_chunks_or_one_by_one(tmp_path, monkeypatch):
    """verify.check_range splits a long range among the cores: the signatures (one
    ssh-keygen per commit, or git's log in shares), the tree checks (shares, walked a few
    commits at a time) and the types of the objects a partial copy holds (listed at once in
    a small copy, looked up file by file in a large one). Twelve commits of mallory's, with
    a bad signature, a commit signed by a key nobody trusts and a file that is a tree in the
    middle of the chunks, get the same verdicts, in the same order, from a pull with every
    share and chunk as small as can be as from a pull that checks everything in one piece
    on one core; the fast signature check and git's own log in shares agree too."""
    world = World(tmp_path)
    world.make_remote()
    mallory, eve = world.site("mallory"), world.site("eve")
    clone = world.hostile_clone()
    planted = {}
    for i in range(12):
        run = f"20261126T0101{i:02d}Z-h0st1l"
        files = run_files(world, run=run)
        tree = b"100644 x\0" + bytes(20)  # a tree, listed as a file the pull fetches
        write = ["git", "-C", str(clone), "hash-object", "-t", "tree", "--stdin"]
        if i == 9:
            made = subprocess.run(write, input=tree, capture_output=True, check=True)
            files[f"mallory/{run}/provenance/x.json"] = ("100644", made.stdout.decode().strip())
        key = eve.key if i == 7 else mallory.key
        commit = plumb_commit(clone, files, key=key, message=f"results: mallory: {run}")
        if i == 4:
            raw = git(clone, "cat-file", "commit", commit).stdout.replace(run, run + " (edited)")
            git(clone, "update-ref", "HEAD", write_commit(clone, raw))
    # The tree written once every commit is made (mktree checks the type of what it has).
    subprocess.run([*write, "-w"], input=tree, capture_output=True, check=True)
    git(clone, "push", "-q", "origin", "HEAD:main")
    planted = {4: "bad signature", 7: "signed by a key not trusted here", 9: "but is a tree"}

    used = []
    real_held = verify.held_kinds
    monkeypatch.setattr(verify, "held_kinds", lambda *a: used.append(real_held(*a)) or used[-1])

    def pulled(name, cores, fast, all_objects_per_file, at_once):
        site = world.site(name)
        site.trusts(mallory)
        with monkeypatch.context() as m:
            m.setattr(verify, "_cores", lambda: cores)
            m.setattr(verify, "PARALLEL_FROM", 2)
            m.setattr(verify, "TREES_AT_ONCE", at_once)
            m.setattr(verify, "ALL_OBJECTS_PER_FILE", all_objects_per_file)
            if not fast:
                m.setattr(verify, "_ssh_program", lambda git, rules: None)
            result = site.pull()
        return result.new, result.refused

    serial = pulled("beta", cores=1, fast=False, all_objects_per_file=0, at_once=256)
    assert used == [None]  # one piece, each file looked up
    chunks = pulled("gamma", cores=3, fast=True, all_objects_per_file=4, at_once=2)
    assert used[-1] is not None  # the small copy's types listed at once
    logged = pulled("delta", cores=3, fast=False, all_objects_per_file=4, at_once=3)
    assert chunks == serial and logged == serial, (serial, chunks, logged)
    new, refused = serial
    # A commit after a refused one is judged against the last accepted: it adds its own run
    # and the refused commit's under its own good signature (publish would leave them out);
    # the commits after the tree carry it too.
    expected = [planted[4], planted[7]] + [planted[9]] * 3
    assert len(refused) == len(expected), refused
    for reason, reason_expected in zip(refused, expected):
        assert reason_expected in reason, (refused, expected)
    assert new == [("mallory", [f"20261126T0101{i:02d}Z-h0st1l" for i in range(9)])], new

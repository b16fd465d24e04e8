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

import pytest

from conftest import ROOT
from sitebench.common.errors import SitebenchError
from sitebench.cli import main
from exchange_world import TEMPLATE, World, git, plumb_commit, tree_bytes

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
    (alpha_run(clone) / "extra.json").write_text("{}")
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
    forged = subprocess.run(
        ["git", "-C", str(clone), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=raw,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    git(clone, "push", "-q", "origin", f"{forged}:main")
    return "bad signature"


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
    "provenance a list": {"provenance.json": lambda w: b"[1, 2, 3]"},
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
            "over the cap of 1000000 per run",
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
    # The file over the cap never arrived, even while the run was fetched to be shown.
    big = [path for path, (_, data) in extra.items() if len(data) > 200_000]
    assert all(_absent(beta, _blob(clone, path)) for path in big)


def test_bulk_rewritten_after_its_figures_were_taken_is_refused_show_gives_the_accepted(world):
    """A later commit changing an accepted run's output is refused; the accepted tip then
    holds the change (commits after it are accepted), yet show writes the run as accepted."""
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
    assert changed.stdout.strip() == _blob(clone, f"alpha/{first}/{OUT}")  # the tip holds it
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

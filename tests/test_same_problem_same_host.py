"""Like with like: figures matched on their problem size, and `local`'s references and history
belonging to the host they came from (issue 18)."""

import itertools
import json
import time

import pytest
import yaml

from conftest import FIXTURES, ROOT
from sitebench.common.errors import SitebenchError
from sitebench.results import compare as cmp
from sitebench.results import figures, propose, regress, rundirs, summary
from sitebench.results.rundirs import load_run
from sitebench.sites import host, references

REPORT = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())
SECONDS = itertools.count()
HOST_A = host.make({"cpu_model": "CPU A", "sockets": 1, "cores": 2, "cpus": 2, "memory_gib": 8})
HOST_B = host.make(
    {"cpu_model": "CPU B", "sockets": 2, "cores": 64, "cpus": 128, "memory_gib": 512}
)


def store_run(site="local", factor=1.0, n=None, fingerprint=HOST_A, new_fields=True):
    """A run of the real quick report (STREAM, HPL) with its figures times ``factor``,
    HPL at order ``n`` (default: as recorded, 9984), made on ``fingerprint``.
    ``new_fields``: the cases log problem_keys and host_fingerprint as checks do since
    2026-11-24; False: as the committed runs, without them."""
    report = json.loads(json.dumps(REPORT))
    for case in report["runs"][0]["testcases"]:
        name = case["display_name"].split()[0]
        if name == "HplCheck" and n:
            case["n"] = n
        if new_fields and not case.get("fixture"):
            case["problem_keys"] = figures.LEGACY_PROBLEM_KEYS[name]
            case["reference_keys"] = (
                ["scale", "num_threads"] if name == "StreamCheck" else ["scale"]
            )
            if name == "StreamCheck" and case["concrete_spec"]:
                case["stream_array_size"] = 17000000
            case["host_fingerprint"] = fingerprint["id"] if site == "local" else ""
            case["references_host"] = ""
        for entry in (case.get("perfvalues") or {}).values():
            entry[0] *= factor
    incoming = rundirs.Incoming(site, when=time.time() + next(SECONDS))
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    prov = {"cpu_arch": "zen3", "host_fingerprint": fingerprint}
    (incoming.path / "provenance/provenance.json").write_text(json.dumps(prov))
    return incoming.commit()


# -- the fingerprint -------------------------------------------------------------------------
CPUINFO = "".join(
    f"processor\t: {cpu}\nmodel name\t: Test CPU 9000\nphysical id\t: {cpu // 4}\n"
    f"core id\t\t: {cpu % 4 // 2}\n\n"
    for cpu in range(8)
)


def test_the_fingerprint_rule(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    # 23.5 GiB as the kernel reports it: rounded up to 24, the same after a kernel update.
    for kib in (24_684_092, 24_600_000):
        (tmp_path / "meminfo").write_text(f"MemTotal:       {kib} kB\nMemFree: 1 kB\n")
        fp = host.detect(tmp_path / "cpuinfo", tmp_path / "meminfo", environ={})
        assert {k: fp[k] for k in host.FIELDS} == {
            "cpu_model": "Test CPU 9000",
            "sockets": 2,
            "cores": 4,
            "cpus": 8,
            "memory_gib": 24,
        }
        assert fp["id"] == host.make(fp)["id"] and len(fp["id"]) == 12
    # Another machine of another size is another host.
    (tmp_path / "meminfo").write_text("MemTotal:       8000000 kB\n")
    assert host.detect(tmp_path / "cpuinfo", tmp_path / "meminfo", environ={})["id"] != fp["id"]


def test_committed_runs_get_a_derived_fingerprint_of_their_own():
    runs = sorted(p for p in (ROOT / "results/local").iterdir() if not p.name.startswith("."))
    # Runs stored before fingerprints were recorded derive theirs from their topology; later
    # runs carry the fingerprint of the host they ran on.
    older = [p for p in runs if "host_fingerprint" not in load_run(p).provenance]
    newer = [p for p in runs if p not in older]
    assert older and all(older[-1].name < p.name for p in newer)
    prints = {host.of_run(load_run(p).provenance, p)["id"] for p in older}
    assert len(prints) == 1  # all made on one machine
    derived = host.of_run(load_run(older[-1]).provenance, older[-1])
    assert derived["derived"] and derived["memory_gib"] is None
    assert derived["id"] != host.detect()["id"]  # memory unknown: never a live host
    # The committed references record exactly that host.
    refs = yaml.safe_load((ROOT / "site-configs/local/references.yaml").read_text())
    assert host.references_host(refs) == derived
    assert host.of_run({}, None)["id"] == host.UNKNOWN


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "entry, problem",
    [
        ("[1, 2]", "expected a mapping"),
        ("{cpu_model: X, id: abc}", "missing sockets"),
        (json.dumps({**HOST_A, "id": "000000000000"}), "does not match its fields"),
        (json.dumps({**HOST_A, "hostname": "vm"}), "unknown field(s) hostname"),
    ],
)
def test_a_bad_host_entry_is_refused(tmp_path, entry, problem):
    path = tmp_path / "references.yaml"
    path.write_text(f"$host: {entry}\n")
    with pytest.raises(SitebenchError, match=r"\$host") as err:
        references.validate(path)
    assert problem in str(err.value)


def test_references_apply_on_their_host_only():
    assert host.references_verdict("local", HOST_A, HOST_A) == (True, "")
    applies, why = host.references_verdict("local", HOST_A, HOST_B)
    assert not applies and "\n" not in why
    assert why.startswith("no static reference applied") and "CPU A" in why and "CPU B" in why
    assert "./sitebench references local --write" in why
    assert "record no host" in host.references_verdict("local", None, HOST_B)[1]


# -- the problem size ------------------------------------------------------------------------
def test_problem_sizes_are_read_from_new_and_committed_runs():
    committed = sorted((ROOT / "results/local").iterdir())
    sizes = {}
    for path in (committed[0], committed[-1]):
        for row in figures.rows_of_run(load_run(path)):
            sizes.setdefault((path.name, row["check"]), set()).add(row["problem"])
    last = committed[-1].name
    assert sizes[last, "HplCheck"] == {json.dumps({"n": 9984, "nb": 192, "p": 1, "q": 2})}
    assert sizes[last, "NpbCheck"] == {'{"npb_class": "A"}'}
    # STREAM's array size, from the concrete spec of runs that did not log it.
    assert sizes[last, "StreamCheck"] == {'{"stream_array_size": 17000000}'}
    # The first runs did not log NPB's class: a size of its own, never "A".
    assert sizes.get((committed[0].name, "NpbCheck"), {'{"npb_class": null}'}) == {
        '{"npb_class": null}'
    }
    assert figures.shown_problem('{"n": 9984, "nb": 192}') == "n=9984 nb=192"


def test_compare_refuses_a_ratio_across_problem_sizes(results_root):
    for f in (1.0, 1.01, 0.99):
        store_run("a", f)
        store_run("b", 2 * f, n=8000)
    table = cmp.compare(cmp.Side.parse("a"), cmp.Side.parse("b"))
    hpl = table[table["check"] == "HplCheck"]
    assert len(hpl) == 1 and hpl["ratio"].isna().all()
    assert hpl["beyond_noise"].tolist() == [cmp.NOT_COMPARED]
    assert hpl["problem"].tolist() == ["A: n=9984 nb=192 p=1 q=2 | B: n=8000 nb=192 p=1 q=2"]
    # STREAM is the same size on both sides: compared as before.
    stream = table[table["check"] == "StreamCheck"]
    assert stream["ratio"].tolist() == pytest.approx([2.0] * len(stream))
    text = cmp.render(table, "a", "b")
    assert "NOT COMPARED, no common problem size (1 figures):" in text
    assert "HplCheck %scale=quick (gflops): A: n=9984" in text
    rows = json.loads(cmp.render(table, "a", "b", "json"))["rows"]
    assert [r["beyond_noise"] for r in rows if r["check"] == "HplCheck"] == [cmp.NOT_COMPARED]


def test_compare_with_nothing_of_the_same_size_says_so(results_root):
    store_run("a", new_fields=False)
    store_run("b", n=8000)
    only_hpl = cmp.compare(cmp.Side.parse("a"), cmp.Side.parse("b"))
    only_hpl = only_hpl[only_hpl["check"] == "HplCheck"]
    text = cmp.render(only_hpl, "a", "b")
    assert text.startswith("no figure of the same problem size is present in both a and b")
    assert "n=9984" in text and "n=8000" in text


# -- history and references per host ---------------------------------------------------------
def test_drift_is_judged_against_the_same_host_only(results_root):
    for f in (1.0, 1.01, 0.99, 1.004, 0.996, 1.008):
        store_run(factor=2 * f, fingerprint=HOST_B)  # a much faster machine's history
    run, earlier, df = regress.check_site("local", store_run().name)
    assert earlier == [] and set(df["drift"]) == {"history too short"}
    assert "0 earlier run(s) of the same host" in regress.render("local", run, earlier, df)
    for f in (1.0, 1.01, 0.99, 1.004, 0.996):
        store_run(factor=f)
    last = store_run(factor=1.002)
    _, earlier, df = regress.check_site("local", last.name)
    assert len(earlier) == 6 and set(df["drift"]) == {""}


def test_drift_never_mixes_problem_sizes(results_root):
    for f in (1.0, 1.01, 0.99, 1.004, 0.996, 1.008):
        store_run(factor=f, n=8000)
    _, earlier, df = regress.check_site("local", store_run().name)
    hpl = df[df["check"] == "HplCheck"]
    assert len(earlier) == 6 and hpl["drift"].tolist() == ["history too short"]


def test_named_sites_keep_site_wide_history(results_root):
    for f in (1.0, 1.01, 0.99, 1.004, 0.996):
        store_run("cluster", f, fingerprint=HOST_B)
    _, earlier, df = regress.check_site("cluster", store_run("cluster").name)
    assert len(earlier) == 5 and set(df["drift"]) == {""}


def test_the_summary_says_why_no_reference_applied(results_root):
    store_run(fingerprint=HOST_B)
    path = store_run()
    text = summary.summarize(path, results_root)
    assert "0 earlier run(s) of local of this host" in text
    lines = [line for line in text.splitlines() if "no static reference applied" in line]
    assert len(lines) == 1 and "record no host" in lines[0]
    assert "./sitebench references local --write" in lines[0]


def test_references_are_proposed_from_this_hosts_runs_and_name_it(results_root, tmp_path):
    for f in (1.0, 1.01, 0.99):
        store_run(factor=2 * f, fingerprint=HOST_B)
    for f in (1.0, 1.01, 0.99):
        store_run(factor=f, n=8000)  # the newest runs: host A, another N
    store_run(n=9984)
    proposal, notes, runs = propose.propose("local", last=3, root=results_root)
    assert proposal["$host"] == HOST_A
    assert "3 run(s) of other hosts left out" in " ".join(notes)
    # HPL: the newest size (N=9984) has one run only; the 8000 runs are left out.
    assert any("problem size 'n=8000 nb=192 p=1 q=2' left out" in n for n in notes), notes
    refs = tmp_path / "references.yaml"
    propose.apply("local", refs, last=3, root=results_root, write=True)
    written = references.validate(refs)
    assert list(written)[0] == "$host" and written["$host"]["id"] == HOST_A["id"]


def test_the_report_shows_each_site_at_its_newest_problem_size(results_root, tmp_path):
    from sitebench.report import data

    store_run("a", n=8000)
    store_run("a")  # newest: N = 9984
    notes = []
    loaded = data.load(results_root=results_root, store_dir=tmp_path / "index", warn=notes.append)
    hpl = loaded.figures[loaded.figures["check"] == "HplCheck"]
    assert set(hpl["problem"]) == {json.dumps({"n": 9984, "nb": 192, "p": 1, "q": 2})}
    assert set(hpl["run"]) == {sorted(p.name for p in (results_root / "a").iterdir())[-1]}
    assert notes == [  # gflops and the job's wall time
        "a: 2 HplCheck figures of problem size n=8000 nb=192 p=1 q=2 left out: the report "
        "shows the newest size, n=9984 nb=192 p=1 q=2"
    ]

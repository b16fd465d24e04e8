"""The site's references reach every check as ReFrame's ``$ref`` gave them, parsed once.

sitebench/run/loading.py builds each check's references from one parse of the file per
ReFrame process (ReFrame 4.10.4 parsed it once per test instance) and takes ReFrame's
``variables`` alias off its deprecation-warning stack walk (issue 19). ReFrame's own command
line loads the checks of the local site (tests/fixtures/reference-loading/load_and_compare.py)
and, for every instance, the references sitebench gave it are set against the ones ReFrame's
``{'$ref': file}`` builds for it: their index, their data and both resolved on the partition.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT
from sitebench.sites import host

SCRIPT = FIXTURES / "reference-loading" / "load_and_compare.py"

THIS_HOST = "$host: " + json.dumps(host.detect()) + "\n"
OTHER_HOST = "$host: " + json.dumps(host.make({"cpu_model": "Other CPU"})) + "\n"
HPL = "HplCheck:\n  $index: [scale]\n  quick: {gflops: [88.1, -0.3, null, Gflop/s]}\n"

#: References files whose every check must come out of sitebench's loading exactly as out
#: of ReFrame's ``$ref``: the references, or the same error.
FILES = {
    "this-host": THIS_HOST + HPL,
    "other-host": OTHER_HOST + HPL,
    "xfail-and-no-index": (
        "HplCheck:\n  $index: [scale]\n"
        "  quick: {gflops: [$xfail, known issue, [88.1, -0.3, null, Gflop/s]]}\n"
        "StreamCheck:\n  local:default: {Triad: [22100, -0.4, null, MB/s]}\n"
    ),
    "empty-mapping": "{}\n",
    "empty-file": "",
    "entry-not-a-list": "HplCheck:\n  $index: [scale]\n  quick: {gflops: 88.1}\n",
    "unknown-modifier": (
        "HplCheck:\n  $index: [scale]\n  quick: {gflops: [$maybe, [88.1, -0.3, null, x]]}\n"
    ),
    "wrong-length": "HplCheck:\n  $index: [scale]\n  quick: {gflops: [88.1, -0.3]}\n",
    "too-shallow": "HplCheck:\n  $index: [scale, num_tasks]\n  quick: [88.1, -0.3, null, x]\n",
    "not-yaml": "HplCheck: {$index: [scale], quick: {gflops: [1, 2\n",
}


def load_and_compare(tmp, references=None, files=()):
    """Run ReFrame's listing of the local site's checks through the comparison script."""
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "compare.json"
    env = dict(os.environ, COMPARE_OUT=str(out), COMPARE_FILES=os.pathsep.join(files))
    env.pop("SITEBENCH_REFERENCES", None)
    if references:
        env["SITEBENCH_REFERENCES"] = references
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "-C",
            str(ROOT / "site-configs/local/reframe.py"),
            "-c",
            str(ROOT / "reframe-checks"),
            "--prefix",
            str(tmp / "rfm"),
            "-l",
        ],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reference-files")
    found = {}
    for name, text in FILES.items():
        found[name] = tmp / f"{name}.yaml"
        found[name].write_text(text)
    found["missing"] = tmp / "missing.yaml"
    return {name: str(path) for name, path in found.items()}


MADE_ON = "x86_64_v4"


def local_references_here(tmp):
    """The local site's references, indexed by the micro-architecture they were made on
    (x86_64_v4); on a machine of another one (an icelake VM) none applies, and the test
    would compare empty references only: there the entries stand for this machine's."""
    own = ROOT / "site-configs/local/references.yaml"
    arch = json.loads((ROOT / "site-configs/local/topology.json").read_text())["arch"]
    if arch == MADE_ON:
        return own
    copy = tmp / "references-here.yaml"
    copy.write_text(own.read_text().replace(f"\n  {MADE_ON}:\n", f"\n  {arch}:\n"))
    return copy


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, paths):
    """The local site's own references, and every file of FILES beside them."""
    tmp = tmp_path_factory.mktemp("local")
    references = local_references_here(tmp)
    given = None if references == ROOT / "site-configs/local/references.yaml" else references
    result = load_and_compare(tmp, references=given and str(given), files=paths.values())
    result["expected_file"] = str(references)
    return result


def test_every_check_gets_the_references_ref_gave_it(loaded):
    assert loaded["reference_file"] == loaded["expected_file"]
    checks = loaded["checks"]
    assert len(checks) > 100  # every instance ReFrame made, not only those listed
    for row in checks:
        assert row["ours"] == row["theirs"], row["name"]
        assert row["ours_resolved"] == row["theirs_resolved"], row["name"]
    # The comparison covers real references, not only empty ones.
    assert any(row["ours"]["data"] for row in checks)
    assert any(row["ours_resolved"] for row in checks)


def test_the_references_are_parsed_once_and_no_deprecation_stack_is_walked(loaded):
    assert loaded["parses"] == 1
    assert loaded["cached"] == 1
    assert loaded["walks"] == 0
    # ReFrame's deprecated `variables` is still the alias of `env_vars` it was.
    assert loaded["variables_alias"] == {"same": True, "env_vars": {"SITEBENCH_ALIAS": "1"}}


@pytest.mark.parametrize("name", [*FILES, "missing"])
def test_every_file_gives_what_ref_gives_or_the_same_error(loaded, paths, name):
    classes = loaded["files"][paths[name]]
    assert classes
    for check, sides in classes.items():
        assert sides["ours"] == sides["theirs"], (name, check)
    if name in ("this-host", "other-host", "xfail-and-no-index"):
        assert classes["HplCheck"]["ours"]["reference"]["data"]
    elif name != "empty-mapping":
        assert "error" in classes["HplCheck"]["ours"], name


def test_references_apply_only_on_the_host_they_were_made_on(tmp_path, paths):
    here = host.detect()["id"]
    made_here = load_and_compare(tmp_path / "here", references=paths["this-host"])
    kept = made_here["host"]
    assert kept["host_fingerprint"] == kept["references_host"] == here
    assert kept["reference"]["index"] == ["scale"]
    assert kept["reference"]["data"] == {"quick": {"gflops": [88.1, -0.3, None, "Gflop/s"]}}
    for row in made_here["checks"]:
        assert row["ours"] == row["theirs"], row["name"]
    made_elsewhere = load_and_compare(tmp_path / "elsewhere", references=paths["other-host"])
    dropped = made_elsewhere["host"]
    assert dropped["host_fingerprint"] == here
    assert dropped["references_host"] not in ("", here)
    assert dropped["reference"] == {"index": None, "data": {}}

"""NPB 3.0 Java (NPB3.0-JAV, the substitute for NPB-MPJ): the parser on the captures in
tests/fixtures/npb-java/ (README there says how), and (markers spack, slow) the recipe built
from the mirror and NpbJavaCheck run through ReFrame on CG and IS class A."""

import re

import pytest
import yaml

from conftest import FIXTURES, ROOT, build_in_temp_env
from sitebench.parsers import ParseError, npb_java

NJ = FIXTURES / "npb-java"
FILES = sorted(NJ.glob("*.txt"))


def readme_rows():
    rows = {}
    for line in (NJ / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".txt`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def test_every_fixture_is_documented():
    assert len(FILES) == 6 and {p.name for p in FILES} == set(readme_rows())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parse_matches_the_capture_notes(path):
    note = readme_rows()[path.name]
    if note.startswith("fails:"):
        with pytest.raises(ParseError) as err:
            npb_java.parse(path.read_text())
        assert note.removeprefix("fails:").strip().rstrip(".") in str(err.value)
        return
    name, cls, threads, mops, time = re.match(
        r"passes: (\w+) (\w), (\d+) threads, ([\d.]+) Mop/s, ([\d.]+) s\.", note
    ).groups()
    result = npb_java.parse(path.read_text())
    assert (result.benchmark, result.npb_class, result.threads) == (name, cls, int(threads))
    assert (result.mops_total, result.time) == (float(mops), float(time))
    assert result.verified


def test_a_failed_verification_is_read_as_such():
    text = (NJ / "cg_A_np2.txt").read_text().replace("= Successful", "= UNSUCCESSFUL")
    assert not npb_java.parse(text).verified


def test_a_truncated_run_has_no_banner():
    text = (NJ / "cg_A_np2.txt").read_text()
    with pytest.raises(ParseError, match="no NPB3_0_JAV result banner"):
        npb_java.parse(text[: text.index("*****")])


@pytest.mark.spack
@pytest.mark.slow
def test_check_runs_cg_and_is_verified(spack, tmp_path):
    import rfm_temp_env

    env = yaml.safe_load((ROOT / "environments/local/spack.yaml").read_text())["spack"]
    packages = {k: env["packages"][k] for k in ("java", "openjdk")}
    build_in_temp_env(spack, tmp_path, ["npb-java"], packages=packages)
    no_references = tmp_path / "no-references.yaml"
    no_references.write_text("{}\n")
    proc, cases = rfm_temp_env.run(
        spack,
        tmp_path / "env",
        tmp_path / "rfm-run",
        ["npb_java.py"],
        ["NpbJavaCheck.*benchmark=(cg|is)"],
        references=no_references,
    )
    ran = {c["display_name"]: c for c in cases}
    assert set(ran) == {
        "NpbJavaCheck %scale=quick %benchmark=cg",
        "NpbJavaCheck %scale=quick %benchmark=is",
    }, proc.stdout[-3000:]
    assert all(c["result"] == "pass" for c in ran.values()), proc.stdout[-3000:]
    for c in ran.values():
        assert c["npb_class"] == "A" and c["substitute_for"] == "NPB-MPJ"

"""The table of installed roots that `sitebench run` lists before ReFrame starts, and the
build fixtures' lookup in it (a root not listed is installed by its fixture)."""

import json
import os

from sitebench.spack import installed_roots
from sitebench.run.spack_build import listed_install

HPL = "/store/hpl-2.3-dp3t\thpl@2.3~openmp level=tuned arch=linux-debian12-x86_64_v4 /dp3t"
STREAM = "/store/stream-5.10-waat\tstream@5.10+openmp arch=linux-debian12-x86_64_v4 /waat"
# A dependency of a root: installed, but no fixture builds it.
OPENBLAS = "/store/openblas-0.3.21-k2m\topenblas@0.3.21 arch=linux-debian12-x86_64_v4 /k2m"


def lock(tmp_path, *hashes):
    env = tmp_path / "env"
    env.mkdir(exist_ok=True)
    roots = [{"hash": h, "spec": f"root-{h}"} for h in hashes]
    (env / "spack.lock").write_text(json.dumps({"roots": roots}))
    return env


def test_the_table_lists_installed_roots_of_its_environment_only(tmp_path):
    env = lock(tmp_path, "dp3t", "waat", "budz")  # budz: a root not installed
    text = installed_roots.table(env, "\n".join([OPENBLAS, HPL, STREAM]) + "\n")
    assert text.splitlines() == [f"# {os.path.realpath(env)}", HPL, STREAM]


def test_a_fixture_finds_its_root_by_package_name(tmp_path):
    env = lock(tmp_path, "dp3t", "waat")
    table = tmp_path / "installed-roots.txt"
    table.write_text(installed_roots.table(env, f"{HPL}\n{STREAM}\n"))
    assert listed_install("hpl", env, table) == HPL
    assert listed_install("stream", env, table) == STREAM
    # Not listed, narrowed by the user (-S spack_spec=...), or no table: Spack decides.
    assert listed_install("npb", env, table) is None
    assert listed_install("hpl ^openblas", env, table) is None
    assert listed_install("hpl", env, None) is None
    assert listed_install("hpl", env, tmp_path / "missing.txt") is None


def test_a_table_of_another_environment_is_not_used(tmp_path):
    env = lock(tmp_path, "dp3t")
    table = tmp_path / "installed-roots.txt"
    table.write_text(installed_roots.table(env, f"{HPL}\n"))
    other = tmp_path / "other"
    other.mkdir()
    assert listed_install("hpl", other, table) is None
    table.write_text("")
    assert listed_install("hpl", env, table) is None


def test_a_name_listed_twice_is_left_to_spack(tmp_path):
    env = lock(tmp_path, "dp3t", "x9q")
    second = "/store/hpl-2.3-x9q\thpl@2.3+openmp arch=linux-debian12-x86_64_v4 /x9q"
    table = tmp_path / "installed-roots.txt"
    table.write_text(installed_roots.table(env, f"{HPL}\n{second}\n"))
    assert listed_install("hpl", env, table) is None


def test_a_build_spack_reported_no_single_install_for_says_what_it_reported(tmp_path):
    """The failure names what `spack find` wrote: the stage directory holding spack-spec.txt
    is gone when a test's tmp_path is cleaned, the report and log stay."""
    from types import SimpleNamespace

    from sitebench.run.spack_build import SPEC_FILE, SpackBuild

    fixture = SimpleNamespace(stagedir=str(tmp_path))
    fixture._read = lambda name: SpackBuild._read(fixture, name)
    said = {}
    prefix = tmp_path / "store/osu"
    for case, text in (
        ("none", ""),
        ("two", f"{prefix}\tosu@7.2 /aaa\n{prefix}\tosu@7.2 /bbb\n"),
        ("no tab", "==> osu@7.2 /aaa\n"),
        ("no prefix", f"{prefix}\tosu@7.2 /aaa\n"),
    ):
        (tmp_path / SPEC_FILE).write_text(text)
        said[case] = SpackBuild._reported(fixture)
    assert said == {
        "none": "0 lines",
        "two": f"2 lines: {prefix}\tosu@7.2 /aaa | {prefix}\tosu@7.2 /bbb",
        "no tab": "no tab-separated prefix in '==> osu@7.2 /aaa'",
        "no prefix": f"the prefix {prefix} is no directory",
    }

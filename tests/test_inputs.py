"""Bad input is refused with an error that names what to fix."""

import pytest

from sitebench.sites import references
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "name",
    [
        "..",
        "../x",
        "a/b",
        "a b",
        "tab\there",
        "new\nline",
        "",
        ".hidden",
        "-flag",
        "x" * 65,
        "bell\x07",
        "a..b",
    ],
)
def test_unsafe_names_are_refused(name):
    with pytest.raises(SitebenchError, match="invalid site name") as err:
        check_name("site", name)
    assert "letters, digits" in err.value.fix


@pytest.mark.parametrize("name", ["local", "cluster-x", "arm64.qemu", "site_2"])
def test_safe_names(name):
    assert check_name("site", name) == name


GOOD = """
StreamCheck:
  $index: [$processor.arch, scale, num_threads]
  x86_64_v4:
    quick:
      1: {Triad: [22100, -0.4, null, MB/s]}
HplCheck:
  $index: [$processor.arch, scale]
  x86_64_v4:
    quick: {gflops: [88.1, -0.3, null, Gflop/s]}
"""


def write(tmp_path, text):
    path = tmp_path / "references.yaml"
    path.write_text(text)
    return path


def test_valid_references(tmp_path):
    data = references.validate(write(tmp_path, GOOD))
    assert data["HplCheck"]["x86_64_v4"]["quick"]["gflops"][0] == 88.1
    assert references.validate(write(tmp_path, "")) == {}


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "text, message",
    [
        ("StreamCheck: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "mapping of check names"),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [80, 0.3, -0.3, Gflop/s]}\n",
            "lower tolerance 0.3 is greater than upper tolerance -0.3",
        ),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [80, 0.1, 0.3, Gflop/s]}\n",
            "need lower <= 0 <= upper",
        ),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [fast, -0.1, 0.3, Gflop/s]}\n",
            "value must be a finite number",
        ),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [.nan, -0.1, 0.3, Gflop/s]}\n",
            "value must be a finite number",
        ),
        # YAML 1.1 reads 1.0e6 as a string; plain ReFrame then skips the check with a warning.
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [1.0e6, -0.1, 0.3, Gflop/s]}\n",
            "value must be a finite number, got '1.0e6'",
        ),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: 80}\n",
            "expected [value, lower, upper, unit]",
        ),
        (
            "HplCheck:\n  $index: [scale]\n  quick: {gflops: [80, -0.1, 0.3, 7]}\n",
            "unit must be a string",
        ),
        ("HplCheck:\n  $index: scale\n", "$index: expected a list"),
        (
            "HplCheck:\n  $index: [a, b]\n  x: {gflops: [80, -0.1, 0.1, G]}\n",
            "HplCheck.x.gflops: expected a mapping of figure names",
        ),
    ],
)
def test_bad_references_name_the_key(tmp_path, text, message):
    with pytest.raises(SitebenchError) as err:
        references.validate(write(tmp_path, text))
    assert message in str(err.value)
    assert "references.yaml" in str(err.value)


@pytest.mark.reliability_input
def test_missing_references(tmp_path):
    with pytest.raises(SitebenchError, match="is missing") as err:
        references.validate(tmp_path / "references.yaml")
    assert "empty mapping" in err.value.fix


# -- counts asked with -S -----------------------------------------------------------------
@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "args, words",
    [
        (["-S", "ranks=3"], ["-S ranks=3: ranks is a parameter", "'3' is not one of them"]),
        (["-S", "num_ranks=3"], ["set from the ranks parameter at setup and would be replaced"]),
        (["-SNpbCheck.ranks=2"], ["-S NpbCheck.ranks=2", "-n '%ranks=2'"]),
        (["--setvar=StreamCheck.num_threads=5"], ["-S StreamCheck.num_threads=5", "not one"]),
        (["-S", "threads=half"], ["-n '%threads=half'", "-S NpbJavaCheck.threads=half sets"]),
    ],
)
def test_a_count_the_checks_do_not_take_from_s_is_refused_with_the_list(args, words):
    """`-S ranks=3` would be ignored by ReFrame (a parameter), `-S num_ranks=3` replaced at
    setup: refused before anything runs, with the counts the checks list and how to pick one."""
    from sitebench.run import count_settings

    with pytest.raises(SitebenchError) as err:
        count_settings.check(["-n", "NpbCheck", *args])
    text = str(err.value)
    for word in words:
        assert word in text, text
    assert "1, 2, 4, 8, 16, quarter, half, all" in text


@pytest.mark.parametrize(
    "args",
    [
        ["-S", "PagesCheck.num_ranks=2"],  # a plain variable of that check: -S sets it
        ["-S", "NpbJavaCheck.threads=3"],
        ["-S", "npb_class=S", "-S", "max_nodes=1"],
        ["-n", "ranks=3"],  # not a setting
    ],
)
def test_settings_that_set_no_count_of_a_parameter_pass(args):
    from sitebench.run import count_settings

    count_settings.check(args)


def test_run_refuses_ranks_3_before_anything_runs(results_root):
    from conftest import sitebench

    proc = sitebench("run", "--", "-n", "NpbCheck", "-S", "ranks=3")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "-S ranks=3: ranks is a parameter" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (results_root / "local").exists() or not list((results_root / "local").iterdir())

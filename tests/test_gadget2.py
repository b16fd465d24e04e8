"""Gadget-2: the parser and the run's input on real outputs in tests/fixtures/gadget2/ (its
README says how each was captured): two complete lcdm_gas runs (1 and 2 ranks), a missing
initial-conditions file and a snapshot split over more files than ranks, both of which
Gadget-2 ends with exit status 0."""

import pytest

from conftest import FIXTURES
from sitebench.parsers import ParseError, gadget2
from sitebench.run import gadget2_input

G2 = FIXTURES / "gadget2"


def files(case):
    def text(name):
        path = G2 / case / name
        return path.read_text() if path.is_file() else None

    return text("stdout.txt"), text("cpu.txt"), text("energy.txt")


@pytest.mark.parametrize("case,ranks", [("np1_a0.11", 1), ("np2_a0.11", 2)])
def test_complete_runs_pass_with_their_figures(case, ranks):
    stdout, cpu, energy = files(case)
    assert gadget2.problems(stdout, cpu, energy, ranks, 0.11) == []
    result = gadget2.parse(stdout)
    assert (result.version, result.ranks) == ("2.0", ranks)
    assert result.last_step == (8, 0.11) and result.snapshot_done
    log = gadget2.parse_cpu(cpu)
    assert (log.step, log.time, log.ranks) == (8, 0.11, ranks)
    assert len(gadget2.parse_energy(energy)) == 1


def test_wall_time_steps_per_second_and_efficiency():
    one = gadget2.parse_cpu(files("np1_a0.11")[1])
    two = gadget2.parse_cpu(files("np2_a0.11")[1])
    assert (one.total_s, two.total_s) == (12.74, 9.84)
    assert one.steps_per_second == pytest.approx(8 / 12.74)
    # The check's efficiency: the 1-rank wall time over ranks x this one's.
    assert one.total_s / (2 * two.total_s) == pytest.approx(0.647, abs=1e-3)


def test_missing_initial_conditions_fail_although_gadget_exited_0():
    stdout, cpu, energy = files("np1_missing_ic_failed")
    found = gadget2.problems(stdout, cpu, energy, 1, 0.11)
    assert found == [
        "Gadget-2: Can't find initial conditions file.neither as " "'lcdm_gas_littleendian.dat.0'"
    ]


def test_more_snapshot_files_than_ranks_fail_after_the_last_step():
    stdout, cpu, energy = files("np1_files_per_snapshot2_failed")
    found = gadget2.problems(stdout, cpu, energy, 1, 0.11)
    assert found == [
        "Gadget-2: Number of processors must be larger or equal than All.NumFilesPerSnapshot."
    ]


def test_truncated_and_wrong_runs_are_named():
    stdout, cpu, energy = files("np2_a0.11")
    cut = stdout[: stdout.rindex("Begin Step")]
    assert gadget2.problems(cut, cpu, energy, 2, 0.11) == [
        "the last step began at time 0.10741, not at TimeMax 0.11",
        "cpu.txt ends at step 8 on 2 CPUs, stdout at step 7 on 2",
    ]
    assert gadget2.problems(stdout, cpu, energy, 1, 0.11)[0] == (
        "Gadget-2 ran on 2 processors, not 1"
    )
    assert gadget2.problems(stdout, None, None, 2, 0.11) == [
        "no cpu.txt in OutputDir",
        "no energy.txt in OutputDir",
    ]
    with pytest.raises(ParseError, match="did not start"):
        gadget2.parse("")
    with pytest.raises(ParseError, match="line 1 .* is not finite"):
        gadget2.parse_energy(energy.replace(energy.split()[3], "-nan", 1))


# -- the run's parameter file ------------------------------------------------------------


def shipped_param():
    """The captured runs' parameter file with the shipped lcdm_gas.param's relative paths."""
    text = (G2 / "np1_a0.11" / "gadget2.param").read_text()
    return gadget2_input.write_params(
        text,
        {
            "InitCondFile": "ICs/lcdm_gas_littleendian.dat",
            "OutputListFilename": "parameterfiles/outputs_lcdm_gas.txt",
            "TimeMax": "1.0",
        },
    )


def test_run_params_link_inputs_and_set_time_max(tmp_path):
    (tmp_path / "ICs").mkdir()
    (tmp_path / "parameterfiles").mkdir()
    (tmp_path / "ICs/lcdm_gas_littleendian.dat").write_bytes(b"x")
    (tmp_path / "parameterfiles/outputs_lcdm_gas.txt").write_text("0.5\n")
    run = gadget2_input.run_params(shipped_param(), str(tmp_path), "output", 0.11)
    assert run.params["InitCondFile"] == "lcdm_gas_littleendian.dat"
    assert run.params["OutputDir"] == "output/"
    assert run.params["TimeMax"] == "0.11"
    assert run.links == {
        "lcdm_gas_littleendian.dat": str(tmp_path / "ICs/lcdm_gas_littleendian.dat"),
        "outputs_lcdm_gas.txt": str(tmp_path / "parameterfiles/outputs_lcdm_gas.txt"),
    }
    # What the captured runs used: the same file, byte for byte.
    assert run.text == (G2 / "np1_a0.11" / "gadget2.param").read_text()
    assert gadget2_input.refusal(run, 1) is None
    full = gadget2_input.run_params(shipped_param(), str(tmp_path), "output")
    assert full.params["TimeMax"] == "1.0"


def test_refusals_before_the_run(tmp_path):
    run = gadget2_input.run_params(shipped_param(), str(tmp_path), "output", 0.11)
    assert gadget2_input.refusal(run, 1).startswith(
        f"initial conditions {tmp_path}/ICs/lcdm_gas_littleendian.dat not found"
    )
    (tmp_path / "ICs").mkdir()
    (tmp_path / "parameterfiles").mkdir()
    (tmp_path / "ICs/lcdm_gas_littleendian.dat.0").write_bytes(b"x")  # a split IC
    (tmp_path / "parameterfiles/outputs_lcdm_gas.txt").write_text("0.5\n")
    split = gadget2_input.write_params(shipped_param(), {"NumFilesPerSnapshot": "2"})
    run = gadget2_input.run_params(split, str(tmp_path), "output", 0.11)
    assert list(run.links) == ["lcdm_gas_littleendian.dat.0", "outputs_lcdm_gas.txt"]
    assert gadget2_input.refusal(run, 2) is None
    assert gadget2_input.refusal(run, 1) == (
        "Gadget-2 refuses NumFilesPerSnapshot=2 on 1 rank(s) ('Number of processors must be "
        "larger or equal', io.c)"
    )
    with pytest.raises(ValueError, match="has no NoSuchTag"):
        gadget2_input.write_params(shipped_param(), {"NoSuchTag": "1"})


# -- the report: scaling section and table ---------------------------------------------------


def test_report_section_and_table_from_the_captures():
    """A stored run made from the two captures: wall time and efficiency per rank count."""
    from types import SimpleNamespace

    import pandas as pd

    from sitebench.report import sections, seed_tables
    from sitebench.results import figures as figure_rows

    one = gadget2.parse_cpu(files("np1_a0.11")[1])
    cases = []
    for ranks, case in ((1, "np1_a0.11"), (2, "np2_a0.11")):
        log = gadget2.parse_cpu(files(case)[1])
        perf = {
            "wall_time": [log.total_s, 0, None, None, "s"],
            "steps_per_second": [log.steps_per_second, 0, None, None, "steps/s"],
            "efficiency": [one.total_s / (ranks * log.total_s), 0, None, None, "fraction"],
        }
        cases.append(
            {
                "name": "Gadget2Check",
                "display_name": f"Gadget2Check %scale=quick %ranks={ranks}",
                "system": "local",
                "partition": "default",
                "environ": "gcc-openmpi",
                "result": "pass",
                "scale": "quick",
                "ranks": str(ranks),
                "num_ranks": ranks,
                "problem": "lcdm_gas",
                "time_max": 0.11,
                "reference_keys": ["scale", "problem", "num_ranks"],
                "perfvalues": {f"local:default:{k}": v for k, v in perf.items()},
            }
        )
    run = SimpleNamespace(
        site="local",
        name="r1",
        provenance={"cpu_arch": "x86_64_v4"},
        report={
            "session_info": {"time_start": "2026-11-26T14:10:00"},
            "runs": [{"testcases": cases}],
        },
    )
    figs = pd.DataFrame(list(figure_rows.rows_of_run(run)))
    table = seed_tables.gadget2_scaling(figs)
    assert list(table["ranks"][:2]) == [1, 2]
    assert list(table["wall_time"][:2]) == [12.74, 9.84]
    assert table["efficiency"].iloc[1] == pytest.approx(12.74 / (2 * 9.84))
    assert table.iloc[-1]["site"] == "the study" and pd.isna(table.iloc[-1]["wall_time"])
    figs["site_label"], figs["date"], figs["hostname"], figs["href"] = "local", "d", "vm", "#"
    figs["ranks"] = pd.array(seed_tables.with_vars(figs, "num_ranks")["num_ranks"], dtype="Int64")
    runs = pd.DataFrame({"site": ["local"], "emulated": [False]})
    (section,) = [
        s for s in sections.seed_sections(figs, runs, ["local"]) if s.anchor == "gadget2"
    ]
    assert len(section.charts) == 2 and len(section.table) == 3

"""Energy figures: the power settings, the readers on recorded outputs, and ReFrame runs.

This machine has no RAPL powercap, no BMC and no Slurm: the readers are tested
on outputs recorded elsewhere (tests/fixtures/energy/README.md names each
source), the RAPL mechanism on a copy of a recorded powercap tree whose
counters the test advances, IPMI and Slurm through stand-ins that print
recorded outputs.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from sitebench.run.energy import EnergyError
from sitebench.run.benchmark import LAUNCH_FILE
from sitebench.run.energy.config import IPMI_COMMAND, SYSFS_ROOT, PowerConfig, power_config
from sitebench.run.energy.measure import SAMPLER, read_sacct, sacct_command
from sitebench.run.energy.readers import (
    default_zones,
    ipmi_energy,
    ipmi_watts,
    parse_samples,
    rapl_energy,
    rapl_zones,
    sacct_energy,
)

ENERGY = FIXTURES / "energy"
TREE = ENERGY / "rapl-procfs" / "powercap"
IPMITOOL = ENERGY / "standins" / "ipmitool.sh"
SACCT = ENERGY / "standins" / "sacct.sh"
TINY_CHECK = ENERGY / "rfm" / "tiny_energy_check.py"
# runuser lives in /usr/sbin, which PATH may lack.
RUNUSER = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")

# The procfs recording: package-0 and its core subzone, both wrapping at 262143328850 uJ.
PACKAGE_UJ = 240422366267
CORE_UJ = 118821284256
RANGE_UJ = 262143328850


# -- settings ---------------------------------------------------------------------------------


def test_no_power_setting_means_no_energy():
    assert power_config("site:part", None) is None


def test_power_settings_and_defaults():
    assert power_config("s:p", {"source": "rapl"}) == PowerConfig("rapl", sysfs_root=SYSFS_ROOT)
    rapl = power_config(
        "s:p", {"source": "rapl", "zones": ["intel-rapl:1"], "sysfs_root": "/x", "interval_s": 5}
    )
    assert (rapl.zones, rapl.sysfs_root, rapl.interval_s) == (("intel-rapl:1",), "/x", 5.0)
    assert power_config("s:p", {"source": "ipmi"}).command == IPMI_COMMAND
    sudo = power_config(
        "s:p", {"source": "ipmi", "command": "sudo -n ipmitool dcmi power reading"}
    )
    assert sudo.command[:2] == ("sudo", "-n")
    assert power_config("s:p", {"source": "slurm", "wait_s": 60}).wait_s == 60.0


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "settings, words",
    [
        ("rapl", ["extras['power']", "{'source': 'rapl'}"]),
        ({}, ["['source'] is missing", "'rapl', 'ipmi', 'slurm'"]),
        ({"source": "powercap"}, ["['source'] is 'powercap'", "'rapl', 'ipmi', 'slurm'"]),
        ({"source": "rapl", "zone": ["intel-rapl:0"]}, ["['zone']", "zones, sysfs_root"]),
        ({"source": "ipmi", "zones": []}, ["['zones'] is not a setting of source 'ipmi'"]),
        ({"source": "rapl", "zones": "intel-rapl:0"}, ["['zones']", "list of powercap zone"]),
        ({"source": "rapl", "zones": ["package-0"]}, ["['zones']", "'intel-rapl:0:1'"]),
        ({"source": "rapl", "sysfs_root": "sys/class"}, ["['sysfs_root']", "absolute path"]),
        ({"source": "rapl", "interval_s": 0}, ["['interval_s'] is 0", "positive"]),
        ({"source": "ipmi", "interval_s": "2"}, ["['interval_s'] is '2'", "number of seconds"]),
        ({"source": "ipmi", "command": []}, ["['command'] is []", "list of strings"]),
        ({"source": "slurm", "wait_s": True}, ["['wait_s'] is True"]),
    ],
)
def test_bad_power_settings_name_partition_key_and_fix(settings, words):
    with pytest.raises(ValueError) as err:
        power_config("cluster:compute", settings)
    message = str(err.value)
    assert message.startswith("partition cluster:compute: extras['power']")
    for word in words:
        assert word in message


# -- RAPL -------------------------------------------------------------------------------------


def sample(*args, cwd=None, user=None, sampler=SAMPLER):
    """One sample printed by the real sampler script."""
    command = ["sh", sampler, "sample", *map(str, args)]
    if user:
        command = [RUNUSER, "-u", user, "--", *command]
    proc = subprocess.run(command, capture_output=True, text=True, check=True, cwd=cwd)
    return proc.stdout


@pytest.fixture
def tree(tmp_path):
    """A writable copy of the recorded powercap tree."""
    copy = tmp_path / "powercap"
    shutil.copytree(TREE, copy)
    return copy


def advance(tree, zone, value):
    (tree / zone / "energy_uj").write_text(f"{value}\n")


def test_sampler_reads_the_recorded_tree(tree):
    zones = rapl_zones(parse_samples(sample("rapl", tree) * 2, "t")[0], tree)
    assert {z: (v.name, v.energy_uj, v.max_energy_range_uj) for z, v in zones.items()} == {
        "intel-rapl:0": ("package-0", PACKAGE_UJ, RANGE_UJ),
        "intel-rapl:0:0": ("core", CORE_UJ, RANGE_UJ),
    }
    # The core is part of the package: summing it would count it twice.
    assert default_zones(zones) == ["intel-rapl:0"]


def test_rapl_energy_sums_intervals_of_the_package(tree):
    before = sample("rapl", tree)
    advance(tree, "intel-rapl:0", PACKAGE_UJ + 12_500_000)
    advance(tree, "intel-rapl:0:0", CORE_UJ + 7_000_000)
    middle = sample("rapl", tree)
    advance(tree, "intel-rapl:0", PACKAGE_UJ + 30_000_000)
    samples = parse_samples(before + middle + sample("rapl", tree), "t")
    energy = rapl_energy(samples, tree)
    assert energy.energy_j == 30.0
    assert energy.parts == {"intel-rapl:0 (package-0)": 30.0}
    assert energy.duration_s == samples[-1].time_s - samples[0].time_s > 0
    both = rapl_energy(samples, tree, ["intel-rapl:0", "intel-rapl:0:0"])
    assert both.energy_j == 37.0


def test_rapl_counter_wraparound(tree):
    advance(tree, "intel-rapl:0", RANGE_UJ - 5_000_000)
    before = sample("rapl", tree)
    advance(tree, "intel-rapl:0", 25_000_000)
    energy = rapl_energy(parse_samples(before + sample("rapl", tree), "t"), tree)
    assert energy.energy_j == 30.0


def test_dram_subzones_are_summed_with_the_packages(tree):
    # A DRAM subzone as servers expose it (intel-rapl:N:M named "dram"), written here.
    dram = tree / "intel-rapl:0:1"
    dram.mkdir()
    (dram / "name").write_text("dram\n")
    (dram / "max_energy_range_uj").write_text("65712999613\n")
    advance(tree, "intel-rapl:0:1", 1_000_000)
    before = sample("rapl", tree)
    advance(tree, "intel-rapl:0", PACKAGE_UJ + 20_000_000)
    advance(tree, "intel-rapl:0:1", 4_000_000)
    energy = rapl_energy(parse_samples(before + sample("rapl", tree), "t"), tree)
    assert energy.parts == {"intel-rapl:0 (package-0)": 20.0, "intel-rapl:0:1 (dram)": 3.0}
    assert energy.energy_j == 23.0


def test_rapl_counters_that_do_not_move_are_not_energy(tree):
    samples = parse_samples(sample("rapl", tree) + sample("rapl", tree), "t")
    with pytest.raises(EnergyError, match="did not advance"):
        rapl_energy(samples, tree)


def test_rapl_missing_zone_and_missing_driver(tree, tmp_path):
    samples = parse_samples(sample("rapl", tree) * 2, "t")
    with pytest.raises(EnergyError, match=r"intel-rapl:1 not under .*fix extras\['power'\]"):
        rapl_energy(samples, tree, ["intel-rapl:1"])
    empty = tmp_path / "no-powercap"
    empty.mkdir()
    with pytest.raises(EnergyError, match="no RAPL zone under .*modprobe intel_rapl_msr"):
        rapl_energy(parse_samples(sample("rapl", empty) * 2, "t"), empty)


@pytest.mark.skipif(
    os.geteuid() != 0 or not RUNUSER, reason="needs root and runuser to act as nobody"
)
def test_rapl_counter_readable_by_root_only():
    # As on kernels with the CVE-2020-8694 fix: energy_uj 0400 root, read by another user.
    # The sampler is run from the world-readable copy too: nobody may not read the checkout.
    top = tempfile.mkdtemp(prefix="sitebench-rapl-")
    try:
        tree = Path(top) / "powercap"
        shutil.copytree(TREE, tree)
        sampler = Path(shutil.copy(SAMPLER, top))
        for path in [Path(top), sampler, *tree.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o444)
        (tree / "intel-rapl:0" / "energy_uj").chmod(0o400)
        text = sample("rapl", tree, user="nobody", cwd="/", sampler=sampler)
    finally:
        shutil.rmtree(top)
    assert "Permission denied" in text
    with pytest.raises(EnergyError) as err:
        rapl_energy(parse_samples(text * 2, "t"), tree)
    assert "intel-rapl:0/energy_uj" in str(err.value)
    assert "CVE-2020-8694" in str(err.value) and "run the benchmarks as root" in str(err.value)


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "0 sample"),
        ("### sample 1.0\nintel-rapl:0\tpackage-0\t5\t9\n", "1 sample"),
        ("hello\n### sample 1.0\n", "text before the first sample"),
        ("### sample now\n### sample 2.0\n", "not a number"),
        ("### sample 2.0\n### sample 1.0\n", "backwards"),
    ],
)
def test_bad_sample_files(text, match):
    with pytest.raises(EnergyError, match=match):
        parse_samples(text, "energy-samples.txt")


@pytest.mark.parametrize(
    "line, match",
    [
        ("intel-rapl:0\tpackage-0\t12x4\t262143328850", "not a counter value: '12x4'"),
        ("intel-rapl:0\tpackage-0\t\t262143328850", "not a counter value: ''"),
        ("intel-rapl:0 package-0 5 9", "garbled RAPL sample line"),
        ("intel-rapl:0\tpackage-0\tunreadable: cat: energy_uj: Input/output error\t9", "I/O"),
    ],
)
def test_garbled_rapl_values(line, match):
    samples = parse_samples(f"### sample 1.0\n{line}\n### sample 2.0\n{line}\n", "t")
    with pytest.raises(EnergyError, match=match.replace("I/O", "Input/output error")):
        rapl_energy(samples, "/sys/class/powercap")


# -- IPMI -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, watts",
    [
        ("ipmi-dcmi-215W-activated.txt", 215.0),
        ("ipmi-dcmi-197W-activated.txt", 197.0),
        # OpenBMC fills the reading and still says "deactivated": the watts count.
        ("ipmi-dcmi-360W-deactivated.txt", 360.0),
    ],
)
def test_ipmi_readings(name, watts):
    assert ipmi_watts((ENERGY / name).read_text()) == watts


@pytest.mark.parametrize(
    "name, rc, match",
    [
        ("ipmi-dcmi-0W-deactivated.txt", 0, "answered 0 W: it advertises DCMI"),
        ("ipmi-dcmi-failed-unspecified-ff.txt", 1, "because: Unspecified error \\(ff\\)"),
        ("ipmi-dcmi-failed-invalid-command-c1.txt", 1, "because: Invalid command \\(c1\\)"),
        ("ipmi-no-device.txt", 1, "no in-band IPMI device .*ipmi_devintf"),
        ("sacct-santis-38113.txt", 0, "no 'Instantaneous power reading' line"),
        ("sacct-empty.txt", 1, "reading' line \\(exit status 1\\): 'no output'"),
    ],
)
def test_ipmi_failures_say_why(name, rc, match):
    with pytest.raises(EnergyError, match=match):
        ipmi_watts((ENERGY / name).read_text(), rc)


def test_ipmi_garbled_reading():
    text = (ENERGY / "ipmi-dcmi-215W-activated.txt").read_text().replace(" 215 ", " 2l5 ")
    with pytest.raises(EnergyError, match="not a number: '2l5'"):
        ipmi_watts(text)


def ipmi_samples(tmp_path, *names, count):
    """``count`` samples by the real sampler through the stand-in, recorded outputs in turn."""
    args = ["ipmi", "sh", IPMITOOL, tmp_path / "calls", *(ENERGY / n for n in names)]
    return parse_samples("".join(sample(*args) for _ in range(count)), "t")


def test_ipmi_time_weighted_mean(tmp_path):
    samples = ipmi_samples(
        tmp_path, "ipmi-dcmi-215W-activated.txt", "ipmi-dcmi-197W-activated.txt", count=3
    )
    energy = ipmi_energy(samples)
    (t0, t1, t2) = (s.time_s for s in samples)
    # Trapezoids over 215, 197, 215 W.
    assert energy.energy_j == pytest.approx((t1 - t0) * 206 + (t2 - t1) * 206)
    assert energy.power_w == pytest.approx(206)
    assert energy.parts == {"samples": 3}


def test_ipmi_failed_sample_fails_the_run(tmp_path):
    samples = ipmi_samples(
        tmp_path,
        "ipmi-dcmi-215W-activated.txt",
        "ipmi-dcmi-failed-unspecified-ff.txt",
        count=2,
    )
    assert samples[1].rc == 1
    with pytest.raises(EnergyError, match=r"IPMI sample at .*: ipmitool: DCMI request failed"):
        ipmi_energy(samples)


# -- Slurm ------------------------------------------------------------------------------------


def test_sacct_energy_of_a_job():
    energy = sacct_energy((ENERGY / "sacct-santis-38113.txt").read_text(), 38113)
    assert (energy.energy_j, energy.duration_s) == (20543125.0, 2102.0)
    assert energy.power_w == pytest.approx(9773.1, abs=0.05)  # 4 nodes


@pytest.mark.parametrize(
    "name, jobid, match",
    [
        ("sacct-empty.txt", 38113, "no record of job 38113"),
        ("sacct-zero-energy.txt", 38113, "0 J for job 38113"),
        ("sacct-no-energy.txt", 38113, "AcctGatherEnergyType"),
        ("sacct-human-energy.txt", 38113, "'20.54M' .* not raw joules"),
        ("sacct-archer2-2658300-not-parsable.txt", 2658300, "not parsable \\(-P\\)"),
        ("sacct-santis-38113.txt", 4242, "no line for job 4242"),
    ],
)
def test_sacct_failures_say_why(name, jobid, match):
    with pytest.raises(EnergyError, match=match):
        sacct_energy((ENERGY / name).read_text(), jobid)


def test_sacct_is_asked_again_until_the_job_is_accounted(tmp_path):
    answers = [ENERGY / "sacct-empty.txt", ENERGY / "sacct-santis-38113.txt"]
    config = PowerConfig(
        "slurm", command=("sh", str(SACCT), str(tmp_path / "n"), *map(str, answers))
    )
    energy = read_sacct(config, "38113", tmp_path, poll_s=0.01)
    assert energy.energy_j == 20543125.0
    log = (tmp_path / "energy-sacct.txt").read_text()
    assert log.count("$ sh ") == 2 and "-j 38113 -X -n -P -o JobID,ConsumedEnergyRaw" in log
    assert sacct_command(PowerConfig("slurm", command=("sacct",)), 7)[:3] == ["sacct", "-j", "7"]


def test_sacct_gives_up_after_wait(tmp_path):
    config = PowerConfig(
        "slurm",
        command=("sh", str(SACCT), str(tmp_path / "n"), str(ENERGY / "sacct-empty.txt")),
        wait_s=0.05,
    )
    with pytest.raises(EnergyError, match="no record of job 38113"):
        read_sacct(config, "38113", tmp_path, poll_s=0.01)
    with pytest.raises(EnergyError, match="job has no id"):
        read_sacct(config, "", tmp_path)


# -- ReFrame ----------------------------------------------------------------------------------


def run_tiny_check(tmp_path, power, work="sleep 1", options=()):
    """Run the tiny check with ReFrame on a one-partition site whose extras['power'] is ``power``.

    The site takes the local site's perflog handler, so figures land in perflogs the same way.
    """
    (tmp_path / "references.yaml").write_text(
        "TinyEnergyCheck:\n  $index: [scale]\n  quick: {rate: [50.0, -0.5, null, rate/s]}\n"
    )
    extras = {"references": str(tmp_path / "references.yaml")}
    if power is not None:
        extras["power"] = power
    partition = {
        "name": "p",
        "scheduler": "local",
        "launcher": "local",
        "environs": ["e"],
        "features": ["spack", "scale_quick"],
        "extras": extras,
    }
    (tmp_path / "site.py").write_text(
        "import runpy\n"
        f"local = runpy.run_path({str(ROOT / 'site-configs/local/reframe.py')!r})\n"
        "site_configuration = {\n"
        f"    'systems': [{{'name': 'energytest', 'hostnames': ['.*'], "
        f"'partitions': [{partition!r}]}}],\n"
        "    'environments': [{'name': 'e', 'features': ['sitebench']}],\n"
        "    'logging': local['site_configuration']['logging'],\n"
        "}\n"
    )
    prefix = tmp_path / "rfm"
    proc = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "reframe"),
            "-C",
            str(tmp_path / "site.py"),
            "-c",
            str(TINY_CHECK),
            "--prefix",
            str(prefix),
            "--report-file",
            str(tmp_path / "report.json"),
            "-S",
            f"work={work}",
            *options,
            "-r",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    case = report["runs"][0]["testcases"][0]
    return proc, case, prefix


def perf(case, name):
    return case["perfvalues"][f"energytest:p:{name}"]


def test_rapl_run_adds_per_watt_figures(tmp_path, tree):
    work = (
        f"sleep 1; echo {PACKAGE_UJ + 30_000_000} > {tree}/intel-rapl:0/energy_uj; "
        f"echo {CORE_UJ + 10_000_000} > {tree}/intel-rapl:0:0/energy_uj; sleep 1"
    )
    proc, case, prefix = run_tiny_check(
        tmp_path, {"source": "rapl", "sysfs_root": str(tree), "interval_s": 0.5}, work
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert case["result"] == "pass" and case["power_source"] == "rapl"
    output = next(prefix.glob("output/energytest/p/e/TinyEnergyCheck_*"))
    samples = parse_samples((output / "energy-samples.txt").read_text(), "kept samples")
    assert len(samples) >= 4  # before, every 0.5 s of a 2 s run, after
    duration = samples[-1].time_s - samples[0].time_s
    assert 2.0 <= duration < 10
    assert perf(case, "energy_j")[0] == 30.0 and perf(case, "energy_j")[4] == "J"
    power = perf(case, "power_w")[0]
    assert power == pytest.approx(30.0 / duration) and perf(case, "power_w")[4] == "W"
    per_watt = perf(case, "rate_per_watt")
    assert per_watt[0] == pytest.approx(50.0 / power) and per_watt[4] == "rate/s/W"
    assert perf(case, "rate")[:2] == [50.0, 50.0]  # judged against its reference as before
    log = (prefix / "perflogs/energytest/p/TinyEnergyCheck.log").read_text().splitlines()
    header, line = log[0].split("|"), log[1].split("|")
    assert line[header.index("rate_per_watt_value")] == str(per_watt[0])
    assert line[header.index("power_source")] == "rapl"
    script = (output / "rfm_job.sh").read_text()
    assert (
        script.index("energy-sampler.sh sample")
        < script.index("sh -c")
        < script.rindex("energy-sampler.sh sample")
    )


def test_the_benchmarks_exit_status_passes_the_sampler(tmp_path, tree):
    # The checks' own postrun commands (parsec reads $?) and the job's exit code see it.
    work = f"sleep 1; echo {PACKAGE_UJ + 1_000_000} > {tree}/intel-rapl:0/energy_uj; (exit 3)"
    proc, case, prefix = run_tiny_check(
        tmp_path, {"source": "rapl", "sysfs_root": str(tree)}, work
    )
    assert case["result"] == "pass" and perf(case, "energy_j")[0] == 1.0
    assert case["job_exitcode"] == 3
    output = next(prefix.glob("output/energytest/p/e/TinyEnergyCheck_*"))
    script = (output / "rfm_job.sh").read_text()
    assert script.rstrip().endswith("(exit $sitebench_power_sampler_status)")
    # The launch timer sits innermost, right around the benchmark, inside the sampler.
    lines = script.splitlines()
    start = lines.index("sitebench_launch_start=$(date +%s.%N)")
    assert lines[start + 2] == "sitebench_launch_status=$?"
    assert "energy-sampler.sh sample" in "\n".join(lines[:start])
    assert (output / LAUNCH_FILE).read_text().split()[2] == "3"


def test_no_power_setting_changes_nothing(tmp_path):
    proc, case, prefix = run_tiny_check(tmp_path, None)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(case["perfvalues"]) == {"energytest:p:rate"}
    assert case["power_source"] == ""
    output = next(prefix.glob("output/energytest/p/e/TinyEnergyCheck_*"))
    assert "energy" not in (output / "rfm_job.sh").read_text()
    assert not list(output.glob("energy-*"))


def test_ipmi_run_through_stand_in_bmc(tmp_path):
    command = [
        "sh",
        str(IPMITOOL),
        str(tmp_path / "calls"),
        str(ENERGY / "ipmi-dcmi-215W-activated.txt"),
        str(ENERGY / "ipmi-dcmi-197W-activated.txt"),
    ]
    proc, case, _ = run_tiny_check(
        tmp_path, {"source": "ipmi", "command": command, "interval_s": 0.3}, "sleep 1.5"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 197 <= perf(case, "power_w")[0] <= 215
    assert perf(case, "rate_per_watt")[0] == pytest.approx(50.0 / perf(case, "power_w")[0])


def test_failing_source_fails_the_check_and_keeps_the_figures(tmp_path):
    command = ["sh", str(IPMITOOL), str(tmp_path / "calls")]
    command.append(str(ENERGY / "ipmi-dcmi-failed-unspecified-ff.txt"))
    proc, case, _ = run_tiny_check(tmp_path, {"source": "ipmi", "command": command})
    assert proc.returncode == 1
    assert case["result"] == "fail" and case["fail_phase"] == "performance"
    assert "source 'ipmi' of partition energytest:p" in case["fail_reason"]
    assert "DCMI request failed because: Unspecified error (ff)" in case["fail_reason"]
    # The benchmark's own figure was still logged and judged; no energy figures.
    assert set(case["perfvalues"]) == {"energytest:p:rate"}


def test_malformed_setting_fails_at_setup(tmp_path):
    proc, case, _ = run_tiny_check(tmp_path, {"source": "wattmeter"})
    assert proc.returncode == 1 and case["fail_phase"] == "setup"
    assert "partition energytest:p: extras['power']['source'] is 'wattmeter'" in (
        case["fail_reason"]
    )


def test_node_samplers_refuse_multi_node_runs(tmp_path, tree):
    proc, case, _ = run_tiny_check(
        tmp_path,
        {"source": "rapl", "sysfs_root": str(tree)},
        options=["-S", "num_tasks=2", "-S", "num_tasks_per_node=1"],
    )
    assert proc.returncode == 1 and case["fail_phase"] == "run"
    assert "reads one node and this run spans several: use source 'slurm'" in case["fail_reason"]


def test_slurm_source_needs_a_slurm_partition(tmp_path):
    proc, case, _ = run_tiny_check(tmp_path, {"source": "slurm"})
    assert proc.returncode == 1 and case["fail_phase"] == "setup"
    assert "scheduler is 'local'; Slurm energy needs jobs run by Slurm" in case["fail_reason"]

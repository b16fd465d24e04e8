"""The command line reads like its peers: `--help` groups the commands by task (as `spack
help`), every command and subcommand shows an example that parses, and the bash
completion generated from the parsers completes what the parsers accept."""

import shlex
import subprocess
import sys
import types

import pytest

from conftest import ROOT
from sitebench import cli
from sitebench.cli.common import subcommands


def command_name(module):
    return module.__name__.rsplit(".", 1)[1].replace("_", "-")


def missing_section_or_example(modules):
    """Commands that would land in no group of --help, or show no example."""
    problems = []
    for module in modules:
        if getattr(module, "section", None) not in cli.SECTIONS:
            problems.append(f"{command_name(module)}: no section (one of {list(cli.SECTIONS)})")
        if "./sitebench" not in getattr(module, "example", ""):
            problems.append(f"{command_name(module)}: no example")
    return problems


def test_every_command_has_a_section_and_an_example():
    assert missing_section_or_example(cli.modules()) == []


def test_a_command_without_section_or_example_is_caught():
    stray = types.SimpleNamespace(__name__="sitebench.cli.show", description="x")
    assert missing_section_or_example([stray]) == [
        f"show: no section (one of {list(cli.SECTIONS)})",
        "show: no example",
    ]
    stray.section, stray.example = "results", "  ./sitebench show local"
    assert missing_section_or_example([stray]) == []


def test_help_groups_the_commands_by_section():
    out = subprocess.run(
        [sys.executable, "-m", "sitebench", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    headers = [f"{section} ({task}):" for section, task in cli.SECTIONS.items()]
    positions = [out.index(h) for h in headers]
    assert positions == sorted(positions), "sections out of order"
    bounds = positions + [len(out)]
    for module in cli.modules():
        i = list(cli.SECTIONS).index(module.section)
        block = out[bounds[i] : bounds[i + 1]]
        assert f"\n  {command_name(module)} " in block, (command_name(module), block)
    assert max(len(line) for line in out.splitlines()) <= 100


def example_lines(parser):
    """(subcommand path, example line) for every parser, from its --help epilog."""
    for name, sub in subcommands(parser).items():
        assert sub.epilog and sub.epilog.startswith("example:"), name
        lines = [line for line in sub.epilog.splitlines()[1:] if line.strip()]
        assert lines, f"`{name} --help` shows no example"
        for line in lines:
            yield name, line
        for action, subsub in subcommands(sub).items():
            own = [line for line in (subsub.epilog or "").splitlines()[1:] if line.strip()]
            assert own, f"`{name} {action} --help` shows no example"


def command_words(line):
    """The words of the first command of a shell line (up to a redirection, pipe or &&)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    words = []
    for word in lex:
        if set(word) <= set("();<>|&"):
            break
        words.append(word)
    return words


def test_every_example_parses_with_its_command():
    top = cli.parser()
    shown = set()
    for name, line in example_lines(top):
        words = command_words(line)
        if words[0] != "./sitebench":
            continue  # a shell line around it (eval, spack)
        shown.add((name, words[1]))
        if words[1] in cli.PASSTHROUGH:
            continue
        try:
            args = top.parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"the example of {name} does not parse: {line}")
        assert args.command == words[1]
    # Each command's example shows the command itself (besides those around it).
    assert {name for name, used in shown if name == used} == set(
        command_name(m) for m in cli.modules()
    )


def test_a_named_command_parses_and_helps_as_with_every_command(capsys):
    # main() builds the parser of the named command only (no other command's imports).
    top = cli.parser()
    for module in cli.modules():
        name = command_name(module)
        alone = subcommands(cli.parser(name))
        assert list(alone) == [name]
        assert alone[name].format_help() == subcommands(top)[name].format_help()
    for argv in (["compare", "local"], ["compare", "a", "b", "--format", "xml"]):
        said = []
        for build in (cli.parser, lambda: cli.parser(argv[0])):
            with pytest.raises(SystemExit):
                build().parse_args(argv)
            said.append(capsys.readouterr().err)
        assert "sitebench compare: error" in said[0] and said[0] == said[1]
    # main() with a command imports no other command; with a typo, it lists them all.
    probe = (
        "import sys\nfrom sitebench import cli\ntry:\n    cli.main(sys.argv[1:])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('sitebench.cli.')))"
    )
    for argv, loaded in (
        (["compare", "--help"], ["sitebench.cli.common", "sitebench.cli.compare"]),
        (
            ["import-reframe-db", "--help"],
            ["sitebench.cli.common", "sitebench.cli.import_reframe_db"],
        ),
    ):
        proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True)
        assert proc.stdout.splitlines()[-1] == str(loaded), proc.stderr
    for argv in (["comapre"], ["import_reframe_db"]):
        proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True)
        assert "invalid choice" in proc.stderr and "sitebench.cli.tune" in proc.stdout


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    script = tmp_path_factory.mktemp("completion") / "sitebench.bash"
    proc = subprocess.run(
        [sys.executable, "-m", "sitebench", "completion", "bash"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    script.write_text(proc.stdout)

    def run(line):
        """What bash completes for the last word of line (as typed in the checkout)."""
        words = shlex.split(line) + ([""] if line.endswith(" ") else [])
        program = (
            f"source {shlex.quote(str(script))}\n"
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
            f"COMP_CWORD={len(words) - 1}\n"
            "_sitebench\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        done = subprocess.run(
            ["bash", "--norc", "-c", program], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return sorted(w for w in done.stdout.splitlines() if w)

    return run


def test_completion_follows_the_parsers(complete):
    assert complete("./sitebench ") == sorted(
        [command_name(m) for m in cli.modules()] + ["-h", "--help"]
    )
    assert complete("./sitebench co") == ["compare", "completion"]
    assert complete("./sitebench nightly ") == [
        "--help",
        "-h",
        "install",
        "remove",
        "run",
        "status",
    ]
    assert complete("./sitebench nightly install --via ") == ["cron", "scrontab", "systemd"]
    assert complete("./sitebench compare local --f") == ["--format"]
    assert complete("./sitebench cluster st") == ["start", "status", "stop"]
    sites = sorted(p.name for p in (ROOT / "site-configs").iterdir() if p.is_dir())
    assert "local" in sites
    assert complete("./sitebench run --site ") == sites
    assert complete("./sitebench validate l") == [s for s in sites if s.startswith("l")]
    # A value to type, or another program's arguments: left to bash's file completion.
    assert complete("./sitebench report --out ") == []
    assert complete("./sitebench spack fi") == []

"""README's fresh-machine apt line is the list the code and tests need (common/debian.py)."""

import re

from conftest import ROOT
from sitebench.common import debian
from sitebench.services.slurm import cluster
from sitebench.sites import qemu_site
from sitebench.discovery import local_site

HINT = re.compile(r"apt-get install ((?:[a-z0-9][a-z0-9.+-]*[ \t]*)+)")
#: Words that end a hint's package list ("apt-get install hpcc to compare").
PROSE = {"to", "and", "or", "for", "then"}


def readme_lines():
    """The package lists of README's `apt-get install ...` spans in "Two commands"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [span.split() for span in re.findall(r"`apt-get install ([^`]+)`", section)]


def test_the_readme_line_is_the_list():
    run, tests = readme_lines()
    assert run == list(debian.RUN), "README's run line differs from common/debian.py RUN"
    assert tests == list(debian.TEST), "README's test line differs from common/debian.py TEST"
    assert len(set(debian.ALL)) == len(debian.ALL)


def test_every_package_the_code_detects_is_listed():
    detected = set(cluster.PROGRAMS.values()) | {"slurmdbd"}  # cluster.missing_programs
    detected |= {p for *_, hint in local_site.TOOLCHAIN for p in hint.split()[2:]}
    assert detected <= set(debian.ALL), detected - set(debian.ALL)
    assert set(qemu_site.HOST_TOOLS.values()) <= set(debian.OPTIONAL)


def test_every_apt_hint_names_listed_packages():
    """A hint "apt-get install X" anywhere in the code or tests names a known package."""
    known = set(debian.ALL) | set(debian.OPTIONAL)
    unknown = set()
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    for path in files:
        for match in HINT.finditer(path.read_text()):
            words = match.group(1).split()
            for i, word in enumerate(words):
                if i and word in PROSE:
                    break
                if word not in known:
                    unknown.add(f"{path.relative_to(ROOT)}: {word}")
    assert not unknown, f"add to common/debian.py (and README's line): {sorted(unknown)}"
    # The fixes the tests give in their skip reasons are among them.
    for package in ("chromium", "hpcc", "slurmdbd", "mariadb-server", "libblas3"):
        assert package in debian.ALL

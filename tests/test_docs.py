"""The user guide in docs/ builds offline with Sphinx, warnings as errors and every
cross-reference resolved (nitpicky), every internal link of the built pages lands on a page
and an anchor that exist, and the generated reference covers every command and check."""

import html.parser
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"


class Links(html.parser.HTMLParser):
    """The ids and the hrefs/srcs of one HTML page."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


def broken_links(site):
    """'page: link' for every relative link of the built site whose file or anchor is
    missing (links to other hosts are not followed: the build is offline)."""
    pages = {}
    for page in site.rglob("*.html"):
        parser = Links()
        parser.feed(page.read_text())
        pages[page.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(site.resolve())}: {link}")
            elif parts.fragment and target.suffix == ".html":
                if parts.fragment not in pages[target].ids:
                    broken.append(f"{page.relative_to(site.resolve())}: {link}")
    return broken


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-n",
            "-q",
            "-b",
            "html",
            "-d",
            str(out.parent / "doctrees"),
            str(DOCS),
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    return out


def test_the_guide_builds_without_a_warning_and_every_link_resolves(built):
    assert (built / "index.html").is_file()
    assert broken_links(built) == []
    # The report's pictures are in the built guide.
    assert (built / "_images" / "report.png").is_file()
    assert (built / "_images" / "report-pingpong.png").is_file()


def test_the_link_check_catches_a_missing_page_and_anchor(tmp_path):
    (tmp_path / "a.html").write_text('<p id="here"><a href="a.html#here">ok</a></p>')
    (tmp_path / "b.html").write_text(
        '<a href="a.html#gone">x</a><a href="nowhere.html">y</a>'
        '<a href="https://example.org/">out</a><img src="_images/none.png">'
    )
    assert sorted(broken_links(tmp_path)) == [
        "b.html: _images/none.png",
        "b.html: a.html#gone",
        "b.html: nowhere.html",
    ]


def test_every_command_and_check_has_its_reference(built):
    from sitebench import cli
    from sitebench.cli.common import subcommands
    from sitebench.onboarding.validate import known_checks

    commands = Links()
    commands.feed((built / "reference" / "commands.html").read_text())
    for name, parser in subcommands(cli.parser()).items():
        assert f"cmd-{name}" in commands.ids, name
        for action in subcommands(parser):
            assert f"cmd-{name}-{action}" in commands.ids, (name, action)
    checks = Links()
    checks.feed((built / "reference" / "checks.html").read_text())
    for name in known_checks():
        assert f"check-{name.lower()}" in checks.ids, name


def test_the_readme_is_short_and_points_into_the_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 120
    guide_links = [
        line.split("](", 1)[1].split(")", 1)[0] for line in text.splitlines() if "](docs/" in line
    ]
    assert len(guide_links) >= 5
    for link in guide_links:
        source = ROOT / Path(link.split("#", 1)[0]).with_suffix(".rst")
        assert source.is_file(), f"README links to {link}: no {source.relative_to(ROOT)}"

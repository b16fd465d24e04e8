"""The package tree: one package per stage of the loop, imports in one direction only,
one module per command, a Site resolved once."""

import ast
import subprocess
import sys

import pytest

from conftest import ROOT
from sitebench.common import paths
from sitebench.common.errors import SitebenchError

SRC = ROOT / "src" / "sitebench"

#: The packages in the order of the loop; a module may import from its own package and
#: from the packages before it, never from one after it (the CLI, last, from all).
ORDER = (
    "common",
    "services",
    "spack",
    "sites",
    "discovery",
    "onboarding",
    "parsers",
    "run",
    "results",
    "report",
    "nightly",
    "perf",
    "cli",
)


def package_of(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "sitebench" else None


def imports(path, src=SRC):
    """Every sitebench package a module imports, at its top or inside a function."""
    tree = ast.parse(path.read_text())
    here = ".".join(path.relative_to(src.parent).with_suffix("").parts)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(package_of(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: within its own package
                found.add(package_of(here))
            elif node.module == "sitebench":
                found.update(a.name for a in node.names)
            else:
                found.add(package_of(node.module))
    return found - {None, "__version__"}


def test_every_module_lives_in_a_stage_package():
    loose = [p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules outside a stage package: {loose}"
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    assert set(packages) <= set(ORDER), set(packages) - set(ORDER)
    for name in packages:
        doc = ast.get_docstring(ast.parse((SRC / name / "__init__.py").read_text()))
        assert doc, f"sitebench/{name}/__init__.py says in its docstring which stage it serves"


def backward_imports(src=SRC):
    """ "<module> imports sitebench.<package>" for each import against the loop's order."""
    backwards = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if len(rel.parts) < 2:
            continue
        mine = ORDER.index(rel.parts[0])
        for pkg in imports(path, src):
            if pkg in ORDER and ORDER.index(pkg) > mine:
                backwards.append(f"{rel} imports sitebench.{pkg}")
    return backwards


def test_imports_go_one_way_along_the_loop():
    assert backward_imports() == []


def source_copy(tmp_path):
    """A copy of the package tree to plant probes in: never the tree itself, which the
    other test worker may be reading at that moment (flake8 failed on a probe it listed
    and found gone)."""
    import shutil

    copy = tmp_path / "sitebench"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_check_catches_a_backward_import(tmp_path):
    src = source_copy(tmp_path)
    (src / "spack" / "_probe_backwards.py").write_text(
        "from sitebench.results import store  # noqa: F401\n"
    )
    assert backward_imports(src) == ["spack/_probe_backwards.py imports sitebench.results"]


def module_imports(path, src=SRC):
    """Every sitebench module a module imports (``from sitebench.x import y`` names the
    module ``sitebench.x.y`` where that is a file, else ``sitebench.x``)."""
    here = ".".join(path.relative_to(src.parent).with_suffix("").parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sitebench."))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if not node.module.startswith("sitebench"):
                continue
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                is_module = (src.parent / name.replace(".", "/")).with_suffix(".py").is_file()
                found.add(name if is_module else node.module)
    return found - {here}


def import_cycles(src=SRC):
    """The cycles of the module import graph, each as the modules along it."""
    graph = {
        ".".join(p.relative_to(src.parent).with_suffix("").parts): module_imports(p, src)
        for p in src.rglob("*.py")
    }
    cycles, done = [], set()

    def visit(module, stack):
        if module in stack:
            cycles.append(stack[stack.index(module) :] + [module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, stack + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return cycles


def test_no_module_imports_itself_through_others():
    # Within a package too: discovery's local site and its modules' externals once
    # imported each other (the one-way order between packages does not see that).
    assert import_cycles() == []


def test_the_check_catches_an_import_cycle(tmp_path):
    src = source_copy(tmp_path)
    first, second = src / "discovery" / "_probe_first.py", src / "discovery" / "_probe_second.py"
    first.write_text("from sitebench.discovery import _probe_second  # noqa: F401\n")
    second.write_text("def later():\n    from sitebench.discovery import _probe_first  # noqa\n")
    assert import_cycles(src) == [
        [
            "sitebench.discovery._probe_first",
            "sitebench.discovery._probe_second",
            "sitebench.discovery._probe_first",
        ]
    ]


def test_one_module_per_command_each_with_its_parser():
    from sitebench import cli

    modules = cli.modules()
    files = {p.stem for p in (SRC / "cli").glob("*.py")} - {"__init__", "common"}
    assert {m.__name__.rsplit(".", 1)[1] for m in modules} == files
    for module in modules:
        assert module.description and module.__doc__, module.__name__
        assert callable(module.setup_parser) and callable(module.command), module.__name__
    # __init__ only dispatches: no command is defined there.
    tree = ast.parse((SRC / "cli" / "__init__.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert defined == {"modules", "parser", "main"}
    helps = subprocess.run(
        [sys.executable, "-m", "sitebench", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    for module in modules:
        assert module.__name__.rsplit(".", 1)[1].replace("_", "-") in helps.stdout


def test_a_site_is_resolved_once_with_its_folders(tmp_path, monkeypatch):
    from sitebench.sites.site import Site

    site = Site.resolve("local-slurm")
    assert site.environment == "local" and site.on_local_cluster and site.detected_here
    assert site.environment_dir == ROOT / "environments" / "local"
    assert site.references == ROOT / "site-configs/local-slurm/references.yaml"
    # The sites' root override moves every site path.
    (tmp_path / "site-configs/elsewhere").mkdir(parents=True)
    (tmp_path / "site-configs/elsewhere/reframe.py").write_text("site_configuration = {}\n")
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(tmp_path))
    other = Site.resolve("elsewhere")
    assert other.config_dir == tmp_path / "site-configs/elsewhere"
    assert other.environment_dir == tmp_path / "environments/elsewhere"
    assert paths.site_config_dir("x") == tmp_path / "site-configs/x"


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "name, message",
    [("nowhere", "unknown site 'nowhere'"), ("../etc", "invalid site name"), ("", "invalid")],
)
def test_a_bad_site_is_refused_naming_the_fix(name, message):
    from sitebench.sites.site import Site

    with pytest.raises(SitebenchError, match=message) as err:
        Site.resolve(name)
    assert err.value.fix

"""A source mirror of one site's environment, for sites without internet.

``./sitebench mirror --site <site> <dir>`` concretizes the site's environment
(once, as for a run), has Spack copy the source of every concrete spec into
``<dir>`` (``spack mirror create --all`` in the environment: the layout Spack
fetches from, sha256-named archives, checksums verified on the way in and
again at every later install), and writes ``site-configs/<site>/spack/
mirrors.yaml`` so the site's environment uses it. Carry ``<dir>`` to the
site; nothing is fetched there.
"""

from pathlib import Path

import yaml

from sitebench import local_site, paths, runner
from sitebench.errors import SitebenchError
from sitebench.files import write_atomic


def mirrors_file(site):
    return paths.site_config_dir(site) / "spack" / "mirrors.yaml"


def create(site, directory):
    """Fill ``directory`` with the sources of ``site``'s environment; return its URL."""
    directory = Path(directory).resolve()
    if directory.exists() and not directory.is_dir():
        raise SitebenchError(
            f"{directory} exists and is not a directory",
            "give a new or existing directory for the mirror",
        )
    spack, _version, _builtin, env_dir = runner.prepare(site)
    directory.mkdir(parents=True, exist_ok=True)
    spack.run("-e", env_dir, "mirror", "create", "--all", "-d", directory)
    url = f"file://{directory}"
    path = mirrors_file(site)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = (
        "# Written by `sitebench mirror`"
        + (" (local site: not in git)" if site == local_site.SITE else "")
        + ".\n"
    )
    mirrors = {"mirrors": {f"sitebench-{site}": {"url": url, "source": True, "binary": False}}}
    write_atomic(path, note + yaml.safe_dump(mirrors, sort_keys=False))
    return url

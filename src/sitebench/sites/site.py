"""A site, resolved once at the edge (a command, or a check reading its partition).

A :class:`Site` carries what every stage asks of a site: its checked name, its folders under
the sites' root (``site-configs/<name>/``, ``environments/<environment>/``, both moved
together by ``$SITEBENCH_SITES_ROOT``), its ``site.yaml`` settings and its references file.
Modules receive it and never resolve the name again. Results are keyed by the bare name:
``results/<site>/`` may hold sites whose configuration lives at another centre.
"""

from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.sites import site_settings

#: The site this machine is, detected on first use (its Spack config is not in git).
LOCAL = "local"


def known_sites():
    root = paths.sites_root() / "site-configs"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "reframe.py").is_file())


@dataclass(frozen=True)
class Site:
    name: str
    config_dir: Path
    settings: dict = field(compare=False)

    @classmethod
    def resolve(cls, name):
        """The site ``name`` of ``site-configs/``; a clear error when it is not one."""
        check_name("site", name)
        config_dir = paths.site_config_dir(name)
        if not (config_dir / "reframe.py").is_file():
            raise SitebenchError(
                f"unknown site {name!r}: {paths.shown(config_dir / 'reframe.py')} does not exist",
                f"use one of: {', '.join(known_sites()) or '(none)'} "
                "(or add a site: ./sitebench onboard NAME, see site-configs/README.md)",
            )
        return cls(name, config_dir, site_settings.load(name))

    @property
    def environment(self):
        """The environment the site builds with (``environments/<environment>/``)."""
        return self.settings["environment"]

    @property
    def environment_dir(self):
        return paths.environment_dir(self.environment)

    @property
    def reframe_config(self):
        return self.config_dir / "reframe.py"

    @property
    def references(self):
        return self.config_dir / "references.yaml"

    @property
    def spack_config_dir(self):
        return self.config_dir / "spack"

    @property
    def emulation(self):
        """The ``emulation:`` settings of a site run under QEMU, else None."""
        return self.settings.get("emulation")

    @property
    def on_local_cluster(self):
        """The site runs on ``./sitebench cluster`` (``slurm_cluster: true``)."""
        return bool(self.settings["slurm_cluster"])

    @property
    def detected_here(self):
        """Its environment is the local one: detected on this machine, not committed."""
        return self.environment == LOCAL

    def __str__(self):
        return self.name

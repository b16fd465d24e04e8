"""``site-configs/<site>/site.yaml``: what a site shares with others, as data (optional).

    environment: local     # build with environments/local (default: environments/<site>)
    slurm_cluster: true    # the site runs on `sitebench cluster`: its configuration and
                           # node list go into every run's provenance

A site without the file builds with its own environment and runs where its ReFrame
configuration says.
"""

import yaml

from sitebench import paths
from sitebench.errors import SitebenchError

KEYS = {"environment": str, "slurm_cluster": bool}


def load(site):
    path = paths.site_config_dir(site) / "site.yaml"
    if not path.is_file():
        return {"environment": site, "slurm_cluster": False}
    rel = path.relative_to(paths.ROOT)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise SitebenchError(f"{rel} is not valid YAML: {err}", "fix the syntax") from None
    if not isinstance(data, dict):
        raise SitebenchError(f"{rel} must be a mapping of keys", f"keys: {', '.join(KEYS)}")
    for key, value in data.items():
        if key not in KEYS:
            raise SitebenchError(f"{rel}: unknown key {key!r}", f"keys: {', '.join(KEYS)}")
        if not isinstance(value, KEYS[key]):
            raise SitebenchError(
                f"{rel}: {key} is {value!r}, expected a {KEYS[key].__name__}",
                f"e.g. {key}: {'local' if KEYS[key] is str else 'true'}",
            )
    settings = {"environment": site, "slurm_cluster": False, **data}
    env = settings["environment"]
    if not (paths.environment_dir(env) / "spack.yaml").is_file():
        raise SitebenchError(
            f"{rel}: environment {env!r} does not exist (environments/{env}/spack.yaml)",
            "name a directory under environments/",
        )
    return settings

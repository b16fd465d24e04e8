"""Where things live: the checkout, its private state, the results store."""

import os
from pathlib import Path

#: The sitebench checkout (src/sitebench/common/paths.py -> the top level).
ROOT = Path(__file__).resolve().parents[3]


def state_dir():
    """Private, git-ignored state: venv, Spack clone, Spack config and caches."""
    return Path(os.environ.get("SITEBENCH_STATE_DIR", ROOT / ".sitebench")).resolve()


def user_cache_dir():
    """What every checkout of this user may share (Spack's repository indexes):
    ``$SITEBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/sitebench`` or ``~/.cache/sitebench``."""
    given = os.environ.get("SITEBENCH_CACHE_DIR")
    if given:
        return Path(given).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "sitebench").resolve()


def results_dir():
    """The results store; every run is a new directory under results/<site>/."""
    return Path(os.environ.get("SITEBENCH_RESULTS_DIR", ROOT / "results")).resolve()


def sites_root():
    """Where ``site-configs/`` and ``environments/`` live: the checkout, or
    ``$SITEBENCH_SITES_ROOT`` (a directory holding both, e.g. a test's copy)."""
    given = os.environ.get("SITEBENCH_SITES_ROOT")
    return Path(given).resolve() if given else ROOT


def site_config_dir(site):
    return sites_root() / "site-configs" / site


def environment_dir(site):
    return sites_root() / "environments" / site


def shown(path):
    """``path`` as messages show it: relative to the sites' root or the checkout if inside."""
    path = Path(path)
    for base in (sites_root(), ROOT):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def checks_dir():
    return ROOT / "reframe-checks"

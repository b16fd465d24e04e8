"""Where things live: the checkout, its private state, the results store."""

import os
from pathlib import Path

#: The sitebench checkout (src/sitebench/paths.py -> the top level).
ROOT = Path(__file__).resolve().parents[2]


def state_dir():
    """Private, git-ignored state: venv, Spack clone, Spack config and caches."""
    return Path(os.environ.get("SITEBENCH_STATE_DIR", ROOT / ".sitebench")).resolve()


def results_dir():
    """The results store; every run is a new directory under results/<site>/."""
    return Path(os.environ.get("SITEBENCH_RESULTS_DIR", ROOT / "results")).resolve()


def site_config_dir(site):
    return ROOT / "site-configs" / site


def environment_dir(site):
    return ROOT / "environments" / site


def checks_dir():
    return ROOT / "reframe-checks"

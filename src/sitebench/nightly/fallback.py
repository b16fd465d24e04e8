"""The ``nightly:`` settings of a night whose site configuration cannot be read (site.yaml
not valid YAML, a bad key, an environment that does not exist): that night still alerts
with the site's alert command and logs where the site's nights log, rotated with them.

They are, key by key: the broken file's own ``nightly:`` keys that are valid by themselves;
for the others, those of the last night (or ``nightly install``) that could read the
configuration, recorded in ``.sitebench/nightly/<site>/settings.json``; else the defaults
(logs in ``.sitebench/nightly/<site>/logs``, no alert command).
"""

import json
import os

import yaml

from sitebench.common import paths
from sitebench.sites import site_settings


def record_path(site):
    return paths.state_dir() / "nightly" / site / "settings.json"


def record(site, settings):
    """Remember the site's ``nightly:`` settings for a night that cannot read them."""
    nightly = settings.get("nightly") or {}
    path = record_path(site)
    if recorded(site) == nightly:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}")  # no half-written record
    part.write_text(json.dumps(nightly, indent=1, sort_keys=True) + "\n")
    part.replace(path)


def recorded(site):
    """The recorded ``nightly:`` settings of ``site``, or None."""
    try:
        data = json.loads(record_path(site).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def from_file(site):
    """(the valid ``nightly:`` keys of the site's site.yaml, the names of its invalid ones),
    or None when the file says nothing usable (missing, not YAML, not a mapping)."""
    path = paths.site_config_dir(site) / "site.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("nightly") or {}, dict):
        return None
    nightly = data.get("nightly") or {}
    found = site_settings.section_problems(paths.shown(path), "nightly", nightly)
    bad = {key.split(".", 1)[1] for key, _problem, _fix in found}
    return {k: v for k, v in nightly.items() if k not in bad}, bad


def salvage(site):
    """(settings holding the ``nightly:`` a broken configuration still gives, where they
    come from in words)."""
    known = recorded(site)
    given = from_file(site)
    if given is None:
        if known is None:
            return {}, "the defaults: site.yaml is unreadable and no night read it before"
        return {"nightly": known}, f"those the last readable site.yaml gave ({record_path(site)})"
    valid, bad = given
    kept = {k: v for k, v in (known or {}).items() if k in bad}
    words = "site.yaml's own nightly: keys"
    if kept:
        words += f", and {', '.join(sorted(kept))} as the last readable site.yaml gave"
    return {"nightly": {**kept, **valid}}, words

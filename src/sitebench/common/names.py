"""Site and run names become directory names: only safe ones are accepted."""

import re

from sitebench.common.errors import SitebenchError

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(kind, name):
    """Return ``name`` if it is a safe single path component, else raise."""
    if not isinstance(name, str) or not _SAFE.fullmatch(name) or ".." in name:
        shown = repr(name)
        raise SitebenchError(
            f"invalid {kind} name {shown}: it must be one directory name",
            "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(no '/', '..', spaces or control characters)",
        )
    return name

"""Whether this machine can give a process large (2 MiB transparent huge) pages."""

THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def large_pages_unavailable(path=THP_ENABLED):
    """Why transparent huge pages cannot be had here (None when they can): THP must be
    ``madvise`` or ``always`` (the bracketed word of ``path``)."""
    try:
        with open(path) as fp:
            modes = fp.read().split()
    except OSError as err:
        return f"no transparent huge pages ({path}: {err.strerror}); the kernel lacks THP"
    chosen = next((m.strip("[]") for m in modes if m.startswith("[")), None)
    if chosen not in ("always", "madvise"):
        return (
            f"transparent huge pages are '{chosen}' ({path}); large pages need 'madvise' or "
            f"'always' (echo madvise > {path}, as root)"
        )
    return None

"""Facts derived from a CPU topology as ReFrame describes it (processor info)."""


def last_level_cache_bytes(processor):
    """Total bytes of the highest cache level over all its instances, or None.

    ``processor`` is ReFrame's processor info (``--detect-host-topology``
    output or ``partition.processor.info``).
    """
    caches = (processor or {}).get("topology", {}).get("caches", [])
    if not caches:
        return None
    level = max(int(c["type"].lstrip("L")) for c in caches)
    return sum(c["size"] * len(c.get("cpusets", [])) for c in caches if c["type"] == f"L{level}")

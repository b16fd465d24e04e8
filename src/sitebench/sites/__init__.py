"""Stage 2, sites: a site as data (its settings, toolchains, references, topology, host
fingerprint, modules system, the emulated site); a :class:`~sitebench.sites.site.Site` is
resolved once per command. Discovering a machine is :mod:`sitebench.discovery`, writing
and proving a site's files :mod:`sitebench.onboarding`."""

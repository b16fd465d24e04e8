"""Stage 2, sites: a site as data (its settings, references, topology), detected,
onboarded and validated; a :class:`~sitebench.sites.site.Site` is resolved once per command."""

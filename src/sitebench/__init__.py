"""sitebench: Spack builds the benchmarks, ReFrame runs them against a site's
references, every run is stored with its provenance, sites are compared."""

__version__ = "0.1.0"

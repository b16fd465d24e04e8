"""Stage 3, run: ReFrame runs the suite on a site (the runner, the ReFrame base classes
and build fixture the checks in ``reframe-checks/`` use, energy, provenance)."""

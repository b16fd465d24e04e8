"""Energy figures: power read around a benchmark run, where the site can read it.

A partition names its power source in ``extras['power']`` (:mod:`.config`):
RAPL powercap counters, IPMI DCMI power readings or Slurm's energy
accounting. The RAPL and IPMI samplers run on the node, in the job, around
the benchmark (:mod:`.measure`, ``sampler.sh``); Slurm is asked after the job.
The recorded outputs are parsed by plain functions (:mod:`.readers`) that
raise :class:`EnergyError` naming the cause, tested on recorded outputs in
``tests/fixtures/energy/``.
"""


class EnergyError(ValueError):
    """A configured power source gave no usable reading; the message says why."""

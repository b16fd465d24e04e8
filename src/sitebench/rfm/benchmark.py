"""Base of every run-only sitebench check: scale, references, provenance."""

import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, variable

from sitebench.rfm.scales import SCALES


class SitebenchBenchmark(rfm.RunOnlyRegressionTest):
    """Common parts of the checks.

    Parameters: ``scale`` (tag and partition feature ``scale_<name>``).
    References: the site's ``references.yaml``, named by the partitions'
    ``extras['references']`` (ReFrame's ``$ref``, indexed by CPU
    microarchitecture and scale); a figure without a reference is logged and
    never fails.
    Logged with every figure: the concrete Spack spec of the binary.
    """

    scale = parameter(SCALES, loggable=True)

    #: Concrete spec (name, version, variants, target, hash) of the binary.
    #:
    #: :type: :class:`str`
    concrete_spec = variable(str, value="", loggable=True)

    valid_prog_environs = ["+sitebench"]
    maintainers = ["sitebench"]

    @run_after("init")
    def select_by_scale(self):
        # Hardware by features, never by system name.
        self.valid_systems = [f"+spack +scale_{self.scale}"]
        self.tags |= {self.scale, "sitebench"}
        self.reference = {"$ref": site_references()}

    def processor_cores(self):
        proc = self.current_partition.processor
        if not proc.num_cores:
            raise ValueError(
                f"partition {self.current_partition.fullname} has no processor topology: "
                f"let ReFrame detect it (reframe --detect-host-topology) or set 'processor'"
            )
        return proc.num_cores

    def binary(self, build, relpath):
        """Path of a file in a build fixture's prefix; records the concrete spec."""
        self.concrete_spec = build.concrete_spec()
        return os.path.join(build.install_prefix(), relpath)

    def stdout_text(self):
        with open(os.path.join(self.stagedir, sn.evaluate(self.stdout))) as fp:
            return fp.read()


def site_references():
    """The references file of the current system (an absolute path)."""
    for part in rt.runtime().system.partitions:
        path = part.extras.get("references")
        if path:
            return path
    # ReFrame looks it up under $RFM_REFERENCE_PREFIX or the check's directory.
    return "references.yaml"

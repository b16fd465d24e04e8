"""Issue 37's scenario end to end on two real runs committed in results/local/: two sites
exchange them, a third joins late, each compares the others from figures and provenance
alone and gets any run's outputs back byte for byte (tests/federation.py). The same scenario
runs on today's quick suite in tests/test_loop.py, with the two runs it makes."""

import sys

import pytest

from conftest import ROOT
from federation import federate

pytestmark = pytest.mark.reliability_input

#: Two real runs of different content: the newest committed one (346 files, both its
#: toolchains' predecessor ``gnu``) and an earlier one of the same day's suite.
RUN_A = ROOT / "results/local/20261125T095540Z-bb645e"
RUN_B = ROOT / "results/local/20261122T153111Z-7d0096"


def test_three_sites_federate_real_runs_from_figures_alone(tmp_path):
    seconds, status = federate(tmp_path, RUN_A, RUN_B)
    print(f"federation scenario on {RUN_A.name} and {RUN_B.name}: {seconds}", file=sys.stderr)
    print(status, file=sys.stderr)

"""Sphinx configuration of the sitebench guide (docs/README.md says how it is built).

Sphinx, as Spack and ReFrame document themselves: the centres that run sitebench read
those manuals already, in the same shape (getting started, tutorials, a reference), and
Sphinx can generate the reference from the code (``_ext/sitebench_reference.py`` imports
sitebench.cli, the site.yaml validator, the checks and the perf renderers). Nothing beyond
Sphinx itself: the built-in theme, no extension from the network, so the build works
offline and tests/test_docs.py runs it with warnings as errors.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent / "src"))

project = "sitebench"
author = "the sitebench developers"
copyright = "2026, " + author

extensions = ["sitebench_reference"]
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
templates_path = []
html_static_path = ["_static"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px"}
html_title = "sitebench guide"

# Every cross-reference must resolve: a :ref:, :doc: or :option: that points nowhere is a
# warning, and the test build turns warnings into errors.
nitpicky = True
# Literal blocks are shell sessions or plain text unless a page says otherwise.
highlight_language = "none"
# Options are typed as written: no "--" turned into a dash, no curly quotes.
smartquotes = False

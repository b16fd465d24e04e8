"""ReFrame building blocks shared by the checks in ``reframe-checks/``.

Imported only by ReFrame check files; the rest of sitebench never imports it.
"""

"""The one error type the CLI prints without a traceback."""


class SitebenchError(Exception):
    """Something the user can fix; the message says what and how."""

    def __init__(self, problem, fix=None):
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}\n  fix: {fix}" if fix else problem)

"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class IsosimInputError(ValueError):
    """Bad input from a user (a config value, a file, a flag): never a bug in isosim."""

"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class IsosimInputError(ValueError):
    """Bad input from a user (a config value, a file, a flag): never a bug in isosim."""


def shown(value) -> str:
    """A value as an error message shows it: a NumPy scalar as the Python number it holds
    (``nan``, ``-100``, not ``np.float64(nan)``), a string quoted."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        value = item()
    return repr(value)

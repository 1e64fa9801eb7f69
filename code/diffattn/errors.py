"""The one exception type for bad input.

`ConfigError` is a `ValueError`, so library callers can catch either; the command line turns it into a one-line
message and exit code 2 (see `diffattn.cli`).
"""


class ConfigError(ValueError):
    """A size, head count, λ or other setting that violates a stated constraint."""


def require(condition: bool, message: str) -> None:
    """Raise `ConfigError(message)` unless `condition` holds; `message` names the constraint."""
    if not condition:
        raise ConfigError(message)


def require_positive(**sizes: float) -> None:
    """Every keyword must be > 0, e.g. `require_positive(hidden=4096, heads=32)`."""
    for name, value in sizes.items():
        require(value > 0, f"{name} must be > 0 (got {value})")

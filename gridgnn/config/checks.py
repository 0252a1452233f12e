"""The field checks every configuration section validates with: each raises `ConfigError` with one
self-contained line naming the field (its `TrainConfig` name) and the value it got. Pure."""

from __future__ import annotations

import math

from gridgnn.errors import ConfigError


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    """``value`` is an int (not a bool) in [``minimum``, ``maximum``] (no upper bound when None)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be at most {maximum}, got {value}")


def check_float(
    name: str,
    value: object,
    *,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """``value`` is a finite int or float (not a bool) between ``low`` and ``high``, each end open or closed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        raise ConfigError(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value:g}")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def check_bool(name: str, value: object) -> None:
    """``value`` is True or False."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def is_blank(value: object) -> bool:
    """Whether an optional name (a file, a folder) was given but names nothing: not a string, or only
    whitespace. None (not given) is not blank."""
    return value is not None and (not isinstance(value, str) or not value.strip())

"""Argument types shared by the commands: a bad value is an argparse error (exit 2, the
flag named) instead of reaching the planner. Stdlib only: `solve` imports it at start."""

from __future__ import annotations

import argparse

MAX_SECONDS = 86_400  # the workload schema's bound on solver.time_limit_s


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too few; use 1 or more")
    return value


def number_in(low: float, high: float, unit: str, low_allowed: bool = False):
    """An argument type for a number in (low, high] ([low, high] with `low_allowed`); NaN and
    infinity fail the range test."""
    bound = f"{'at least' if low_allowed else 'more than'} {low:g} and at most {high:,.10g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number ({unit})") from None
        if not ((low <= value) if low_allowed else (low < value)) or not value <= high:
            raise argparse.ArgumentTypeError(f"{text} {unit} is out of range; use {bound}")
        return value

    return parse


def backend(text: str) -> str:
    """--backend: auto, scip or highs; cp-sat says why it is not offered."""
    from solver.backend_choices import BACKENDS, withdrawn_backend

    withdrawn = withdrawn_backend(text)
    if withdrawn:
        raise argparse.ArgumentTypeError(f"{withdrawn[0]} To fix: {withdrawn[1]}")
    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(BACKENDS)})")
    return text


# More than 0 and at most a day (solve --time-limit, review --time-limit-per-scenario).
seconds = number_in(0, MAX_SECONDS, "s")

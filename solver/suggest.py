"""'Did you mean ...' for names people mistype (models, GPUs, offers)."""

from __future__ import annotations

from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    import difflib  # here, not at the top: only a mistyped name needs it (~2 ms of every CLI start)

    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(lowered[c]) for c in close) + "?"

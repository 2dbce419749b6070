"""Does a request fit the model's context? prompt + output tokens against max_context_tokens.

One wording for every entry point (workload check, `solver-cli estimate`, the gRPC
Estimate): the numbers, what the model supports, and the fix with library models that
serve the length. The independent evaluator does its own arithmetic on purpose.
"""

from __future__ import annotations

import math

from solver.errors import FieldViolation
from solver.models.library import MODEL_LIBRARY, ModelArch


def longer_context_models(tokens: int, near_params_b: float | None = None, limit: int = 2) -> list[ModelArch]:
    """Library models that serve `tokens`, closest in size to `near_params_b` first (the
    likeliest substitutes), then the shortest sufficient context."""
    fitting = [m for m in MODEL_LIBRARY.values() if m.max_context_tokens and m.max_context_tokens >= tokens]

    def distance(m: ModelArch) -> float:
        return abs(math.log(m.params_b / near_params_b)) if near_params_b else 0.0

    return sorted(fitting, key=lambda m: (distance(m), m.max_context_tokens, m.name))[:limit]


def context_violation(field: str, model_name: str, max_context_tokens: int | None, prompt_tokens, output_tokens,
                      params_b: float | None = None, prompt_label: str = "prompt_tokens",
                      output_label: str = "output_tokens", override: str = "", what: str = "") -> FieldViolation | None:
    """A violation at `field` when prompt + output exceed the context; None when they fit,
    when the context is unknown, or when a count is not a number (a field error reports that).
    `override` says how to state a longer context for this model, where there is a way;
    `what` names the request (a demand class)."""
    if not max_context_tokens or not (_count(prompt_tokens) and _count(output_tokens)):
        return None
    total = prompt_tokens + output_tokens
    if total <= max_context_tokens:
        return None
    alternatives = longer_context_models(total, params_b)
    if alternatives:
        others = " or ".join(f"{m.name} ({m.max_context_tokens:,} tokens)" for m in alternatives)
        instead = f"use a model with a longer context, e.g. {others}"
    else:
        instead = f"split the request: no library model serves {total:,} tokens"
    fix = f"shorten the prompt or output to {max_context_tokens:,} tokens together, or {instead}"
    if override:  # library values are the published ones; a deployment may serve more
        fix += f"; if your checkpoint of {model_name} serves more, {override}"
    return FieldViolation(
        field, f"{what + ': ' if what else ''}{prompt_label} {prompt_tokens:,} + {output_label} {output_tokens:,} = {total:,} tokens do not fit "
        f"{model_name}'s context of {max_context_tokens:,} tokens.", fix)


def _count(value) -> bool:
    """A whole token count (documents that failed validation may hold anything)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0 \
        and value == int(value)

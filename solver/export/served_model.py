"""Which weights a deployment serves: the user's model, never the library's stand-in for it.

The planner sizes `meta-llama/Llama-3.1-8B-Instruct`, `deepseek-r1-distill-llama-8b` and
`mistral-7b-v0.3` with the library's llama-3.1-8b or mistral-7b architecture (same shapes,
same performance), but those are different checkpoints: the deployment must load the one
the user named. So:

- a Hugging Face id (`org/name`) or a path is served as written;
- a library model's own name is served from the repository the library took its shapes
  from, and the files say which repository that is;
- another name the library recognises (a distill, an instruct variant, a version) is served
  from its repository in KNOWN_REPOS below; one not listed there is written as given, with
  a warning: the export will not guess an organisation;
- an inline model's name is written as given (the user described it; it may be an id).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.models.library import MODEL_LIBRARY, get_model

_HF_SOURCE = re.compile(r"huggingface\.co/([^/\s]+/[^/\s]+)/")

# Names the library resolves to a base architecture -> the Hugging Face repository of the
# model itself (lower-cased name, as typed without an organisation). Repository ids as
# published by their organisations on huggingface.co (deepseek-ai, mistralai, meta-llama,
# Qwen, google).
KNOWN_REPOS = {
    "deepseek-r1-distill-llama-8b": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-r1-distill-llama-70b": "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    "deepseek-r1-distill-qwen-7b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "deepseek-r1-distill-qwen-14b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    "deepseek-r1-distill-qwen-32b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-r1-zero": "deepseek-ai/DeepSeek-R1-Zero",
    "deepseek-v3-base": "deepseek-ai/DeepSeek-V3-Base",
    "mistral-7b-v0.1": "mistralai/Mistral-7B-v0.1",
    "mistral-7b-v0.3": "mistralai/Mistral-7B-v0.3",
    "mistral-7b-instruct-v0.1": "mistralai/Mistral-7B-Instruct-v0.1",
    "mistral-7b-instruct-v0.2": "mistralai/Mistral-7B-Instruct-v0.2",
    "mistral-7b-instruct-v0.3": "mistralai/Mistral-7B-Instruct-v0.3",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-405b-instruct": "meta-llama/Llama-3.1-405B-Instruct",
    "llama-3.2-1b-instruct": "meta-llama/Llama-3.2-1B-Instruct",
    "llama-3.2-3b-instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "qwen2.5-7b-instruct": "Qwen/Qwen2.5-7B-Instruct",
    "qwen2.5-14b-instruct": "Qwen/Qwen2.5-14B-Instruct",
    "qwen2.5-32b-instruct": "Qwen/Qwen2.5-32B-Instruct",
    "qwen2.5-72b-instruct": "Qwen/Qwen2.5-72B-Instruct",
    "gemma-2-9b-it": "google/gemma-2-9b-it",
    "gemma-2-27b-it": "google/gemma-2-27b-it",
}


@dataclass(frozen=True)
class Served:
    repo: str  # what the engine loads: a Hugging Face id, a path, or the name as given
    note: str  # a comment for the files
    warning: str = ""  # for stderr: the export could not tell which weights the name means


def served_model(model: str) -> Served:
    arch = get_model(model)
    library_repo = _library_repo(arch)
    sized_as = (f"; the planner sized it with the library's {arch.name} architecture"
                + (f" ({library_repo})" if library_repo else "")) if arch is not None else ""
    if "/" in model:
        return Served(model, f"Serves {model} as the workload names it{sized_as}.")
    key = model.strip().lower()
    if arch is not None and key == arch.name and library_repo:
        return Served(library_repo, f"Model {model!r} is a library name: the export chose Hugging Face "
                      f"{library_repo}, the repository the library took its shapes from. To serve another checkpoint "
                      "(an instruct or fine-tuned variant), name it by its Hugging Face id in the workload.")
    if key in KNOWN_REPOS:
        return Served(KNOWN_REPOS[key], f"Model {model!r}: the export chose Hugging Face {KNOWN_REPOS[key]} "
                      f"(its publisher's repository){sized_as}.")
    if arch is not None:
        message = (f"model {model!r} is not a Hugging Face id and the export knows no repository for it{sized_as}, "
                   f"which is a different checkpoint; the files serve {model!r} as written: set the model to its "
                   "Hugging Face id (org/name) in the workload")
        return Served(model, message[0].upper() + message[1:] + ".", warning=message)
    return Served(model, f"Model {model!r} is an inline model: the files serve it by that name; make it its Hugging "
                  "Face repository id or a local path if it is not one already.")


def _library_repo(arch) -> str | None:
    if arch is None or arch.name not in MODEL_LIBRARY:
        return None
    m = _HF_SOURCE.search(arch.source)
    return m.group(1) if m else None

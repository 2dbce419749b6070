"""Model architectures: a built-in library by name, or described inline."""

from solver.models.library import ModelArch, MODEL_LIBRARY, get_model, model_names

__all__ = ["ModelArch", "MODEL_LIBRARY", "get_model", "model_names"]

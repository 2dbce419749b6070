"""Built-in decoder-only transformer architectures (from the models' published configs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelArch:
    name: str
    params_b: float  # total parameters, billions (all experts for MoE)
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int = 0
    experts: int = 1
    active_experts: int = 1
    active_params_b: float | None = None  # parameters touched per token (MoE); None = params_b

    @property
    def compute_params_b(self) -> float:
        return self.active_params_b if self.active_params_b is not None else self.params_b

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


MODEL_LIBRARY: dict[str, ModelArch] = {m.name: m for m in [
    ModelArch("llama-2-7b", 6.74, 32, 4096, 32, 32, 128, 32000, 11008),
    ModelArch("llama-2-13b", 13.02, 40, 5120, 40, 40, 128, 32000, 13824),
    ModelArch("llama-2-70b", 68.98, 80, 8192, 64, 8, 128, 32000, 28672),
    ModelArch("llama-3.1-8b", 8.03, 32, 4096, 32, 8, 128, 128256, 14336),
    ModelArch("llama-3.1-70b", 70.55, 80, 8192, 64, 8, 128, 128256, 28672),
    ModelArch("llama-3.1-405b", 405.85, 126, 16384, 128, 8, 128, 128256, 53248),
    ModelArch("mistral-7b", 7.24, 32, 4096, 32, 8, 128, 32000, 14336),
    ModelArch("mixtral-8x7b", 46.70, 32, 4096, 32, 8, 128, 32000, 14336, experts=8, active_experts=2,
              active_params_b=12.88),
    ModelArch("qwen2.5-7b", 7.62, 28, 3584, 28, 4, 128, 152064, 18944),
    ModelArch("qwen2.5-32b", 32.76, 64, 5120, 40, 8, 128, 152064, 27648),
    ModelArch("qwen2.5-72b", 72.71, 80, 8192, 64, 8, 128, 152064, 29568),
]}

# Common spellings people type, mapped to library names.
ALIASES = {
    "llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
    "llama-2-7b-chat": "llama-2-7b", "llama-2-13b-chat": "llama-2-13b", "llama-2-70b-chat": "llama-2-70b",
    "llama-3-8b": "llama-3.1-8b", "llama-3-70b": "llama-3.1-70b",
    "llama-3.1-8b-instruct": "llama-3.1-8b", "llama-3.1-70b-instruct": "llama-3.1-70b",
    "mistral-7b-instruct": "mistral-7b", "mixtral-8x7b-instruct": "mixtral-8x7b",
}


def model_names() -> list[str]:
    return sorted(MODEL_LIBRARY)


def get_model(name: str) -> ModelArch | None:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return MODEL_LIBRARY.get(key)

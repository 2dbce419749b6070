"""Built-in decoder-only transformer architectures, from the models' published configs.

Every entry copies `config.json` of the model's Hugging Face repository (hidden_size,
num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
vocab_size, tie_word_embeddings, num_local_experts / num_experts_per_tok) and the total
parameter count from its model card. `tests/test_perf_model.py` recomputes each total
from the shapes, so a mistyped dimension fails a test.
"""

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
    intermediate_size: int = 0  # per expert for MoE
    experts: int = 1
    active_experts: int = 1
    active_params_b: float | None = None  # parameters touched per token (MoE); None = params_b
    tied_embeddings: bool = False  # the output head shares the input embedding matrix
    source: str = ""  # where the shapes come from

    @property
    def compute_params_b(self) -> float:
        return self.active_params_b if self.active_params_b is not None else self.params_b

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def embedding_params_b(self) -> float:
        """Input embedding (a table lookup: memory, no FLOPs)."""
        return self.vocab_size * self.hidden_size / 1e9

    @property
    def lm_head_params_b(self) -> float:
        """Output projection to the vocabulary (FLOPs only for tokens that are sampled)."""
        return self.vocab_size * self.hidden_size / 1e9

    @property
    def body_params_b(self) -> float:
        """Parameters that every token multiplies through: layers without embedding and head."""
        stored_vocab = self.embedding_params_b * (1 if self.tied_embeddings else 2)
        return max(self.compute_params_b - stored_vocab, 0.0)

    @property
    def expert_params_b(self) -> float:
        """All experts' MLP weights (zero for dense models): read only where a token is routed."""
        if not self.is_moe:
            return 0.0
        return 3 * self.hidden_size * self.intermediate_size * self.experts * self.layers / 1e9

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes

    def params_from_shapes_b(self) -> float:
        """Parameter count implied by the shapes (gated MLP, no biases) - a check on the table."""
        h, d = self.hidden_size, self.head_dim
        attention = h * self.attention_heads * d * 2 + h * self.kv_heads * d * 2
        mlp = 3 * h * self.intermediate_size * self.experts + (h * self.experts if self.is_moe else 0)
        vocab = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return (self.layers * (attention + mlp + 2 * h) + vocab + h) / 1e9


_HF = "huggingface.co/{}/blob/main/config.json"

MODEL_LIBRARY: dict[str, ModelArch] = {m.name: m for m in [
    ModelArch("llama-2-7b", 6.74, 32, 4096, 32, 32, 128, 32000, 11008, source=_HF.format("meta-llama/Llama-2-7b-hf")),
    ModelArch("llama-2-13b", 13.02, 40, 5120, 40, 40, 128, 32000, 13824, source=_HF.format("meta-llama/Llama-2-13b-hf")),
    ModelArch("llama-2-70b", 68.98, 80, 8192, 64, 8, 128, 32000, 28672, source=_HF.format("meta-llama/Llama-2-70b-hf")),
    ModelArch("llama-3.1-8b", 8.03, 32, 4096, 32, 8, 128, 128256, 14336, source=_HF.format("meta-llama/Llama-3.1-8B")),
    ModelArch("llama-3.1-70b", 70.55, 80, 8192, 64, 8, 128, 128256, 28672, source=_HF.format("meta-llama/Llama-3.1-70B")),
    ModelArch("llama-3.1-405b", 405.85, 126, 16384, 128, 8, 128, 128256, 53248,
              source=_HF.format("meta-llama/Llama-3.1-405B")),
    ModelArch("llama-3.2-1b", 1.24, 16, 2048, 32, 8, 64, 128256, 8192, tied_embeddings=True,
              source=_HF.format("meta-llama/Llama-3.2-1B")),
    ModelArch("llama-3.2-3b", 3.21, 28, 3072, 24, 8, 128, 128256, 8192, tied_embeddings=True,
              source=_HF.format("meta-llama/Llama-3.2-3B")),
    ModelArch("mistral-7b", 7.24, 32, 4096, 32, 8, 128, 32000, 14336, source=_HF.format("mistralai/Mistral-7B-v0.1")),
    ModelArch("mistral-nemo-12b", 12.25, 40, 5120, 32, 8, 128, 131072, 14336,
              source=_HF.format("mistralai/Mistral-Nemo-Base-2407")),
    ModelArch("mixtral-8x7b", 46.70, 32, 4096, 32, 8, 128, 32000, 14336, experts=8, active_experts=2,
              active_params_b=12.88, source=_HF.format("mistralai/Mixtral-8x7B-v0.1")),
    ModelArch("mixtral-8x22b", 140.62, 56, 6144, 48, 8, 128, 32768, 16384, experts=8, active_experts=2,
              active_params_b=39.16, source=_HF.format("mistralai/Mixtral-8x22B-v0.1")),
    ModelArch("qwen2.5-7b", 7.62, 28, 3584, 28, 4, 128, 152064, 18944, source=_HF.format("Qwen/Qwen2.5-7B")),
    ModelArch("qwen2.5-14b", 14.77, 48, 5120, 40, 8, 128, 152064, 13824, source=_HF.format("Qwen/Qwen2.5-14B")),
    ModelArch("qwen2.5-32b", 32.76, 64, 5120, 40, 8, 128, 152064, 27648, source=_HF.format("Qwen/Qwen2.5-32B")),
    ModelArch("qwen2.5-72b", 72.71, 80, 8192, 64, 8, 128, 152064, 29568, source=_HF.format("Qwen/Qwen2.5-72B")),
    ModelArch("gemma-2-9b", 9.24, 42, 3584, 16, 8, 256, 256000, 14336, tied_embeddings=True,
              source=_HF.format("google/gemma-2-9b")),
    ModelArch("gemma-2-27b", 27.23, 46, 4608, 32, 16, 128, 256000, 36864, tied_embeddings=True,
              source=_HF.format("google/gemma-2-27b")),
    ModelArch("phi-3-mini", 3.82, 32, 3072, 32, 32, 96, 32064, 8192,
              source=_HF.format("microsoft/Phi-3-mini-4k-instruct")),
]}

# Common spellings people type, and fine-tunes that share a base architecture.
ALIASES = {
    "llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
    "llama-2-7b-chat": "llama-2-7b", "llama-2-13b-chat": "llama-2-13b", "llama-2-70b-chat": "llama-2-70b",
    "llama-3-8b": "llama-3.1-8b", "llama-3-70b": "llama-3.1-70b", "llama3-8b": "llama-3.1-8b",
    "llama3-70b": "llama-3.1-70b", "llama-3.1-8b-instruct": "llama-3.1-8b", "llama-3.1-70b-instruct": "llama-3.1-70b",
    "llama-3.1-405b-instruct": "llama-3.1-405b", "llama-3.3-70b": "llama-3.1-70b",
    "llama-3.3-70b-instruct": "llama-3.1-70b", "llama-3.2-1b-instruct": "llama-3.2-1b",
    "llama-3.2-3b-instruct": "llama-3.2-3b",
    "mistral-7b-instruct": "mistral-7b", "mixtral-8x7b-instruct": "mixtral-8x7b",
    "mixtral-8x22b-instruct": "mixtral-8x22b", "mistral-nemo": "mistral-nemo-12b",
    "qwen2.5-7b-instruct": "qwen2.5-7b", "qwen2.5-14b-instruct": "qwen2.5-14b",
    "qwen2.5-32b-instruct": "qwen2.5-32b", "qwen2.5-72b-instruct": "qwen2.5-72b",
    "gemma-2-9b-it": "gemma-2-9b", "gemma-2-27b-it": "gemma-2-27b", "phi-3-mini-4k-instruct": "phi-3-mini",
    # Distilled reasoning models keep their base model's architecture.
    "deepseek-r1-distill-llama-8b": "llama-3.1-8b", "deepseek-r1-distill-llama-70b": "llama-3.1-70b",
    "deepseek-r1-distill-qwen-7b": "qwen2.5-7b", "deepseek-r1-distill-qwen-14b": "qwen2.5-14b",
    "deepseek-r1-distill-qwen-32b": "qwen2.5-32b",
}


def model_names() -> list[str]:
    return sorted(MODEL_LIBRARY)


def get_model(name: str) -> ModelArch | None:
    key = name.strip().lower()
    key = key.split("/")[-1]  # accept Hugging Face ids such as meta-llama/Llama-3.1-8B
    key = ALIASES.get(key, key)
    return MODEL_LIBRARY.get(key)

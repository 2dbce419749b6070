"""Built-in decoder-only transformer architectures, from the models' published configs.

Every entry copies `config.json` of the model's Hugging Face repository (hidden_size,
num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
vocab_size, tie_word_embeddings, num_local_experts / num_experts_per_tok, and where the
model has them: shared experts, first dense layers, multi-head latent attention ranks,
sliding-window layers) and the total parameter count from its model card.
`tests/test_perf_model.py` recomputes each total from the shapes, so a mistyped
dimension fails a test.

Names resolve case-insensitively, from Hugging Face ids (`meta-llama/Llama-3.1-8B-Instruct`),
with common suffixes stripped (see `get_model`).
"""

from __future__ import annotations

import re
from dataclasses import replace

from solver.dataclass_repr import dataclass


@dataclass(frozen=True)
class ModelArch:
    """A transformer's shape and sizes, as the performance model needs them (a model library entry)."""

    name: str
    params_b: float  # total parameters, billions (all experts for MoE; text and vision)
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int = 0  # per routed expert for MoE
    experts: int = 1  # routed experts per MoE layer
    active_experts: int = 1  # routed experts a token goes to
    active_params_b: float | None = None  # parameters touched per token (MoE); None = from the shapes
    tied_embeddings: bool = False  # the output head shares the input embedding matrix
    source: str = ""  # where the shapes come from
    # Mixture of experts beyond "every layer routes to experts":
    shared_expert_intermediate_size: int = 0  # always-active shared experts per MoE layer (total width)
    moe_layers: int | None = None  # layers with routed experts (None: all layers of an MoE model)
    dense_intermediate_size: int | None = None  # MLP width of the non-MoE layers (None: intermediate_size)
    # Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds one latent of
    # kv_lora_rank plus the decoupled RoPE key of qk_rope_head_dim per token and layer.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Sliding-window (or chunked local) attention: these layers keep at most
    # `sliding_window` tokens of KV; the other layers attend to the whole context.
    sliding_window: int | None = None
    sliding_layers: int = 0
    vision_params_b: float = 0.0  # a vision encoder held in memory but not run per text token
    # Longest request (prompt + output tokens) the model serves; None = not stated (inline
    # models without it): no check. Library values and their provenance: _CONTEXT below.
    max_context_tokens: int | None = None
    context_source: str = ""  # where max_context_tokens comes from, and why that value

    # ---------------------------------------------------------------- structure
    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layer_count(self) -> int:
        if not self.is_moe:
            return 0
        return self.layers if self.moe_layers is None else self.moe_layers

    @property
    def dense_layer_count(self) -> int:
        return self.layers - self.moe_layer_count

    @property
    def full_attention_layers(self) -> int:
        return self.layers - (self.sliding_layers if self.sliding_window else 0)

    @property
    def windowed_layers(self) -> int:
        return self.sliding_layers if self.sliding_window else 0

    @property
    def dense_mlp_width(self) -> int:
        return self.dense_intermediate_size if self.dense_intermediate_size is not None else self.intermediate_size

    @property
    def active_mlp_width(self) -> int:
        """MLP width a token passes through in a typical layer (for the activation reserve)."""
        if not self.is_moe:
            return self.dense_mlp_width
        return self.intermediate_size * self.active_experts + self.shared_expert_intermediate_size

    # ---------------------------------------------------------------- parameters
    @property
    def compute_params_b(self) -> float:
        """Parameters a token multiplies through (embedding and vision encoder included, see body_params_b)."""
        if self.active_params_b is not None:
            return self.active_params_b
        if self.is_moe:  # from the shapes: model cards round (or leave out embeddings) differently
            skipped = self.expert_params_b * (1 - self.active_experts / self.experts)
            return self.params_from_shapes_b() - skipped - self.vision_params_b
        return self.params_b - self.vision_params_b

    @property
    def embedding_params_b(self) -> float:
        """Input embedding (a table lookup: memory, no FLOPs)."""
        return self.vocab_size * self.hidden_size / 1e9

    @property
    def lm_head_params_b(self) -> float:
        """Output projection to the vocabulary (FLOPs only for tokens that are sampled)."""
        return self.vocab_size * self.hidden_size / 1e9

    @property
    def vocab_params_b(self) -> float:
        """Stored vocabulary matrices: embedding, and the head unless tied."""
        return self.embedding_params_b * (1 if self.tied_embeddings else 2)

    @property
    def body_params_b(self) -> float:
        """Parameters that every token multiplies through: layers without embedding and head."""
        return max(self.compute_params_b - self.vocab_params_b, 0.0)

    @property
    def expert_params_b(self) -> float:
        """All routed experts' MLP weights (zero for dense models): read only where a token is routed."""
        if not self.is_moe:
            return 0.0
        return 3 * self.hidden_size * self.intermediate_size * self.experts * self.moe_layer_count / 1e9

    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.attention_heads * qk
                 if self.q_lora_rank else h * self.attention_heads * qk)
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.attention_heads * (self.qk_nope_head_dim + self.v_head_dim))
            return q + kv + self.attention_heads * self.v_head_dim * h
        d = self.head_dim
        return h * self.attention_heads * d * 2 + h * self.kv_heads * d * 2

    def params_from_shapes_b(self) -> float:
        """Parameter count implied by the shapes (gated MLPs, no biases) - a check on the table."""
        h = self.hidden_size
        dense_mlp = 3 * h * self.dense_mlp_width
        moe_mlp = (3 * h * self.intermediate_size * self.experts + 3 * h * self.shared_expert_intermediate_size
                   + h * self.experts) if self.is_moe else 0
        vocab = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return (self.layers * (self.attention_params_per_layer() + 2 * h) + self.dense_layer_count * dense_mlp
                + self.moe_layer_count * moe_mlp + vocab + h) / 1e9 + self.vision_params_b

    # ---------------------------------------------------------------- KV cache and attention
    def kv_elements_per_token_layer(self, tp: int = 1) -> float:
        """KV-cache elements one token adds to one layer, per GPU of a TP group.

        Standard/GQA attention: K and V of ceil(kv_heads / TP) heads - heads are replicated
        once TP exceeds them. MLA: one latent (kv_lora_rank) plus the RoPE key, which every
        TP rank keeps whole (vLLM and TensorRT-LLM replicate the latent cache across TP ranks;
        splitting it needs data-parallel attention)."""
        if self.is_mla:
            return float(self.kv_lora_rank + self.qk_rope_head_dim)
        return 2.0 * -(-self.kv_heads // tp) * self.head_dim

    def kv_tokens(self, context: float) -> float:
        """Token-layers of KV cache for a sequence of `context` tokens: full layers keep all of
        them, sliding-window layers at most the window."""
        windowed = min(context, self.sliding_window) if self.sliding_window else context
        return self.full_attention_layers * context + self.windowed_layers * windowed

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """Average KV bytes per token of a long context on one GPU (no TP), all layers."""
        return self.layers * self.kv_elements_per_token_layer() * kv_bytes

    def attention_dims(self, decode: bool) -> tuple[int, int]:
        """(query-key dimension, value dimension) per head. MLA decodes in the latent space
        (weights absorbed: q.k over kv_lora_rank + rope, values of kv_lora_rank) and
        prefills with the expanded heads (qk_nope + rope, v_head_dim)."""
        if self.is_mla:
            if decode:
                return self.kv_lora_rank + self.qk_rope_head_dim, self.kv_lora_rank
            return self.qk_nope_head_dim + self.qk_rope_head_dim, self.v_head_dim
        return self.head_dim, self.head_dim


_HF = "huggingface.co/{}/blob/main/config.json"

# Context length each library model serves: prompt + output tokens of one request.
# The config's max_position_embeddings where it is what the publisher documents; the model
# card (or the publisher's model docs) where RoPE scaling extends the config's value, or
# where the config states more than the card supports. Looked up in public copies of the
# configs and cards (issue 13); a value not confirmed from a public copy says so.
_LLAMA3_ROPE = ("config.json max_position_embeddings 131072 (rope_scaling llama3, factor {} over the 8192 "
                "trained natively); model card: 128k context")
_QWEN25 = ("model card of Qwen/Qwen2.5-{}: context length 131,072 tokens (the base model's config; the "
           "-Instruct configs ship 32768 and reach 131,072 with the YaRN rope_scaling their card gives)")
_QWEN3 = ("model card of Qwen/Qwen3-{}: 32,768 tokens natively, 131,072 with YaRN (rope_scaling factor 4 added "
          "to config.json, as the card describes); config.json ships max_position_embeddings 40960")
_CONTEXT: dict[str, tuple[int, str]] = {
    **{name: (4096, "config.json max_position_embeddings 4096 (the -hf configs said 2048 until July 2023: "
              "huggingface/transformers#24986, meta-llama/llama#359); Llama 2 paper and card: 4k context")
       for name in ("llama-2-7b", "llama-2-13b", "llama-2-70b")},
    "llama-3.1-8b": (131072, _LLAMA3_ROPE.format(8)),
    "llama-3.1-70b": (131072, _LLAMA3_ROPE.format(8)),
    "llama-3.1-405b": (131072, _LLAMA3_ROPE.format(8)),
    "llama-3.2-1b": (131072, _LLAMA3_ROPE.format(32)),
    "llama-3.2-3b": (131072, _LLAMA3_ROPE.format(32)),
    "llama-3.3-70b": (131072, _LLAMA3_ROPE.format(8)),
    # v0.1's config states 32768 (with a 4096-token sliding window), more than Mistral documents
    # for it, but Mistral-7B-v0.2/v0.3 (32k documented) resolve to this name too (get_model
    # strips the version), and rejecting their valid 32k requests would be worse than
    # accepting an over-long v0.1 request: the config's 32768 is used.
    "mistral-7b": (32768, "config.json max_position_embeddings 32768 (Mistral-7B-v0.1; v0.2/v0.3: 32k in Mistral's "
                   "docs, mistralai/platform-docs-public); Mistral documents 8k for v0.1 itself"),
    "mistral-nemo-12b": (128000, "Mistral-Nemo-Base-2407 config.json max_position_embeddings 128000; Mistral's "
                         "docs and NVIDIA's card: 128k (the -Instruct-2407 config states 1024000, more than "
                         "documented)"),
    "mixtral-8x7b": (32768, "config.json max_position_embeddings 32768; Mistral's docs: 32k"),
    "mixtral-8x22b": (65536, "config.json max_position_embeddings 65536; Mistral's docs: 64k"),
    "qwen2.5-7b": (131072, _QWEN25.format("7B")),
    "qwen2.5-14b": (131072, _QWEN25.format("14B")),
    "qwen2.5-32b": (131072, _QWEN25.format("32B")),
    "qwen2.5-72b": (131072, _QWEN25.format("72B")),
    "gemma-2-9b": (8192, "config.json max_position_embeddings 8192 (sliding window 4096 on alternate layers); "
                   "Google's card: 8K context"),
    "gemma-2-27b": (8192, "config.json max_position_embeddings 8192 (sliding window 4096 on alternate layers); "
                    "Google's card: 8K context"),
    "phi-3-mini": (4096, "Phi-3-mini-4k-instruct config.json max_position_embeddings 4096 (the 4k variant; "
                   "Phi-3-mini-128k-instruct is a different checkpoint)"),
    "llama-4-scout": (10485760, "config.json text_config max_position_embeddings 10485760 (rope_scaling llama3, "
                      "factor 16 over 8192); Meta: 10M context"),
    "llama-4-maverick": (1048576, "config.json text_config max_position_embeddings 1048576; Meta: 1M context"),
    "deepseek-v3": (131072, "model card: context length 128K; config.json states 163840 (YaRN factor 40 over "
                    "4096), more than the card supports"),
    "deepseek-r1": (131072, "model card: context length 128K; config.json states 163840 (YaRN factor 40 over "
                    "4096), more than the card supports"),
    "qwen3-8b": (131072, _QWEN3.format("8B")),
    "qwen3-14b": (131072, _QWEN3.format("14B")),
    "qwen3-32b": (131072, _QWEN3.format("32B")),
    "qwen3-30b-a3b": (131072, _QWEN3.format("30B-A3B")),
    "qwen3-235b-a22b": (131072, _QWEN3.format("235B-A22B")),
    "gpt-oss-120b": (131072, "config.json max_position_embeddings 131072 (YaRN factor 32 over 4096, on by "
                     "default); providers list 131,072"),
    "gpt-oss-20b": (131072, "config.json max_position_embeddings 131072 (YaRN factor 32 over 4096, on by "
                    "default); providers list 131,072"),
    "mistral-small-24b": (32768, "Mistral's docs (mistral-small-3-0-25-01): 32k for Mistral-Small-24B-Base-2501 "
                          "and -Instruct-2501; config value not confirmed from a public copy"),
    "mistral-large-123b": (131072, "Mistral's docs (mistral-large-2-1-24-11): 128k for "
                           "Mistral-Large-Instruct-2411, read as 131072 as in the Large 2 configs; the 2411 "
                           "config itself not confirmed from a public copy"),
}


def _with_context(model: ModelArch) -> ModelArch:
    tokens, source = _CONTEXT[model.name]  # every library model needs a row: a KeyError here is a slip
    return replace(model, max_context_tokens=tokens, context_source=source)


MODEL_LIBRARY: dict[str, ModelArch] = {m.name: _with_context(m) for m in [
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
    # ---- added with issue 12: today's open models
    ModelArch("llama-3.3-70b", 70.55, 80, 8192, 64, 8, 128, 128256, 28672,
              source=_HF.format("meta-llama/Llama-3.3-70B-Instruct")),
    # Llama 4: MoE with one shared expert (intermediate_size 8192) and top-1 routing; Maverick
    # routes on every other layer (interleave_moe_layer_step 2; the others are dense with
    # intermediate_size_mlp 16384). Three layers in four use chunked local attention
    # (attention_chunk_size 8192, the fourth is global NoPE): their KV holds at most 8192
    # tokens. vision_params_b: the vision tower (34 layers x (4 x 1408^2 + 2 x 1408 x 5632))
    # plus its adapter and projector, ~0.87 B. Model cards: Scout 109 B (17 B active),
    # Maverick 400 B (17 B active).
    ModelArch("llama-4-scout", 109.0, 48, 5120, 40, 8, 128, 202048, 8192, experts=16, active_experts=1,
              shared_expert_intermediate_size=8192, sliding_window=8192, sliding_layers=36, vision_params_b=0.87,
              source=_HF.format("meta-llama/Llama-4-Scout-17B-16E-Instruct")),
    ModelArch("llama-4-maverick", 400.0, 48, 5120, 40, 8, 128, 202048, 8192, experts=128, active_experts=1,
              shared_expert_intermediate_size=8192, moe_layers=24, dense_intermediate_size=16384,
              sliding_window=8192, sliding_layers=36, vision_params_b=0.87,
              source=_HF.format("meta-llama/Llama-4-Maverick-17B-128E-Instruct")),
    # DeepSeek-V3 (and R1, same architecture): 256 routed experts (moe_intermediate_size 2048,
    # top-8) plus 1 shared expert, the first 3 layers dense (first_k_dense_replace 3,
    # intermediate_size 18432); multi-head latent attention (q_lora_rank 1536, kv_lora_rank
    # 512, qk_nope 128 + qk_rope 64, v_head_dim 128). 671 B main model (the 14 B
    # multi-token-prediction module is not served by default); 37 B active.
    ModelArch("deepseek-v3", 671.0, 61, 7168, 128, 128, 128, 129280, 2048, experts=256, active_experts=8,
              shared_expert_intermediate_size=2048, moe_layers=58, dense_intermediate_size=18432,
              kv_lora_rank=512, qk_rope_head_dim=64, q_lora_rank=1536, qk_nope_head_dim=128, v_head_dim=128,
              source=_HF.format("deepseek-ai/DeepSeek-V3")),
    ModelArch("deepseek-r1", 671.0, 61, 7168, 128, 128, 128, 129280, 2048, experts=256, active_experts=8,
              shared_expert_intermediate_size=2048, moe_layers=58, dense_intermediate_size=18432,
              kv_lora_rank=512, qk_rope_head_dim=64, q_lora_rank=1536, qk_nope_head_dim=128, v_head_dim=128,
              source=_HF.format("deepseek-ai/DeepSeek-R1")),
    # Qwen3 (model cards: 8.2 B, 14.8 B, 32.8 B; MoE 30.5 B / 3.3 B active, 235 B / 22 B active).
    ModelArch("qwen3-8b", 8.19, 36, 4096, 32, 8, 128, 151936, 12288, source=_HF.format("Qwen/Qwen3-8B")),
    ModelArch("qwen3-14b", 14.77, 40, 5120, 40, 8, 128, 151936, 17408, source=_HF.format("Qwen/Qwen3-14B")),
    ModelArch("qwen3-32b", 32.76, 64, 5120, 64, 8, 128, 151936, 25600, source=_HF.format("Qwen/Qwen3-32B")),
    ModelArch("qwen3-30b-a3b", 30.53, 48, 2048, 32, 4, 128, 151936, 768, experts=128, active_experts=8,
              source=_HF.format("Qwen/Qwen3-30B-A3B")),
    ModelArch("qwen3-235b-a22b", 235.09, 94, 4096, 64, 4, 128, 151936, 1536, experts=128, active_experts=8,
              source=_HF.format("Qwen/Qwen3-235B-A22B")),
    # gpt-oss: MoE (128 / 32 experts, top-4, expert width 2880), attention alternating between
    # a 128-token sliding window and full context (layer_types), head_dim 64. Model card:
    # 116.8 B (5.1 B active) and 20.9 B (3.6 B active). Weights ship as MXFP4 (precision fp4).
    ModelArch("gpt-oss-120b", 116.83, 36, 2880, 64, 8, 64, 201088, 2880, experts=128, active_experts=4,
              sliding_window=128, sliding_layers=18, source=_HF.format("openai/gpt-oss-120b")),
    ModelArch("gpt-oss-20b", 20.91, 24, 2880, 64, 8, 64, 201088, 2880, experts=32, active_experts=4,
              sliding_window=128, sliding_layers=12, source=_HF.format("openai/gpt-oss-20b")),
    # Mistral (model pages: 23.6 B; 123 B).
    ModelArch("mistral-small-24b", 23.57, 40, 5120, 32, 8, 128, 131072, 32768,
              source=_HF.format("mistralai/Mistral-Small-24B-Base-2501")),
    ModelArch("mistral-large-123b", 122.61, 88, 12288, 96, 8, 128, 32768, 28672,
              source=_HF.format("mistralai/Mistral-Large-Instruct-2411")),
]}

# Common spellings people type, and fine-tunes that share a base architecture. Keys are
# already normalised (lower case, no organisation, no suffix that get_model strips).
ALIASES = {
    "llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
    "llama-3-8b": "llama-3.1-8b", "llama-3-70b": "llama-3.1-70b", "llama3-8b": "llama-3.1-8b",
    "llama3-70b": "llama-3.1-70b", "llama3.1-8b": "llama-3.1-8b", "llama3.1-70b": "llama-3.1-70b",
    "llama3.3-70b": "llama-3.3-70b",
    "llama-4-scout-17b-16e": "llama-4-scout", "llama-4-maverick-17b-128e": "llama-4-maverick",
    "mistral-nemo": "mistral-nemo-12b", "mistral-large": "mistral-large-123b", "mistral-large-2": "mistral-large-123b",
    "mistral-small": "mistral-small-24b", "mistral-small-3-24b": "mistral-small-24b",
    "deepseek-v3-base": "deepseek-v3", "deepseek-r1-zero": "deepseek-r1",
    "phi-3-mini-4k": "phi-3-mini",
    # Distilled reasoning models keep their base model's architecture.
    "deepseek-r1-distill-llama-8b": "llama-3.1-8b", "deepseek-r1-distill-llama-70b": "llama-3.1-70b",
    "deepseek-r1-distill-qwen-7b": "qwen2.5-7b", "deepseek-r1-distill-qwen-14b": "qwen2.5-14b",
    "deepseek-r1-distill-qwen-32b": "qwen2.5-32b",
}

# Suffixes that name a fine-tune or a packaging of the same architecture, stripped in turn:
# roles (-instruct, -chat, -it, -base, -hf), weight formats (-fp8, -fp4, -awq, ...) and a
# trailing release date or version (-2407, -0528, -v0.1).
_SUFFIXES = ("-instruct", "-chat", "-it", "-base", "-hf", "-fp8", "-fp4", "-nvfp4", "-mxfp4", "-awq", "-gptq",
             "-int4", "-int8", "-w4a16", "-w8a8", "-kv", "-dynamic", "-bf16", "-fp16")
_DATE_OR_VERSION = re.compile(r"-(\d{4}|v\d+(\.\d+)*)$")


def model_names() -> list[str]:
    return sorted(MODEL_LIBRARY)


def _lookup(key: str) -> ModelArch | None:
    return MODEL_LIBRARY.get(ALIASES.get(key, key))


def get_model(name: str) -> ModelArch | None:
    """A library model by name, alias or Hugging Face id, case-insensitive.

    `meta-llama/Llama-3.1-8B-Instruct` -> drop the organisation -> `llama-3.1-8b-instruct`
    -> strip `-instruct` -> `llama-3.1-8b`. Suffixes come off one at a time (so
    `Llama-3.1-70B-Instruct-FP8-KV` works), and a leading `meta-` is tried without."""
    key = name.strip().lower().split("/")[-1]
    while True:
        for candidate in (key, key[len("meta-"):] if key.startswith("meta-") else None):
            if candidate and _lookup(candidate) is not None:
                return _lookup(candidate)
        shorter = _DATE_OR_VERSION.sub("", key)
        if shorter == key:
            shorter = next((key[: -len(s)] for s in _SUFFIXES if key.endswith(s) and len(key) > len(s)), key)
        if shorter == key:
            return None
        key = shorter

"""The workload: its pydantic schema (errors with field paths: solver/documents/strict.py).

Everything user-facing is validated here; the rest of the pipeline receives only
validated objects. `solver-cli schema` prints `Workload.model_json_schema()`. Catalog
files' schema (GPU types, offers) is solver/catalog/schema.py, below this one.
"""

# No `from __future__ import annotations` here: pydantic would then evaluate every field's
# annotation string at class creation (~150 compile() calls, ~3 ms of each CLI start).

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from solver.catalog.schema import GpuSpec, OfferSpec
from solver.confidence import (DEFAULT_CONFIDENCE, MAX_CONFIDENCE, MIN_CONFIDENCE, RATE_MARGIN,
                               checked_confidence)
from solver.documents.strict import StrictModel, is_number_text, quoted_number, show_default
from solver.workload.owned import OwnedGpus, Site, check_owned_and_sites

# Weight precisions: fp4 = NVFP4/MXFP4 on FP4 tensor cores (Blackwell only); int4 = weight-only
# AWQ/GPTQ with 16-bit activations (NVIDIA Volta or newer). Keep in step with
# solver/catalog/types.py PRECISIONS and solver/perf/api.py BYTES_PER_ELEMENT.
Precision = Literal["fp16", "bf16", "fp8", "int8", "fp4", "int4"]
# Engines, with an optional version: "vllm" (the newest documented release), "vllm-0.9",
# "sglang-0.4.6.post5", "tensorrt-llm-1.0"... Each version's defaults come from the engine's
# own source (solver/perf/data/engine_defaults.csv, docs/engines.md); checked in Service.
# How an instance is paid for: on-demand, spot (interruptible), or reserved / committed
# use for 1 or 3 years (an effective hourly price paid every hour of the horizon).
PricingTier = Literal["on_demand", "spot", "reserved_1y", "reserved_3y"]
PRICING_TIERS: tuple[str, ...] = ("on_demand", "spot", "reserved_1y", "reserved_3y")
MAX_PERIODS = 10_000
MAX_HOURS = 100_000.0  # per period: about 11 years, beyond any planning horizon
# Upper bounds that catch unit slips (ms typed as s, $/month typed as $/hour) without limiting real use.
MAX_RATE = 1e9
MAX_TOKENS = 2_000_000
MAX_MS = 3.6e6
# A measured replica slower than this is a unit slip; it also keeps the replicas a demand
# could need (MAX_RATE x headroom / rate) far inside the MIP solvers' finite range (1e20).
MIN_REPLICA_RATE = 1e-6


# ---------------------------------------------------------------- models and demand
class InlineModel(StrictModel):
    """A decoder-only transformer described by its config."""

    name: str = Field(min_length=1, max_length=100, description="the model's name, as the plan shows it (any "
                      "text; it need not be a library model)")
    params_b: float = Field(gt=0, le=10_000, description="total parameters, in billions (all experts of a "
                            "mixture of experts): the weights every replica holds in GPU memory")
    layers: int = Field(gt=0, le=1000, description="transformer layers (the config's num_hidden_layers)")
    hidden_size: int = Field(gt=0, le=1_000_000, description="model (embedding) width (the config's hidden_size)")
    attention_heads: int = Field(gt=0, le=10_000, description="query heads per layer (num_attention_heads); "
                                 "t-way tensor parallelism needs it divisible by t")
    kv_heads: int = Field(gt=0, le=10_000, description="key/value heads per layer (num_key_value_heads; fewer than "
                          "attention_heads for grouped-query attention); at most attention_heads. Sets the KV-cache "
                          "size per token")
    head_dim: int = Field(gt=0, le=10_000, description="width of one attention head (the config's head_dim, "
                          "usually hidden_size / attention_heads)")
    vocab_size: int = Field(default=32000, gt=0, le=10_000_000, description="vocabulary size: the embedding and "
                            "output-head matrices (vocab_size x hidden_size each)")
    intermediate_size: int = Field(default=0, ge=0, description="MLP (feed-forward) width per layer; for a mixture "
                                   "of experts, the width of one routed expert. 0: not stated (give it for a "
                                   "mixture of experts unless active_params_b is given)")
    experts: int = Field(default=1, ge=1, le=4096, description="routed experts per layer; 1: a dense model, more: "
                         "a mixture of experts")
    active_experts: int = Field(default=1, ge=1, le=4096, description="routed experts each token goes to "
                                "(num_experts_per_tok); at most experts")
    active_params_b: float | None = Field(default=None, gt=0, le=10_000, description="parameters each token "
                                          "multiplies through, in billions (mixture of experts); at most params_b. "
                                          "Unset: params_b for a dense model, derived from the shapes for a "
                                          "mixture of experts")
    max_context_tokens: int | None = Field(
        default=None, gt=0, le=100_000_000, description="the longest request (prompt + output tokens) the model "
        "serves: the config's max_position_embeddings, or the model card's context length where RoPE scaling "
        "extends it. Every request class must fit; omit for no check")

    @model_validator(mode="after")
    def _consistent(self):
        if self.kv_heads > self.attention_heads:
            raise ValueError("kv_heads cannot exceed attention_heads. To fix: check the model config")
        if self.active_experts > self.experts:
            raise ValueError("active_experts cannot exceed experts. To fix: check the model config")
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            raise ValueError("active_params_b cannot exceed params_b. To fix: check the model config")
        return self


class RequestClass(StrictModel):
    """One request-size class of an LLM service's traffic."""

    name: str = Field(min_length=1, max_length=64, description="the class's name, unique within the service; "
                      "measured profiles name it in request_class")
    share: float = Field(gt=0, le=1, description="fraction of the service's requests in this class; the shares of "
                         "all classes must add up to 1")
    prompt_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="input tokens per request "
                                      "of this class; required for LLM services (those with a model), ignored by "
                                      "measured profiles")
    output_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="generated tokens per "
                                      "request of this class; required for LLM services (those with a model), "
                                      "ignored by measured profiles")


class Demand(StrictModel):
    requests_per_s: float | None = Field(default=None, ge=0, le=MAX_RATE, description="requests per second the "
                                         "service must serve (before constraints.headroom); services with a model "
                                         "(LLMs) must use this unit. Give exactly one of requests_per_s or "
                                         "items_per_min")
    items_per_min: float | None = Field(default=None, ge=0, le=MAX_RATE, description="items (images, embeddings, "
                                        "...) per minute the service must serve (before constraints.headroom); only "
                                        "for services without a model, whose measured profiles then use the same "
                                        "unit. Give exactly one of requests_per_s or items_per_min")
    prompt_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="input tokens per request, "
                                      "when all requests are alike; an LLM service needs it (and output_tokens) "
                                      "unless it gives classes; not together with classes")
    output_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="generated tokens per "
                                      "request, when all requests are alike; an LLM service needs it (and "
                                      "prompt_tokens) unless it gives classes; not together with classes")
    classes: list[RequestClass] | None = Field(default=None, min_length=1, max_length=256, description="request "
                                               "sizes with their shares of the demand (shares add up to 1, names "
                                               "unique), instead of prompt_tokens/output_tokens; the plan routes "
                                               "each class's traffic to replicas. Unset: one class of the given "
                                               "token counts")
    arrival_cv: float = Field(default=1.0, ge=0, le=20, description=(
        "coefficient of variation of the times between arrivals: 1 for Poisson (independent) arrivals, "
        "more for bursty traffic, less for paced traffic; the queueing model uses it"))
    profile: dict[str, Annotated[float, Field(ge=0, le=1e6)]] = Field(
        default_factory=dict, json_schema_extra=show_default({}),
        description="period name -> multiplier of this demand in that period "
        "(a period not named here: 1.0); needs the workload's `periods`")

    @model_validator(mode="after")
    def _one_unit(self):
        if (self.requests_per_s is None) == (self.items_per_min is None):
            raise ValueError("give exactly one of requests_per_s or items_per_min. To fix: "
                             "use requests_per_s for LLM services, items_per_min for images/embeddings")
        if self.classes:
            if self.prompt_tokens is not None or self.output_tokens is not None:
                raise ValueError("give either classes or prompt_tokens/output_tokens, not both. To fix: "
                                 "move the token counts into the classes")
            total = sum(c.share for c in self.classes)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"class shares sum to {total:g}, not 1. To fix: make the shares add up to 1")
            names = [c.name for c in self.classes]
            if len(set(names)) != len(names):
                raise ValueError("class names must be unique. To fix: rename the duplicate class")
        return self

    @property
    def rate(self) -> float:
        return self.requests_per_s if self.requests_per_s is not None else self.items_per_min

    @property
    def unit(self) -> str:
        return "requests/s" if self.requests_per_s is not None else "items/min"


class SLO(StrictModel):
    percentile: Literal[50, 90, 95, 99] | None = Field(default=None, description=(
        "every bound below must hold at this percentile of all the service's requests, queueing at the planned "
        "load included; unset: the bounds are checked against service times without queueing (and the plan warns "
        "where p99 under load would miss them)"))
    latency_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="end-to-end time per request or item, "
                                     "milliseconds; unset: no bound")
    ttft_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="time to first token, milliseconds; "
                                  "unset: no bound")
    tpot_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="time per output token, "
                                  "milliseconds; unset: no bound")
    confidence: Literal["nominal"] | Annotated[float, Field(ge=MIN_CONFIDENCE, le=MAX_CONFIDENCE)] | None = Field(
        default=None, description=(
            "with a percentile: how sure to be that a real replica is no slower than the one the plan is sized for "
            f"(the queueing model is optimistic against real serving). A number from {MIN_CONFIDENCE:g} to "
            f"{MAX_CONFIDENCE:g}: every replica is capped where the bounds still hold on a replica slowed by that "
            f"quantile of the calibrated slowdown, at {RATE_MARGIN * 100:g} % more traffic than planned; \"nominal\": the "
            f"model as it is, at the edge. Unset: {DEFAULT_CONFIDENCE:g} when percentile is set. Needs percentile "
            "(for estimates without queueing use size_with_error_band)"))

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value, info):
        if value is None:
            return value
        if value != "nominal" and is_number_text(value):
            msg, fix = quoted_number(value)
            raise ValueError(f"{msg} To fix: {fix}")
        if "percentile" in info.data and info.data["percentile"] is None:
            raise ValueError("confidence is about latency under load, which only a percentile SLO plans for. To fix: "
                             "add slo.percentile (e.g. 99), or remove confidence; for estimates without queueing "
                             "use size_with_error_band")
        return checked_confidence(value)


class MeasuredProfile(StrictModel):
    """A measured throughput/latency of one service on one GPU configuration; used as given."""

    gpu: str = Field(min_length=1, description="GPU type the measurement ran on (a "
                      "catalog GPU name, `solver-cli catalog --gpus`); it applies to every offer of that GPU")
    gpus_per_replica: int = Field(default=1, ge=1, le=64, description="GPUs one replica used in the "
                                  "measurement; planned only on offers whose instances it packs exactly (a power "
                                  "of two that divides the instance's GPUs, or all of them)")
    precision: Precision | None = Field(default=None, description="weight precision the measurement ran at (fp16, "
                                        "bf16, fp8, int8, fp4, int4); the GPU must support it. Not limited by "
                                        "the service's precisions; unset: not stated")
    offer: str | None = Field(default=None, description="restrict to one offer id (provider/name)")
    request_class: str | None = Field(default=None, description="the demand class this "
                                       "measurement is for (a name in demand.classes); unset: every class, where "
                                       "no profile names the class itself")
    requests_per_s: float | None = Field(default=None, ge=MIN_REPLICA_RATE, le=MAX_RATE, description="throughput "
                                         "of one replica, requests per second; give exactly one of requests_per_s "
                                         "or items_per_min, in the same unit as the service's demand")
    items_per_min: float | None = Field(default=None, ge=MIN_REPLICA_RATE, le=MAX_RATE, description="throughput "
                                        "of one replica, items per minute; give exactly one of requests_per_s or "
                                        "items_per_min, in the same unit as the service's demand")
    latency_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="measured end-to-end time per "
                                     "request or item, milliseconds; checked against slo.latency_ms (a latency "
                                     "SLO cannot use a profile without it)")
    ttft_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="measured time to first token, "
                                  "milliseconds; checked against slo.ttft_ms (a TTFT SLO cannot use a profile "
                                  "without it)")
    tpot_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="measured time per output token, "
                                  "milliseconds; checked against slo.tpot_ms (a TPOT SLO cannot use a profile "
                                  "without it)")
    memory_gib_per_gpu: float | None = Field(default=None, gt=0, le=4096, description="measured GPU memory per "
                                             "GPU, GiB; offers whose usable memory per GPU is smaller are "
                                             "rejected. Unset: no memory check")

    @model_validator(mode="after")
    def _one_rate(self):
        if (self.requests_per_s is None) == (self.items_per_min is None):
            raise ValueError("give exactly one of requests_per_s or items_per_min, per replica. To fix: "
                             "use the same unit as the service's demand")
        return self


class EngineOptions(StrictModel):
    """The serving engine's own settings where they differ from its defaults: what a replica
    holds and how it batches (docs/performance-model.md, "Engines")."""

    kv_cache_dtype: Literal["auto", "fp16", "bf16", "fp8"] = Field(
        default="auto", description="KV-cache element type, separate from the weight precision. auto: the "
        "engine's default (vLLM and SGLang: 16-bit unless told otherwise; TensorRT-LLM: fp8 beside fp8 or fp4 "
        "weights, else 16-bit); fp8 halves the KV cache and needs an FP8-capable GPU (Ada, Hopper, Blackwell, "
        "MI300)")
    max_batch: int | None = Field(default=None, gt=0, le=100_000, description="cap on concurrent sequences per "
                                  "replica (vLLM max_num_seqs, TensorRT-LLM max_batch_size, SGLang "
                                  "max_running_requests); default: the engine version's own (the newest vLLM: 1024 on "
                                  "GPUs of 70 GiB or more, else 256; TensorRT-LLM 2048; docs/engines.md)")
    kv_cache_memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="the engine's memory setting, in its own meaning: vLLM "
        "gpu_memory_utilization (of all GPU memory; default 0.9, 0.92 from 0.20), TensorRT-LLM "
        "kv_cache_free_gpu_memory_fraction (of the memory weights and activations leave; default 0.9), SGLang "
        "mem_fraction_static (weights and KV pool, of all GPU memory; by version, TP and GPU memory)")
    max_num_batched_tokens: int | None = Field(
        default=None, ge=16, le=10_000_000, description="tokens one engine step may carry, decodes and prompt "
        "chunks (vLLM max_num_batched_tokens, SGLang chunked_prefill_size, TensorRT-LLM max_num_tokens); "
        "default: the engine version's own (e.g. vLLM 8192 on GPUs of 70 GiB or more, 2048 below)")
    scheduler: Literal["chunked_mixed", "prefill_first"] | None = Field(
        default=None, description="how steps mix prompts with decoding: chunked_mixed (every step decodes every "
        "running sequence and fills the rest of its tokens with prompt chunks: vLLM V1, TensorRT-LLM) or "
        "prefill_first (waiting prompts run in steps of their own while running sequences pause: vLLM V0 "
        "without chunked prefill, SGLang without mixed chunks); default: the engine version's own")
    kv_admission: Literal["whole_sequence", "paged_on_demand"] | None = Field(
        default=None, description="how a sequence is admitted against the KV cache: whole_sequence (blocks for its "
        "prompt and whole output reserved before it starts: TensorRT-LLM's capacity_scheduler_policy "
        "GUARANTEED_NO_EVICT, its default) or paged_on_demand (blocks as tokens arrive, a sequence preempted or "
        "paused when the cache is full: vLLM, TensorRT-LLM's MAX_UTILIZATION); decides how many sequences a "
        "replica holds; default: the engine version's own")
    multi_step: int | None = Field(
        default=None, ge=1, le=64, description="decode steps a prefill-first engine runs per scheduling decision "
        "(vLLM V0's num_scheduler_steps): once it decodes it runs this many "
        "steps before it looks at waiting prompts again, so a prompt arriving meanwhile waits for the block's end "
        "(TTFT grows by about half a block); needs scheduler: prefill_first; default 1")

    @model_validator(mode="after")
    def _multi_step_needs_prefill_first(self):
        if self.multi_step is not None and self.multi_step > 1 and self.scheduler != "prefill_first":
            raise ValueError(f"multi_step is {self.multi_step}, which the planner models for prefill-first engines "
                             "only (vLLM V0 without chunked prefill, SGLang): with chunked prefill vLLM V0 runs prompt "
                             "chunks inside the block too. To fix: also set scheduler: prefill_first, or leave "
                             "multi_step out")
        return self

    @model_validator(mode="before")
    @classmethod
    def _known_options(cls, data):
        if isinstance(data, dict):
            from solver.suggest import did_you_mean

            known = list(cls.model_fields)
            for key in data:
                if key not in known:
                    raise ValueError(f"unknown engine option {key!r}{did_you_mean(str(key), known) or '.'} "
                                     f"To fix: use {', '.join(known)}")
        return data


class Disaggregation(StrictModel):
    """Limits on a service's disaggregated deployment (prefill and decode pools)."""

    prefill_gpu_types: list[str] | None = Field(default=None, min_length=1, max_length=64, description="GPU types "
                                                "the prefill pool may use; unset: any the constraints allow")
    decode_gpu_types: list[str] | None = Field(default=None, min_length=1, max_length=64, description="GPU types "
                                               "the decode pool may use; unset: any the constraints allow")


class Redundancy(StrictModel):
    """Failure domains a service must survive (docs/redundancy.md)."""

    domain: Literal["none", "instance", "zone", "region", "provider"] = Field(
        description="the failure domain whose loss the fleet must survive: instance (any one instance, however "
        "the replicas were packed on it), zone, region (a provider's region) or provider; none: no redundancy "
        "(a service's override of the workload's)")
    serve_fraction: float = Field(default=1.0, gt=0, le=1, description="after losing any one domain, the "
                                  "surviving replicas still serve this fraction of the service's demand "
                                  "(without headroom), within its SLOs; 1.0: all of it")


class SpotInterruptions(StrictModel):
    """What the fleet must still serve when a provider reclaims spot capacity (docs/redundancy.md)."""

    serve_fraction: float = Field(default=1.0, ge=0, le=1, description="after a provider reclaims every spot "
                                  "instance of any one offer at once (one instance type in one region: a spot "
                                  "capacity pool), the rest of the fleet - on-demand, reserved and the other "
                                  "offers' spot instances - still serves this fraction of the service's demand "
                                  "(without headroom), within its SLOs; 0: no cover (a service's override)")


def _disaggregation_unsupported(svc) -> str:
    """Why a service cannot be planned disaggregated ("" if it can)."""
    if svc.model is None or svc.profiles:
        return ("needs an LLM model estimated by the performance model (measured profiles describe whole "
                "replicas). To fix: remove profiles, or set serving: aggregated")
    if svc.demand.classes and len(svc.demand.classes) > 1:
        return "supports one request class for now. To fix: give one prompt/output size, or serving: aggregated"
    if svc.min_replicas or svc.max_replicas is not None:
        return ("cannot take min_replicas/max_replicas (they count aggregated replicas). To fix: remove them, "
                "or set serving: aggregated")
    return ""


class Service(StrictModel):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$", description="the "
                      "service's name, unique in the workload: letters, digits and . _ : / - (starting with a letter "
                      "or digit); the plan and current_fleet replicas refer to it")
    model: str | InlineModel | None = Field(default=None, description="a library model name, or an inline description; "
                                            "omit for non-LLM services described by measured profiles")
    precisions: list[Precision] = Field(default_factory=lambda: ["fp16"], json_schema_extra=show_default(["fp16"]),
                                        min_length=1, description="weight "
                                        "precisions the plan may choose among for the model's estimated "
                                        "configurations, each listed once: fp16, bf16, fp8 (FP8 tensor cores: Ada, "
                                        "Hopper, Blackwell, MI300), int8, fp4 (Blackwell only), int4 (weight-only "
                                        "AWQ/GPTQ, NVIDIA Volta or newer); each is used only on GPUs that support "
                                        "it. Measured profiles carry their own precision")
    engine: str = Field(default="vllm", max_length=64, description="serving engine and, optionally, its version: "
                        "vllm, sglang or tensorrt-llm, e.g. vllm-0.9, sglang-0.4, tensorrt-llm-1.0 (without a "
                        "version: the newest release documented in docs/engines.md). The version's defaults (batch "
                        "cap, tokens per step, scheduler, KV-cache type, memory fraction, CUDA graphs) are the "
                        "performance model's; measured profiles are used as given, and deployment export runs it")
    engine_options: EngineOptions = Field(default_factory=EngineOptions, json_schema_extra=show_default({}),
                                          description="the engine's own settings "
                                          "where they differ from its defaults (KV-cache type, batch cap, memory "
                                          "fraction); default: the engine's defaults")
    demand: Demand = Field(description="the traffic to serve: a rate, request sizes and their variability")
    slo: SLO = Field(default_factory=SLO, json_schema_extra=show_default({}),
                     description="latency bounds every planned replica must meet; default: "
                     "none")
    min_replicas: int = Field(default=0, ge=0, le=100_000, description="plan at least this many replicas of the "
                              "service, whatever the demand; 0: only as many as the demand needs")
    max_replicas: int | None = Field(default=None, ge=1, le=100_000, description="plan at most this many replicas "
                                     "of the service (at least min_replicas); unset: no limit")
    profiles: list[MeasuredProfile] = Field(default_factory=list, json_schema_extra=show_default([]),
                                            description="measured throughput and latency "
                                            "per GPU type and replica size, used as given: where one covers a GPU "
                                            "and replica size, the performance model is not used for it. A service "
                                            "without a model needs them")
    size_with_error_band: bool = Field(default=False, description="size with the estimate's error margin: "
                                       "derate predicted throughput and inflate latency by the error band")
    serving: Literal["auto", "aggregated", "disaggregated"] = Field(
        default="aggregated", description="aggregated: every replica prefills and decodes; disaggregated: a "
        "prefill pool ships each prompt's KV cache to a decode pool (each pool on the GPU type that serves it "
        "cheapest); auto: the optimizer picks, and may mix both (docs/disaggregation.md)")
    disaggregation: Disaggregation = Field(default_factory=Disaggregation, json_schema_extra=show_default({}),
                                           description="limits on the prefill and decode pools (with serving "
                                           "auto or disaggregated)")
    redundancy: Redundancy | None = Field(default=None, description="this service's failure domain, "
                                          "overriding constraints.redundancy (domain none: no redundancy for it); "
                                          "unset: the workload's")
    spot_interruptions: SpotInterruptions | None = Field(
        default=None, description="this service's cover for reclaimed spot capacity, overriding "
        "constraints.spot_interruptions (serve_fraction 0: none for it); unset: the workload's")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        from solver.perf.engine_profile import check_engine

        why = check_engine(value)
        if why:
            raise ValueError(f"{why}. To fix: use e.g. vllm, vllm-0.9, sglang or tensorrt-llm")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) is below min_replicas ({self.min_replicas}). "
                             "To fix: raise max_replicas or lower min_replicas")
        if self.model is None and not self.profiles:
            raise ValueError("a service needs a model (to estimate) or measured profiles. To fix: "
                             "add `model` for an LLM, or `profiles` with measured throughput per GPU")
        llm_like = self.model is not None
        if llm_like and self.demand.requests_per_s is None:
            raise ValueError("an LLM service's demand is in requests_per_s. To fix: replace items_per_min "
                             "with requests_per_s and give prompt_tokens/output_tokens")
        if llm_like and any(c.prompt_tokens is None or c.output_tokens is None for c in self.demand.classes or []):
            raise ValueError("an LLM service's demand classes need prompt_tokens and output_tokens. To fix: "
                             "add typical token counts to every class")
        if llm_like and not self.demand.classes and (self.demand.prompt_tokens is None or self.demand.output_tokens is None):
            raise ValueError("an LLM service needs demand.prompt_tokens and demand.output_tokens "
                             "(or demand.classes). To fix: add typical token counts, e.g. 512 and 256")
        if self.serving != "aggregated":
            why = _disaggregation_unsupported(self)
            if why:
                raise ValueError(f"serving: {self.serving} {why}")
        elif self.disaggregation != Disaggregation():
            raise ValueError("disaggregation limits are given but serving is aggregated. To fix: set serving to "
                             "auto or disaggregated, or remove disaggregation")
        if len(set(self.precisions)) != len(self.precisions):
            raise ValueError("precisions are repeated. To fix: list each precision once")
        class_names = {c.name for c in self.demand.classes or []}
        for i, p in enumerate(self.profiles):
            if (p.requests_per_s is None) != (self.demand.requests_per_s is None):
                raise ValueError(f"profiles[{i}] is in other units than the demand ({self.demand.unit}). "
                                 f"To fix: give the profile's throughput in {self.demand.unit}")
            if p.request_class is not None and p.request_class not in class_names:
                raise ValueError(f"profiles[{i}].request_class {p.request_class!r} is not a demand class. "
                                 f"To fix: use one of {sorted(class_names) or 'the demand classes (none given)'}")
        return self


# ---------------------------------------------------------------- constraints and catalog
class Constraints(StrictModel):
    budget_usd_per_hour: float | None = Field(default=None, gt=0, le=1e7, description="the fleet may cost at most "
                                              "this many US dollars per hour (all instances at the prices they are "
                                              "bought at); with periods, in every period, reservations included. "
                                              "Unset: no budget")
    headroom: float = Field(default=0.0, ge=0, le=10, description="spare capacity as a fraction of demand: every "
                            "service is sized to serve demand x (1 + headroom), e.g. 0.2 for 20 % more; 0: exactly "
                            "the demand")
    gpu_quotas: dict[str, int] = Field(default_factory=dict, json_schema_extra=show_default({}),
                                       description="GPU type -> the most GPUs of that type "
                                       "the fleet may hold (instances x GPUs per instance), 0 or more; a type not "
                                       "named here: no limit. Names must be catalog GPU types")
    offer_quotas: dict[str, int] = Field(default_factory=dict, json_schema_extra=show_default({}),
                                         description="offer id (provider/name) -> the most "
                                         "instances of that offer, 0 or more (0 removes the offer); the tighter of "
                                         "this and the catalog's available_instances holds. An offer not named here: "
                                         "no limit beyond the catalog's")
    providers: list[str] | None = Field(default=None, min_length=1, description="use only offers from these "
                                        "providers (matched case-insensitively; each must have offers in the "
                                        "catalog); unset: all providers")
    regions: list[str] | None = Field(default=None, min_length=1, description="use only offers in these regions "
                                      "(matched case-insensitively; each must have offers in the catalog); unset: "
                                      "all regions")
    gpu_types: list[str] | None = Field(default=None, min_length=1, description="use only offers of these GPU "
                                        "types (catalog GPU names, `solver-cli catalog --gpus`); unset: all types")
    exclude_gpu_types: list[str] = Field(default_factory=list, json_schema_extra=show_default([]),
                                         description="never use offers of these GPU types "
                                         "(catalog GPU names); applies after gpu_types")
    allow_consumer_gpus: bool = Field(default=False, description="false: offers of GPUs the catalog marks as "
                                      "consumer cards (GeForce and the like) are left out; true: they may be used")
    pricing: Literal["on_demand", "spot"] = Field(default="on_demand", description="the price every offer is "
                                                  "bought at: on_demand, or spot (offers without a spot price are "
                                                  "left out). With pricing_tiers set, leave it on_demand, or spot "
                                                  "only when pricing_tiers is [spot]")
    same_region: Literal["service", "fleet"] | None = Field(
        default=None, description="keep each service's replicas in one region (`service`), or the whole fleet "
        "(`fleet`); a region is a provider's region. Unset: replicas may go anywhere the filters allow")
    pricing_tiers: list[PricingTier] | None = Field(
        default=None, min_length=1, description="the tiers the plan may buy from (default: `pricing` alone): "
        "on_demand, spot, reserved_1y, reserved_3y")
    max_spot_share: float | None = Field(
        default=None, ge=0, le=1, description="at most this share of each service's demand may depend on spot "
        "instances: on-demand and reserved capacity alone serve at least (1 - share) of it, in every period")
    spot_min_regions: int | None = Field(
        default=None, ge=1, le=100, description="spread each service's spot capacity over at least this many "
        "regions (provider/region): no region holds more than 1/k of it")
    budget_usd_per_day: float | None = Field(default=None, gt=0, le=1e9, description="average cost "
                                             "per day, US dollars: the horizon's cost (the periods' hours repeat) "
                                             "scaled to 24 hours; unset: no daily budget")
    budget_usd_per_month: float | None = Field(default=None, gt=0, le=1e10, description="average "
                                               "cost per month, US dollars: the horizon's cost scaled to 730 hours; "
                                               "unset: no monthly budget")
    redundancy: Redundancy | None = Field(default=None, description="every service must still serve "
                                          "serve_fraction of its demand after losing any one failure domain "
                                          "(instance, zone, region or provider), exactly, in the optimization; "
                                          "services may override it. Unset: no redundancy beyond min_replicas")
    spot_interruptions: SpotInterruptions | None = Field(
        default=None, description="spot capacity is reclaimed a capacity pool at a time: every service must "
        "still serve serve_fraction of its demand after all spot instances of any one offer are lost, exactly, "
        "in the optimization; needs spot among the allowed tiers; services may override it. Unset: spot "
        "capacity counts in full")
    reserved_gpus_min: int | None = Field(default=None, ge=0, le=10_000_000, description="reserve "
                                          "at least this many GPUs (all reserved offers together); needs a reserved "
                                          "tier in pricing_tiers")
    reserved_gpus_max: int | None = Field(default=None, ge=0, le=10_000_000, description="reserve at most "
                                          "this many GPUs (all reserved offers together; at least "
                                          "reserved_gpus_min); needs a reserved tier in pricing_tiers")

    @model_validator(mode="after")
    def _tiers(self):
        tiers = self.pricing_tiers
        if tiers is not None:
            if len(set(tiers)) != len(tiers):
                raise ValueError("constraints.pricing_tiers repeats a tier. To fix: list each tier once")
            if self.pricing == "spot" and tiers != ["spot"]:
                raise ValueError("constraints.pricing is 'spot' but pricing_tiers lists other tiers. To fix: "
                                 "drop `pricing` and list the tiers in pricing_tiers")
        allowed = self.allowed_tiers
        if self.max_spot_share is not None and "spot" not in allowed:
            raise ValueError("constraints.max_spot_share is set but spot is not an allowed pricing tier. To fix: "
                             "add spot to constraints.pricing_tiers, or remove max_spot_share")
        if self.spot_interruptions is not None and "spot" not in allowed:
            raise ValueError("constraints.spot_interruptions is set but spot is not an allowed pricing tier. To fix: "
                             "add spot to constraints.pricing_tiers, or remove spot_interruptions")
        if self.spot_min_regions is not None and "spot" not in allowed:
            raise ValueError("constraints.spot_min_regions is set but spot is not an allowed pricing tier. To fix: "
                             "add spot to constraints.pricing_tiers, or remove spot_min_regions")
        if (self.reserved_gpus_min or self.reserved_gpus_max is not None) and not any(
                t.startswith("reserved") for t in allowed):
            raise ValueError("constraints.reserved_gpus_min/max are set but no reserved tier is allowed. To fix: "
                             "add reserved_1y or reserved_3y to constraints.pricing_tiers")
        if (self.reserved_gpus_min is not None and self.reserved_gpus_max is not None
                and self.reserved_gpus_min > self.reserved_gpus_max):
            raise ValueError(f"constraints.reserved_gpus_min ({self.reserved_gpus_min}) exceeds reserved_gpus_max "
                             f"({self.reserved_gpus_max}). To fix: raise the maximum or lower the minimum")
        return self

    @property
    def allowed_tiers(self) -> tuple[str, ...]:
        """The pricing tiers the plan may use, in PRICING_TIERS order."""
        chosen = self.pricing_tiers if self.pricing_tiers is not None else [self.pricing]
        return tuple(t for t in PRICING_TIERS if t in chosen)

    @property
    def uses_tiers(self) -> bool:
        """Anything beyond today's single price list (on-demand, or every offer at spot)."""
        return any(v is not None for v in (self.pricing_tiers, self.max_spot_share, self.spot_min_regions,
                                           self.spot_interruptions,
                                           self.budget_usd_per_day, self.budget_usd_per_month,
                                           self.reserved_gpus_min, self.reserved_gpus_max))

    @field_validator("gpu_quotas", "offer_quotas")
    @classmethod
    def _non_negative(cls, v: dict[str, int]):
        for k, n in v.items():
            if n < 0:
                raise ValueError(f"quota for {k!r} is negative ({n}). To fix: use 0 or more")
        return v


class CatalogRef(StrictModel):
    source: Literal["default", "file", "inline"] = Field(default="default", description="where the catalog "
                                                         "comes from: default (the shipped catalog), file (a catalog "
                                                         "file, `file`) or inline (`offers` and `gpus` here). "
                                                         "Omitted: file when `file` is given, inline when `offers` "
                                                         "is, else default")
    file: str | None = Field(default=None, description="path of a catalog file, JSON or YAML (schema: "
                             "`solver-cli schema --catalog`); a relative path is taken from the workload file's "
                             "folder. Needed with source file")
    gpus: list[GpuSpec] = Field(default_factory=list, json_schema_extra=show_default([]),
                                description="inline GPU types, with source inline: added to "
                                "the default catalog's (one with a default type's name replaces it)")
    offers: list[OfferSpec] = Field(default_factory=list, json_schema_extra=show_default([]),
                                    description="inline offers, with source inline (at "
                                    "least one): the catalog's offers, alone unless include_default_offers")
    include_default_offers: bool = Field(default=False, description="with inline offers: add the default catalog's")

    @model_validator(mode="before")
    @classmethod
    def _infer_source(cls, data):
        if isinstance(data, dict) and "source" not in data:
            data = dict(data)
            data["source"] = "file" if data.get("file") else ("inline" if data.get("offers") else "default")
        return data

    @model_validator(mode="after")
    def _consistent(self):
        if self.source == "file" and not self.file:
            raise ValueError("catalog.source is 'file' but no file is given. To fix: set catalog.file to a path")
        if self.source == "inline" and not self.offers:
            raise ValueError("catalog.source is 'inline' but offers is empty. To fix: add offers or use source 'default'")
        # Inline GPU types or offers beside another source would be ignored: say so instead.
        given = [name for name in ("gpus", "offers") if getattr(self, name)]
        if self.source != "inline" and given:
            fields_ = " and ".join(f"catalog.{n}" for n in given)
            if self.source == "file":
                raise ValueError(f"{fields_} cannot be used with catalog.file (source 'file'): only the file's "
                                 "catalog is read. To fix: put them in the catalog file, or remove catalog.file "
                                 "and list the offers inline")
            if self.offers:
                raise ValueError(f"catalog.source is 'default', so {fields_} would be ignored. To fix: set "
                                 "catalog.source to 'inline' (or leave it out: offers make it inline), or remove "
                                 "them")
            raise ValueError(f"{fields_} are only used with inline offers, and catalog.offers is empty, so the "
                             "default catalog would be used unchanged. To fix: add catalog.offers (they may name "
                             "these GPU types; set include_default_offers to keep the default offers too), or "
                             "remove catalog.gpus")
        return self


class Period(StrictModel):
    """One stretch of the planning horizon with its own demand (e.g. "peak", 8 hours)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$", description="the "
                      "period's name, unique among the periods: letters, digits and . _ : - (starting with a letter "
                      "or digit); services' demand.profile names it")
    hours: float = Field(gt=0, le=MAX_HOURS, description="length of the period, "
                       "hours; the horizon is the sum over the periods, and repeats")


class RunningReplicas(StrictModel):
    """Replicas of one service that a running instance type hosts today."""

    service: str = Field(min_length=1, description="name of one of the workload's services")
    count: int = Field(ge=1, le=1_000_000, description="replicas of it on this entry's instances, all together; "
                       "their GPUs (count x gpus_per_replica, over all replicas listed) must fit the instances")
    gpus_per_replica: int = Field(default=1, ge=1, le=64, description="GPUs each of these replicas uses")
    precision: Precision | None = Field(default=None, description="omit for measured-profile services")


class CurrentInstances(StrictModel):
    """Instances of one offer that run today (the fleet a re-plan starts from)."""

    offer_id: str = Field(min_length=1, description="offer id (provider/name)")
    instances: int = Field(ge=0, le=1_000_000, description="instances of the offer running today (at most one "
                           "entry per offer and spot flag); the re-plan keeps, adds or removes from these, "
                           "weighing change_costs")
    spot: bool = Field(default=False, description="these instances are spot instances")
    replicas: list[RunningReplicas] = Field(default_factory=list, json_schema_extra=show_default([]),
                                            description="optional: what they run "
                                              "today, so that the rollout leaves replicas in place where the plan "
                                              "keeps them; empty: the kept instances are taken to run what the plan "
                                              "puts on them")


class ChangeCosts(StrictModel):
    """The cost of changing the running fleet (cold starts, model loads, drained requests)."""

    add_instance_usd: float = Field(default=0.0, ge=0, le=1e7, description="one-off cost, US dollars, "
                                    "per instance started against current_fleet (cold start, model load); 0: free")
    remove_instance_usd: float = Field(default=0.0, ge=0, le=1e7, description="one-off cost, US dollars, "
                                       "per instance of current_fleet stopped (drained requests); 0: free")
    max_changed_instances: int | None = Field(default=None, ge=0, le=10_000_000,
                                              description="at most this many instances started plus "
                                              "stopped against current_fleet; unset: no limit")


class SolverOptions(StrictModel):
    time_limit_s: float = Field(default=60.0, gt=0, le=86_400, description="wall-clock limit of the whole "
                                "plan, seconds (candidates, solve, tie-break): the best plan found by then is "
                                "returned with its gap, or an error when none was found. The CLI's --time-limit "
                                "and a gRPC deadline override it")
    backend: Literal["auto", "scip", "highs"] = Field(default="auto", description="MIP solver: auto (SCIP, or "
                                                      "HiGHS for routing-heavy models), scip or highs; the CLI's "
                                                      "--backend overrides it. cp-sat is refused: it proves nothing "
                                                      "about this model's plans")

    @field_validator("backend", mode="before")
    @classmethod
    def _offered_backend(cls, value):
        from solver.backend_choices import withdrawn_backend

        withdrawn = withdrawn_backend(value) if isinstance(value, str) else None
        if withdrawn:
            raise ValueError(f"{withdrawn[0]} To fix: {withdrawn[1]}")
        return value
    tie_break: bool = Field(default=True, description="second pass: among cheapest fleets, fewest GPUs then most headroom")
    verify: bool = Field(default=True, description="simulate every replica configuration a plan uses under a "
                         "percentile SLO at the rate the plan routes to it (with the confidence's margins) and "
                         "lower the cap of one that misses, then solve again, until every one is confirmed "
                         "(docs/queueing.md, \"Simulation in the loop\"); false: the analytic caps as they are")
    relative_gap: float = Field(default=0.0, ge=0, le=0.1, description=(
        "stop once the plan is proven within this fraction of the optimum (e.g. 0.0001 for 0.01 %); "
        "0 proves the optimum itself, to within $0.000001/hour"))
    calibration: dict[str, float] = Field(default_factory=dict, json_schema_extra=show_default({}),
                                          description="constant name -> value, "
                                             "overriding the performance model's constants "
                                             "(docs/performance-model.md); unknown names or bad values are rejected. "
                                             "Empty: the fitted defaults")

    @field_validator("calibration")
    @classmethod
    def _known_constants(cls, v: dict[str, float]):
        # Checked here, at validation, so that a bad constant is reported before any catalog or solve work.
        from solver.perf.api import Calibration

        try:
            Calibration.from_overrides(v)
        except ValueError as exc:
            raise ValueError(f"{exc}. To fix: use a constant and value as docs/performance-model.md describes") from None
        return v




class Workload(StrictModel):
    name: str = Field(default="workload", description="the workload's name, shown in the plan")
    services: list[Service] = Field(min_length=1, max_length=5000, description="the services to serve, 1 to "
                                    "5000, with unique names")
    constraints: Constraints = Field(default_factory=Constraints, json_schema_extra=show_default({}),
                                     description="budgets, headroom, quotas, offer "
                                     "filters and pricing; default: none beyond on-demand prices")
    catalog: CatalogRef = Field(default_factory=CatalogRef, json_schema_extra=show_default({}),
                                description="where offers and GPU types come from; "
                                "default: the shipped catalog (`solver-cli catalog`)")
    solver: SolverOptions = Field(default_factory=SolverOptions, json_schema_extra=show_default({}),
                                  description="time limit, MIP backend, "
                                  "tie-break, optimality gap and performance-model overrides")
    periods: list[Period] | None = Field(default=None, min_length=1, max_length=MAX_PERIODS,
                                         description="the horizon's periods; services scale demand per period "
                                         "with demand.profile")
    current_fleet: list[CurrentInstances] | None = Field(default=None, description="the fleet running today: "
                                                         "re-plan from it")
    change_costs: ChangeCosts | None = Field(default=None, description="one-off costs of starting and stopping "
                                             "instances against the running fleet, and a cap on how many change: "
                                             "they apply whenever a running fleet is given (current_fleet here, "
                                             "`solve --current`, or a gRPC request's current_fleet), and are "
                                             "unused without one. Unset: changes are free and unlimited")
    # Owned hardware and its sites (solver/workload/owned.py, docs/owned-and-power.md).
    owned: list[OwnedGpus] = Field(default_factory=list, max_length=1000, json_schema_extra=show_default([]),
                                   description="GPUs already owned, per site: planned as offers of provider "
                                   "\"owned\" in region = site, at most `count` GPUs each, priced at their energy "
                                   "while they run (their amortised cost is paid anyway and reported apart)")
    sites: list[Site] = Field(default_factory=list, max_length=1000, json_schema_extra=show_default([]),
                              description="the sites owned GPUs run at: a power cap in kW and an electricity "
                              "price per kWh each")

    @model_validator(mode="after")
    def _owned_sites(self):
        check_owned_and_sites(self.owned, self.sites)
        return self

    @model_validator(mode="after")
    def _one_period_for_pools(self):
        split = [s for s in self.services if s.serving != "aggregated"]
        if split and (self.horizon_mode or self.constraints.same_region):
            what = "constraints.same_region" if self.constraints.same_region and not self.horizon_mode else \
                "periods, pricing tiers or a running fleet"
            raise ValueError(f"service {split[0].name!r} asks for serving: {split[0].serving}, which is planned for "
                             f"one period without {what} for now. To fix: set serving: aggregated, or drop {what}")
        return self

    def redundancy_of(self, svc: Service) -> Redundancy | None:
        """The failure domain `svc` must survive: its own, else the workload's; None for none."""
        r = svc.redundancy if svc.redundancy is not None else self.constraints.redundancy
        return None if r is None or r.domain == "none" else r

    def spot_cover_of(self, svc: Service) -> float:
        """The serve_fraction `svc` must keep after a spot pool is reclaimed (0: none)."""
        r = svc.spot_interruptions if svc.spot_interruptions is not None else self.constraints.spot_interruptions
        return 0.0 if r is None else r.serve_fraction

    @model_validator(mode="after")
    def _spot_cover_supported(self):
        allowed = self.constraints.allowed_tiers
        for i, s in enumerate(self.services):
            if s.spot_interruptions is not None and s.spot_interruptions.serve_fraction > 0 and "spot" not in allowed:
                raise ValueError(f"services[{i}].spot_interruptions: service {s.name!r} asks for cover of reclaimed "
                                 "spot capacity, but spot is not an allowed pricing tier. To fix: add spot to "
                                 "constraints.pricing_tiers, or remove spot_interruptions")
        return self

    @model_validator(mode="after")
    def _redundancy_supported(self):
        for i, s in enumerate(self.services):
            r = self.redundancy_of(s)
            if r is None:
                continue
            where = f"services[{i}].redundancy" if s.redundancy is not None else "constraints.redundancy"
            if s.serving != "aggregated":
                raise ValueError(f"{where}: service {s.name!r} asks for serving: {s.serving}, and disaggregated pools "
                                 "are not planned with failure domains yet. To fix: set serving: aggregated, or "
                                 "drop the redundancy")
            if self.constraints.same_region and r.domain in ("zone", "region", "provider"):
                raise ValueError(f"{where}: surviving the loss of a {r.domain} needs replicas in two "
                                 f"{'providers' if r.domain == 'provider' else 'regions'}, but constraints.same_region "
                                 f"keeps them in one. To fix: drop same_region, or use domain instance")
            if s.max_replicas == 1:
                raise ValueError(f"{where}: service {s.name!r} has max_replicas 1, so no replica can survive the "
                                 "loss of its domain. To fix: raise max_replicas, or set its redundancy domain to none")
        return self

    @field_validator("periods")
    @classmethod
    def _unique_periods(cls, periods: list[Period] | None):
        if periods:
            names = [p.name for p in periods]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"period names must be unique; repeated: {', '.join(dup)}. To fix: rename them")
        return periods

    @property
    def horizon_mode(self) -> bool:
        """Periods, tiers beyond one price list, or a running fleet: the multi-period planner.
        change_costs alone are not: without a running fleet there is nothing to change (they
        wait in the file for `--current` or a request's fleet), so they must not switch planners."""
        return (self.periods is not None or self.current_fleet is not None or self.constraints.uses_tiers
                # spot cover has rows in the multi-period model only (firm and spot replicas apart)
                or any(s.spot_interruptions is not None for s in self.services))

    @field_validator("services")
    @classmethod
    def _unique(cls, services: list[Service]):
        names = [s.name for s in services]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"service names must be unique; repeated: {', '.join(dup)}. To fix: rename them")
        return services

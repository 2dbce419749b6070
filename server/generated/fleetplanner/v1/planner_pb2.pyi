from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_AUTO: _ClassVar[Backend]
    BACKEND_SCIP: _ClassVar[Backend]
    BACKEND_HIGHS: _ClassVar[Backend]
    BACKEND_CP_SAT: _ClassVar[Backend]

class PlanStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLAN_STATUS_UNSPECIFIED: _ClassVar[PlanStatus]
    PLAN_STATUS_OPTIMAL: _ClassVar[PlanStatus]
    PLAN_STATUS_FEASIBLE: _ClassVar[PlanStatus]
    PLAN_STATUS_INFEASIBLE: _ClassVar[PlanStatus]

class Pricing(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRICING_UNSPECIFIED: _ClassVar[Pricing]
    PRICING_ON_DEMAND: _ClassVar[Pricing]
    PRICING_SPOT: _ClassVar[Pricing]
BACKEND_UNSPECIFIED: Backend
BACKEND_AUTO: Backend
BACKEND_SCIP: Backend
BACKEND_HIGHS: Backend
BACKEND_CP_SAT: Backend
PLAN_STATUS_UNSPECIFIED: PlanStatus
PLAN_STATUS_OPTIMAL: PlanStatus
PLAN_STATUS_FEASIBLE: PlanStatus
PLAN_STATUS_INFEASIBLE: PlanStatus
PRICING_UNSPECIFIED: Pricing
PRICING_ON_DEMAND: Pricing
PRICING_SPOT: Pricing

class Workload(_message.Message):
    __slots__ = ("object", "json", "yaml", "catalog_file")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FILE_FIELD_NUMBER: _ClassVar[int]
    object: _struct_pb2.Struct
    json: str
    yaml: str
    catalog_file: CatalogDocument
    def __init__(self, object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., json: _Optional[str] = ..., yaml: _Optional[str] = ..., catalog_file: _Optional[_Union[CatalogDocument, _Mapping]] = ...) -> None: ...

class CatalogDocument(_message.Message):
    __slots__ = ("path", "text")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    path: str
    text: str
    def __init__(self, path: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class SolveRequest(_message.Message):
    __slots__ = ("workload", "time_limit_s", "explain", "backend", "current_fleet")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FLEET_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    time_limit_s: float
    explain: bool
    backend: Backend
    current_fleet: CurrentFleet
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., time_limit_s: _Optional[float] = ..., explain: bool = ..., backend: _Optional[_Union[Backend, str]] = ..., current_fleet: _Optional[_Union[CurrentFleet, _Mapping]] = ...) -> None: ...

class CurrentFleet(_message.Message):
    __slots__ = ("instances",)
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[CurrentInstances]
    def __init__(self, instances: _Optional[_Iterable[_Union[CurrentInstances, _Mapping]]] = ...) -> None: ...

class CurrentInstances(_message.Message):
    __slots__ = ("offer_id", "instances", "spot", "replicas")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    instances: int
    spot: bool
    replicas: _containers.RepeatedCompositeFieldContainer[RunningReplicas]
    def __init__(self, offer_id: _Optional[str] = ..., instances: _Optional[int] = ..., spot: bool = ..., replicas: _Optional[_Iterable[_Union[RunningReplicas, _Mapping]]] = ...) -> None: ...

class RunningReplicas(_message.Message):
    __slots__ = ("service", "count", "gpus_per_replica", "precision")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    service: str
    count: int
    gpus_per_replica: int
    precision: str
    def __init__(self, service: _Optional[str] = ..., count: _Optional[int] = ..., gpus_per_replica: _Optional[int] = ..., precision: _Optional[str] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("plan", "deadline_exceeded")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    plan: Plan
    deadline_exceeded: bool
    def __init__(self, plan: _Optional[_Union[Plan, _Mapping]] = ..., deadline_exceeded: bool = ...) -> None: ...

class SolveEvent(_message.Message):
    __slots__ = ("progress", "plan", "deadline_exceeded")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    plan: Plan
    deadline_exceeded: bool
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., plan: _Optional[_Union[Plan, _Mapping]] = ..., deadline_exceeded: bool = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("elapsed_s", "best_usd_per_hour", "bound_usd_per_hour", "solutions_found", "fleet")
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    BEST_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    BOUND_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    SOLUTIONS_FOUND_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    elapsed_s: float
    best_usd_per_hour: float
    bound_usd_per_hour: float
    solutions_found: int
    fleet: _containers.RepeatedCompositeFieldContainer[FleetCount]
    def __init__(self, elapsed_s: _Optional[float] = ..., best_usd_per_hour: _Optional[float] = ..., bound_usd_per_hour: _Optional[float] = ..., solutions_found: _Optional[int] = ..., fleet: _Optional[_Iterable[_Union[FleetCount, _Mapping]]] = ...) -> None: ...

class FleetCount(_message.Message):
    __slots__ = ("offer_id", "instances")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    instances: int
    def __init__(self, offer_id: _Optional[str] = ..., instances: _Optional[int] = ...) -> None: ...

class ValidateRequest(_message.Message):
    __slots__ = ("workload",)
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ...) -> None: ...

class ValidateResponse(_message.Message):
    __slots__ = ("valid", "violations", "workload", "services")
    VALID_FIELD_NUMBER: _ClassVar[int]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    workload: str
    services: int
    def __init__(self, valid: bool = ..., violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ..., workload: _Optional[str] = ..., services: _Optional[int] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "message", "fix")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIX_FIELD_NUMBER: _ClassVar[int]
    field: str
    message: str
    fix: str
    def __init__(self, field: _Optional[str] = ..., message: _Optional[str] = ..., fix: _Optional[str] = ...) -> None: ...

class EstimateRequest(_message.Message):
    __slots__ = ("model", "gpu", "gpus_per_replica", "precision", "engine", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms", "latency_ms")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    gpus_per_replica: int
    precision: str
    engine: str
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_replica: _Optional[int] = ..., precision: _Optional[str] = ..., engine: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., ttft_ms: _Optional[float] = ..., tpot_ms: _Optional[float] = ..., latency_ms: _Optional[float] = ...) -> None: ...

class EstimateResponse(_message.Message):
    __slots__ = ("estimates",)
    ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    estimates: _containers.RepeatedCompositeFieldContainer[PerfEstimate]
    def __init__(self, estimates: _Optional[_Iterable[_Union[PerfEstimate, _Mapping]]] = ...) -> None: ...

class PerfEstimate(_message.Message):
    __slots__ = ("gpu", "gpus_per_replica", "instances_per_replica", "interconnect", "offer", "price_usd_per_replica_hour", "precision", "feasible", "reason", "reason_kind", "batch", "memory_gib_per_gpu", "weights_gib_per_gpu", "ttft_ms", "tpot_ms", "latency_ms", "requests_per_s", "output_tokens_per_s", "binding_limit", "error_band", "ttft_error_band", "tpot_error_band", "max_batch_vram", "kv_cache_gib_per_gpu", "step_bound", "tensor_parallel", "pipeline_stages")
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    INTERCONNECT_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_REPLICA_HOUR_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_KIND_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GIB_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_GIB_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ERROR_BAND_FIELD_NUMBER: _ClassVar[int]
    TTFT_ERROR_BAND_FIELD_NUMBER: _ClassVar[int]
    TPOT_ERROR_BAND_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_VRAM_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_GIB_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    STEP_BOUND_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_STAGES_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    gpus_per_replica: int
    instances_per_replica: int
    interconnect: str
    offer: str
    price_usd_per_replica_hour: float
    precision: str
    feasible: bool
    reason: str
    reason_kind: str
    batch: int
    memory_gib_per_gpu: float
    weights_gib_per_gpu: float
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    requests_per_s: float
    output_tokens_per_s: float
    binding_limit: str
    error_band: float
    ttft_error_band: float
    tpot_error_band: float
    max_batch_vram: int
    kv_cache_gib_per_gpu: float
    step_bound: str
    tensor_parallel: int
    pipeline_stages: int
    def __init__(self, gpu: _Optional[str] = ..., gpus_per_replica: _Optional[int] = ..., instances_per_replica: _Optional[int] = ..., interconnect: _Optional[str] = ..., offer: _Optional[str] = ..., price_usd_per_replica_hour: _Optional[float] = ..., precision: _Optional[str] = ..., feasible: bool = ..., reason: _Optional[str] = ..., reason_kind: _Optional[str] = ..., batch: _Optional[int] = ..., memory_gib_per_gpu: _Optional[float] = ..., weights_gib_per_gpu: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., tpot_ms: _Optional[float] = ..., latency_ms: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., output_tokens_per_s: _Optional[float] = ..., binding_limit: _Optional[str] = ..., error_band: _Optional[float] = ..., ttft_error_band: _Optional[float] = ..., tpot_error_band: _Optional[float] = ..., max_batch_vram: _Optional[int] = ..., kv_cache_gib_per_gpu: _Optional[float] = ..., step_bound: _Optional[str] = ..., tensor_parallel: _Optional[int] = ..., pipeline_stages: _Optional[int] = ...) -> None: ...

class GetCatalogRequest(_message.Message):
    __slots__ = ("gpu", "provider", "region")
    GPU_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    provider: str
    region: str
    def __init__(self, gpu: _Optional[str] = ..., provider: _Optional[str] = ..., region: _Optional[str] = ...) -> None: ...

class GetCatalogResponse(_message.Message):
    __slots__ = ("description", "gpus", "offers")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    description: str
    gpus: _containers.RepeatedCompositeFieldContainer[GpuType]
    offers: _containers.RepeatedCompositeFieldContainer[Offer]
    def __init__(self, description: _Optional[str] = ..., gpus: _Optional[_Iterable[_Union[GpuType, _Mapping]]] = ..., offers: _Optional[_Iterable[_Union[Offer, _Mapping]]] = ...) -> None: ...

class GpuType(_message.Message):
    __slots__ = ("name", "memory_gib", "memory_bandwidth_gbs", "fp16_tflops", "bf16_tflops", "fp8_tflops", "int8_tops", "nvlink_gbs", "pcie_gen", "form_factor", "vendor", "architecture", "supports_fp8", "consumer", "llm_estimates", "source", "derivation", "as_of", "fp4_tflops", "nvlink_domain_gpus", "supports_int4")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BANDWIDTH_GBS_FIELD_NUMBER: _ClassVar[int]
    FP16_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    BF16_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP8_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    INT8_TOPS_FIELD_NUMBER: _ClassVar[int]
    NVLINK_GBS_FIELD_NUMBER: _ClassVar[int]
    PCIE_GEN_FIELD_NUMBER: _ClassVar[int]
    FORM_FACTOR_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_FP8_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    LLM_ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DERIVATION_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    FP4_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    NVLINK_DOMAIN_GPUS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_INT4_FIELD_NUMBER: _ClassVar[int]
    name: str
    memory_gib: float
    memory_bandwidth_gbs: float
    fp16_tflops: float
    bf16_tflops: float
    fp8_tflops: float
    int8_tops: float
    nvlink_gbs: float
    pcie_gen: int
    form_factor: str
    vendor: str
    architecture: str
    supports_fp8: bool
    consumer: bool
    llm_estimates: bool
    source: str
    derivation: str
    as_of: str
    fp4_tflops: float
    nvlink_domain_gpus: int
    supports_int4: bool
    def __init__(self, name: _Optional[str] = ..., memory_gib: _Optional[float] = ..., memory_bandwidth_gbs: _Optional[float] = ..., fp16_tflops: _Optional[float] = ..., bf16_tflops: _Optional[float] = ..., fp8_tflops: _Optional[float] = ..., int8_tops: _Optional[float] = ..., nvlink_gbs: _Optional[float] = ..., pcie_gen: _Optional[int] = ..., form_factor: _Optional[str] = ..., vendor: _Optional[str] = ..., architecture: _Optional[str] = ..., supports_fp8: bool = ..., consumer: bool = ..., llm_estimates: bool = ..., source: _Optional[str] = ..., derivation: _Optional[str] = ..., as_of: _Optional[str] = ..., fp4_tflops: _Optional[float] = ..., nvlink_domain_gpus: _Optional[int] = ..., supports_int4: bool = ...) -> None: ...

class Offer(_message.Message):
    __slots__ = ("id", "provider", "name", "region", "gpu", "gpus_per_instance", "price_usd_per_hour", "spot_price_usd_per_hour", "gpu_memory_gib", "interconnect", "inter_node_fabric", "inter_node_gbs", "available_instances", "source", "as_of", "notes", "vcpus", "host_memory_gib", "spot_interruption_rate_per_hour", "reserved_1y_price_usd_per_hour", "reserved_3y_price_usd_per_hour", "tier_sources")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    SPOT_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    INTERCONNECT_FIELD_NUMBER: _ClassVar[int]
    INTER_NODE_FABRIC_FIELD_NUMBER: _ClassVar[int]
    INTER_NODE_GBS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    VCPUS_FIELD_NUMBER: _ClassVar[int]
    HOST_MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    SPOT_INTERRUPTION_RATE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    RESERVED_1Y_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    RESERVED_3Y_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    TIER_SOURCES_FIELD_NUMBER: _ClassVar[int]
    id: str
    provider: str
    name: str
    region: str
    gpu: str
    gpus_per_instance: int
    price_usd_per_hour: float
    spot_price_usd_per_hour: float
    gpu_memory_gib: float
    interconnect: str
    inter_node_fabric: str
    inter_node_gbs: float
    available_instances: int
    source: str
    as_of: str
    notes: str
    vcpus: float
    host_memory_gib: float
    spot_interruption_rate_per_hour: float
    reserved_1y_price_usd_per_hour: float
    reserved_3y_price_usd_per_hour: float
    tier_sources: str
    def __init__(self, id: _Optional[str] = ..., provider: _Optional[str] = ..., name: _Optional[str] = ..., region: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_instance: _Optional[int] = ..., price_usd_per_hour: _Optional[float] = ..., spot_price_usd_per_hour: _Optional[float] = ..., gpu_memory_gib: _Optional[float] = ..., interconnect: _Optional[str] = ..., inter_node_fabric: _Optional[str] = ..., inter_node_gbs: _Optional[float] = ..., available_instances: _Optional[int] = ..., source: _Optional[str] = ..., as_of: _Optional[str] = ..., notes: _Optional[str] = ..., vcpus: _Optional[float] = ..., host_memory_gib: _Optional[float] = ..., spot_interruption_rate_per_hour: _Optional[float] = ..., reserved_1y_price_usd_per_hour: _Optional[float] = ..., reserved_3y_price_usd_per_hour: _Optional[float] = ..., tier_sources: _Optional[str] = ...) -> None: ...

class ReviewRequest(_message.Message):
    __slots__ = ("json", "yaml", "time_limit_per_scenario_s")
    JSON_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_PER_SCENARIO_S_FIELD_NUMBER: _ClassVar[int]
    json: str
    yaml: str
    time_limit_per_scenario_s: float
    def __init__(self, json: _Optional[str] = ..., yaml: _Optional[str] = ..., time_limit_per_scenario_s: _Optional[float] = ...) -> None: ...

class ReviewEvent(_message.Message):
    __slots__ = ("scenario", "summary")
    SCENARIO_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    scenario: ScenarioOutcome
    summary: ReviewSummary
    def __init__(self, scenario: _Optional[_Union[ScenarioOutcome, _Mapping]] = ..., summary: _Optional[_Union[ReviewSummary, _Mapping]] = ...) -> None: ...

class ScenarioOutcome(_message.Message):
    __slots__ = ("id", "name", "group", "status", "usd_per_hour", "gpus", "optimality_gap", "solve_time_s", "error", "reasons", "result_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    OPTIMALITY_GAP_FIELD_NUMBER: _ClassVar[int]
    SOLVE_TIME_S_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    group: str
    status: str
    usd_per_hour: float
    gpus: int
    optimality_gap: float
    solve_time_s: float
    error: str
    reasons: _containers.RepeatedCompositeFieldContainer[InfeasibilityReason]
    result_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., group: _Optional[str] = ..., status: _Optional[str] = ..., usd_per_hour: _Optional[float] = ..., gpus: _Optional[int] = ..., optimality_gap: _Optional[float] = ..., solve_time_s: _Optional[float] = ..., error: _Optional[str] = ..., reasons: _Optional[_Iterable[_Union[InfeasibilityReason, _Mapping]]] = ..., result_json: _Optional[str] = ...) -> None: ...

class ReviewSummary(_message.Message):
    __slots__ = ("review", "scenarios", "statuses")
    REVIEW_FIELD_NUMBER: _ClassVar[int]
    SCENARIOS_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    review: str
    scenarios: int
    statuses: _containers.RepeatedCompositeFieldContainer[StatusCount]
    def __init__(self, review: _Optional[str] = ..., scenarios: _Optional[int] = ..., statuses: _Optional[_Iterable[_Union[StatusCount, _Mapping]]] = ...) -> None: ...

class StatusCount(_message.Message):
    __slots__ = ("status", "count")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    status: str
    count: int
    def __init__(self, status: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class Plan(_message.Message):
    __slots__ = ("status", "workload", "total_price_usd_per_hour", "total_price_usd_per_minute", "monthly_usd", "gpus", "optimality_gap", "solve_time_s", "pricing", "catalog", "fleet", "services", "placements", "infeasibility", "evaluation", "solver", "confidence_cost", "serving_choice", "redundancy_cost", "spot_cover_cost", "periods", "reservations", "horizon_hours", "horizon_cost_usd", "average_price_usd_per_hour", "pricing_tiers", "savings", "changes", "rollout", "horizon_solver", "power_kw", "energy_kwh", "owned_amortised_usd_per_hour", "sites")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PRICE_USD_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_USD_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    OPTIMALITY_GAP_FIELD_NUMBER: _ClassVar[int]
    SOLVE_TIME_S_FIELD_NUMBER: _ClassVar[int]
    PRICING_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBILITY_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_COST_FIELD_NUMBER: _ClassVar[int]
    SERVING_CHOICE_FIELD_NUMBER: _ClassVar[int]
    REDUNDANCY_COST_FIELD_NUMBER: _ClassVar[int]
    SPOT_COVER_COST_FIELD_NUMBER: _ClassVar[int]
    PERIODS_FIELD_NUMBER: _ClassVar[int]
    RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_HOURS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_COST_USD_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    PRICING_TIERS_FIELD_NUMBER: _ClassVar[int]
    SAVINGS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    HORIZON_SOLVER_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_FIELD_NUMBER: _ClassVar[int]
    ENERGY_KWH_FIELD_NUMBER: _ClassVar[int]
    OWNED_AMORTISED_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    SITES_FIELD_NUMBER: _ClassVar[int]
    status: PlanStatus
    workload: str
    total_price_usd_per_hour: float
    total_price_usd_per_minute: float
    monthly_usd: float
    gpus: int
    optimality_gap: float
    solve_time_s: float
    pricing: Pricing
    catalog: str
    fleet: _containers.RepeatedCompositeFieldContainer[FleetLine]
    services: _containers.RepeatedCompositeFieldContainer[ServiceResult]
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    infeasibility: _containers.RepeatedCompositeFieldContainer[InfeasibilityReason]
    evaluation: Evaluation
    solver: SolverInfo
    confidence_cost: ConfidenceCost
    serving_choice: ServingChoice
    redundancy_cost: RedundancyCost
    spot_cover_cost: RedundancyCost
    periods: _containers.RepeatedCompositeFieldContainer[PeriodPlan]
    reservations: _containers.RepeatedCompositeFieldContainer[Reservation]
    horizon_hours: float
    horizon_cost_usd: float
    average_price_usd_per_hour: float
    pricing_tiers: _containers.RepeatedScalarFieldContainer[str]
    savings: Savings
    changes: _containers.RepeatedCompositeFieldContainer[FleetChange]
    rollout: Rollout
    horizon_solver: HorizonSolverInfo
    power_kw: float
    energy_kwh: float
    owned_amortised_usd_per_hour: float
    sites: _containers.RepeatedCompositeFieldContainer[SitePower]
    def __init__(self, status: _Optional[_Union[PlanStatus, str]] = ..., workload: _Optional[str] = ..., total_price_usd_per_hour: _Optional[float] = ..., total_price_usd_per_minute: _Optional[float] = ..., monthly_usd: _Optional[float] = ..., gpus: _Optional[int] = ..., optimality_gap: _Optional[float] = ..., solve_time_s: _Optional[float] = ..., pricing: _Optional[_Union[Pricing, str]] = ..., catalog: _Optional[str] = ..., fleet: _Optional[_Iterable[_Union[FleetLine, _Mapping]]] = ..., services: _Optional[_Iterable[_Union[ServiceResult, _Mapping]]] = ..., placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., infeasibility: _Optional[_Iterable[_Union[InfeasibilityReason, _Mapping]]] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., solver: _Optional[_Union[SolverInfo, _Mapping]] = ..., confidence_cost: _Optional[_Union[ConfidenceCost, _Mapping]] = ..., serving_choice: _Optional[_Union[ServingChoice, _Mapping]] = ..., redundancy_cost: _Optional[_Union[RedundancyCost, _Mapping]] = ..., spot_cover_cost: _Optional[_Union[RedundancyCost, _Mapping]] = ..., periods: _Optional[_Iterable[_Union[PeriodPlan, _Mapping]]] = ..., reservations: _Optional[_Iterable[_Union[Reservation, _Mapping]]] = ..., horizon_hours: _Optional[float] = ..., horizon_cost_usd: _Optional[float] = ..., average_price_usd_per_hour: _Optional[float] = ..., pricing_tiers: _Optional[_Iterable[str]] = ..., savings: _Optional[_Union[Savings, _Mapping]] = ..., changes: _Optional[_Iterable[_Union[FleetChange, _Mapping]]] = ..., rollout: _Optional[_Union[Rollout, _Mapping]] = ..., horizon_solver: _Optional[_Union[HorizonSolverInfo, _Mapping]] = ..., power_kw: _Optional[float] = ..., energy_kwh: _Optional[float] = ..., owned_amortised_usd_per_hour: _Optional[float] = ..., sites: _Optional[_Iterable[_Union[SitePower, _Mapping]]] = ...) -> None: ...

class SitePower(_message.Message):
    __slots__ = ("site", "power_kw", "power_cap_kw", "gpus_running", "gpus_owned")
    SITE_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_FIELD_NUMBER: _ClassVar[int]
    POWER_CAP_KW_FIELD_NUMBER: _ClassVar[int]
    GPUS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    GPUS_OWNED_FIELD_NUMBER: _ClassVar[int]
    site: str
    power_kw: float
    power_cap_kw: float
    gpus_running: int
    gpus_owned: int
    def __init__(self, site: _Optional[str] = ..., power_kw: _Optional[float] = ..., power_cap_kw: _Optional[float] = ..., gpus_running: _Optional[int] = ..., gpus_owned: _Optional[int] = ...) -> None: ...

class PeriodPlan(_message.Message):
    __slots__ = ("name", "hours", "fleet", "total_price_usd_per_hour", "gpus", "services", "evaluation", "unused_reservations", "expected_spot_interruptions_per_hour", "power_kw", "energy_kwh")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOURS_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    UNUSED_RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SPOT_INTERRUPTIONS_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_FIELD_NUMBER: _ClassVar[int]
    ENERGY_KWH_FIELD_NUMBER: _ClassVar[int]
    name: str
    hours: float
    fleet: _containers.RepeatedCompositeFieldContainer[TierFleetLine]
    total_price_usd_per_hour: float
    gpus: int
    services: _containers.RepeatedCompositeFieldContainer[PeriodService]
    evaluation: Evaluation
    unused_reservations: _containers.RepeatedCompositeFieldContainer[UnusedReservation]
    expected_spot_interruptions_per_hour: float
    power_kw: float
    energy_kwh: float
    def __init__(self, name: _Optional[str] = ..., hours: _Optional[float] = ..., fleet: _Optional[_Iterable[_Union[TierFleetLine, _Mapping]]] = ..., total_price_usd_per_hour: _Optional[float] = ..., gpus: _Optional[int] = ..., services: _Optional[_Iterable[_Union[PeriodService, _Mapping]]] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., unused_reservations: _Optional[_Iterable[_Union[UnusedReservation, _Mapping]]] = ..., expected_spot_interruptions_per_hour: _Optional[float] = ..., power_kw: _Optional[float] = ..., energy_kwh: _Optional[float] = ...) -> None: ...

class TierFleetLine(_message.Message):
    __slots__ = ("offer_id", "provider", "name", "region", "gpu", "gpus_per_instance", "instances", "tier", "price_usd_per_hour", "subtotal_usd_per_hour")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    SUBTOTAL_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    provider: str
    name: str
    region: str
    gpu: str
    gpus_per_instance: int
    instances: int
    tier: str
    price_usd_per_hour: float
    subtotal_usd_per_hour: float
    def __init__(self, offer_id: _Optional[str] = ..., provider: _Optional[str] = ..., name: _Optional[str] = ..., region: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_instance: _Optional[int] = ..., instances: _Optional[int] = ..., tier: _Optional[str] = ..., price_usd_per_hour: _Optional[float] = ..., subtotal_usd_per_hour: _Optional[float] = ...) -> None: ...

class PeriodService(_message.Message):
    __slots__ = ("name", "unit", "demand", "demand_with_headroom", "capacity", "firm_capacity", "replicas", "assignments", "spot_interruptions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    DEMAND_WITH_HEADROOM_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    FIRM_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    SPOT_INTERRUPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    unit: str
    demand: float
    demand_with_headroom: float
    capacity: _containers.RepeatedScalarFieldContainer[float]
    firm_capacity: _containers.RepeatedScalarFieldContainer[float]
    replicas: int
    assignments: _containers.RepeatedCompositeFieldContainer[PeriodAssignment]
    spot_interruptions: Redundancy
    def __init__(self, name: _Optional[str] = ..., unit: _Optional[str] = ..., demand: _Optional[float] = ..., demand_with_headroom: _Optional[float] = ..., capacity: _Optional[_Iterable[float]] = ..., firm_capacity: _Optional[_Iterable[float]] = ..., replicas: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[PeriodAssignment, _Mapping]]] = ..., spot_interruptions: _Optional[_Union[Redundancy, _Mapping]] = ...) -> None: ...

class PeriodAssignment(_message.Message):
    __slots__ = ("config", "offer_id", "spot", "replicas")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    config: str
    offer_id: str
    spot: bool
    replicas: int
    def __init__(self, config: _Optional[str] = ..., offer_id: _Optional[str] = ..., spot: bool = ..., replicas: _Optional[int] = ...) -> None: ...

class UnusedReservation(_message.Message):
    __slots__ = ("offer_id", "instances")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    instances: int
    def __init__(self, offer_id: _Optional[str] = ..., instances: _Optional[int] = ...) -> None: ...

class Reservation(_message.Message):
    __slots__ = ("offer_id", "instances", "term", "price_usd_per_hour", "gpus")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    instances: int
    term: str
    price_usd_per_hour: float
    gpus: int
    def __init__(self, offer_id: _Optional[str] = ..., instances: _Optional[int] = ..., term: _Optional[str] = ..., price_usd_per_hour: _Optional[float] = ..., gpus: _Optional[int] = ...) -> None: ...

class Savings(_message.Message):
    __slots__ = ("baseline", "baseline_usd_per_hour", "baseline_usd", "baseline_status", "savings_usd", "savings_fraction")
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    BASELINE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    BASELINE_USD_FIELD_NUMBER: _ClassVar[int]
    BASELINE_STATUS_FIELD_NUMBER: _ClassVar[int]
    SAVINGS_USD_FIELD_NUMBER: _ClassVar[int]
    SAVINGS_FRACTION_FIELD_NUMBER: _ClassVar[int]
    baseline: str
    baseline_usd_per_hour: float
    baseline_usd: float
    baseline_status: str
    savings_usd: float
    savings_fraction: float
    def __init__(self, baseline: _Optional[str] = ..., baseline_usd_per_hour: _Optional[float] = ..., baseline_usd: _Optional[float] = ..., baseline_status: _Optional[str] = ..., savings_usd: _Optional[float] = ..., savings_fraction: _Optional[float] = ...) -> None: ...

class FleetChange(_message.Message):
    __slots__ = ("offer_id", "action", "instances", "spot")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    action: str
    instances: int
    spot: bool
    def __init__(self, offer_id: _Optional[str] = ..., action: _Optional[str] = ..., instances: _Optional[int] = ..., spot: bool = ...) -> None: ...

class Rollout(_message.Message):
    __slots__ = ("steps", "surge_instances", "note")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SURGE_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[RolloutStep]
    surge_instances: int
    note: str
    def __init__(self, steps: _Optional[_Iterable[_Union[RolloutStep, _Mapping]]] = ..., surge_instances: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class RolloutStep(_message.Message):
    __slots__ = ("step", "action", "offer_id", "spot", "instance", "service", "config", "gpus", "temporary")
    STEP_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    TEMPORARY_FIELD_NUMBER: _ClassVar[int]
    step: int
    action: str
    offer_id: str
    spot: bool
    instance: str
    service: str
    config: str
    gpus: int
    temporary: bool
    def __init__(self, step: _Optional[int] = ..., action: _Optional[str] = ..., offer_id: _Optional[str] = ..., spot: bool = ..., instance: _Optional[str] = ..., service: _Optional[str] = ..., config: _Optional[str] = ..., gpus: _Optional[int] = ..., temporary: bool = ...) -> None: ...

class HorizonSolverInfo(_message.Message):
    __slots__ = ("status", "horizon_cost_usd", "bound_usd", "gap", "method", "distinct_periods", "nodes", "period_solves", "change_cost_usd", "detail")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_COST_USD_FIELD_NUMBER: _ClassVar[int]
    BOUND_USD_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_PERIODS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PERIOD_SOLVES_FIELD_NUMBER: _ClassVar[int]
    CHANGE_COST_USD_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    status: str
    horizon_cost_usd: float
    bound_usd: float
    gap: float
    method: str
    distinct_periods: int
    nodes: int
    period_solves: int
    change_cost_usd: float
    detail: str
    def __init__(self, status: _Optional[str] = ..., horizon_cost_usd: _Optional[float] = ..., bound_usd: _Optional[float] = ..., gap: _Optional[float] = ..., method: _Optional[str] = ..., distinct_periods: _Optional[int] = ..., nodes: _Optional[int] = ..., period_solves: _Optional[int] = ..., change_cost_usd: _Optional[float] = ..., detail: _Optional[str] = ...) -> None: ...

class FleetLine(_message.Message):
    __slots__ = ("offer_id", "provider", "name", "region", "gpu", "gpus_per_instance", "instances", "price_usd_per_hour", "subtotal_usd_per_hour", "vcpus", "host_memory_gib", "power_kw", "power_kw_per_instance")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    SUBTOTAL_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    VCPUS_FIELD_NUMBER: _ClassVar[int]
    HOST_MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    provider: str
    name: str
    region: str
    gpu: str
    gpus_per_instance: int
    instances: int
    price_usd_per_hour: float
    subtotal_usd_per_hour: float
    vcpus: float
    host_memory_gib: float
    power_kw: float
    power_kw_per_instance: float
    def __init__(self, offer_id: _Optional[str] = ..., provider: _Optional[str] = ..., name: _Optional[str] = ..., region: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_instance: _Optional[int] = ..., instances: _Optional[int] = ..., price_usd_per_hour: _Optional[float] = ..., subtotal_usd_per_hour: _Optional[float] = ..., vcpus: _Optional[float] = ..., host_memory_gib: _Optional[float] = ..., power_kw: _Optional[float] = ..., power_kw_per_instance: _Optional[float] = ...) -> None: ...

class ServiceResult(_message.Message):
    __slots__ = ("name", "unit", "demand", "demand_with_headroom", "capacity", "utilization", "classes", "assignments", "alternatives", "model", "engine", "warnings", "confidence", "capacity_margin", "role", "serves", "link", "simulated", "headroom_utilization", "redundancy", "spot_interruptions", "power_kw", "energy_kwh_per_million_tokens")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    DEMAND_WITH_HEADROOM_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_MARGIN_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SERVES_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    REDUNDANCY_FIELD_NUMBER: _ClassVar[int]
    SPOT_INTERRUPTIONS_FIELD_NUMBER: _ClassVar[int]
    POWER_KW_FIELD_NUMBER: _ClassVar[int]
    ENERGY_KWH_PER_MILLION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    name: str
    unit: str
    demand: float
    demand_with_headroom: float
    capacity: float
    utilization: float
    classes: _containers.RepeatedScalarFieldContainer[str]
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    alternatives: _containers.RepeatedCompositeFieldContainer[Alternative]
    model: str
    engine: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    confidence: ServiceConfidence
    capacity_margin: float
    role: str
    serves: str
    link: str
    simulated: PoolSimulation
    headroom_utilization: float
    redundancy: Redundancy
    spot_interruptions: Redundancy
    power_kw: float
    energy_kwh_per_million_tokens: float
    def __init__(self, name: _Optional[str] = ..., unit: _Optional[str] = ..., demand: _Optional[float] = ..., demand_with_headroom: _Optional[float] = ..., capacity: _Optional[float] = ..., utilization: _Optional[float] = ..., classes: _Optional[_Iterable[str]] = ..., assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ..., alternatives: _Optional[_Iterable[_Union[Alternative, _Mapping]]] = ..., model: _Optional[str] = ..., engine: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., confidence: _Optional[_Union[ServiceConfidence, _Mapping]] = ..., capacity_margin: _Optional[float] = ..., role: _Optional[str] = ..., serves: _Optional[str] = ..., link: _Optional[str] = ..., simulated: _Optional[_Union[PoolSimulation, _Mapping]] = ..., headroom_utilization: _Optional[float] = ..., redundancy: _Optional[_Union[Redundancy, _Mapping]] = ..., spot_interruptions: _Optional[_Union[Redundancy, _Mapping]] = ..., power_kw: _Optional[float] = ..., energy_kwh_per_million_tokens: _Optional[float] = ...) -> None: ...

class ServingChoice(_message.Message):
    __slots__ = ("aggregated_only_usd_per_hour", "disaggregated_only_usd_per_hour", "note")
    AGGREGATED_ONLY_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    DISAGGREGATED_ONLY_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    aggregated_only_usd_per_hour: float
    disaggregated_only_usd_per_hour: float
    note: str
    def __init__(self, aggregated_only_usd_per_hour: _Optional[float] = ..., disaggregated_only_usd_per_hour: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class Redundancy(_message.Message):
    __slots__ = ("domain", "serve_fraction", "worst_domain", "surviving_fraction", "exact")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    SERVE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    WORST_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    SURVIVING_FRACTION_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    domain: str
    serve_fraction: float
    worst_domain: str
    surviving_fraction: float
    exact: bool
    def __init__(self, domain: _Optional[str] = ..., serve_fraction: _Optional[float] = ..., worst_domain: _Optional[str] = ..., surviving_fraction: _Optional[float] = ..., exact: bool = ...) -> None: ...

class RedundancyCost(_message.Message):
    __slots__ = ("without_usd_per_hour", "extra_usd_per_hour", "note")
    WITHOUT_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    EXTRA_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    without_usd_per_hour: float
    extra_usd_per_hour: float
    note: str
    def __init__(self, without_usd_per_hour: _Optional[float] = ..., extra_usd_per_hour: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class PoolSimulation(_message.Message):
    __slots__ = ("rate_rps", "verdict", "requests", "percentile", "ttft_ms", "tpot_ms", "kv_transfer_ms")
    RATE_RPS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PERCENTILE_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_MS_FIELD_NUMBER: _ClassVar[int]
    rate_rps: float
    verdict: str
    requests: int
    percentile: int
    ttft_ms: float
    tpot_ms: float
    kv_transfer_ms: float
    def __init__(self, rate_rps: _Optional[float] = ..., verdict: _Optional[str] = ..., requests: _Optional[int] = ..., percentile: _Optional[int] = ..., ttft_ms: _Optional[float] = ..., tpot_ms: _Optional[float] = ..., kv_transfer_ms: _Optional[float] = ...) -> None: ...

class ServiceConfidence(_message.Message):
    __slots__ = ("level", "slowdown", "rate_margin")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SLOWDOWN_FIELD_NUMBER: _ClassVar[int]
    RATE_MARGIN_FIELD_NUMBER: _ClassVar[int]
    level: str
    slowdown: float
    rate_margin: float
    def __init__(self, level: _Optional[str] = ..., slowdown: _Optional[float] = ..., rate_margin: _Optional[float] = ...) -> None: ...

class ConfidenceCost(_message.Message):
    __slots__ = ("nominal_price_usd_per_hour", "margin_usd_per_hour", "note")
    NOMINAL_PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    MARGIN_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    nominal_price_usd_per_hour: float
    margin_usd_per_hour: float
    note: str
    def __init__(self, nominal_price_usd_per_hour: _Optional[float] = ..., margin_usd_per_hour: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("config", "offer_id", "gpu", "gpus_per_replica", "instances_per_replica", "precision", "source", "replicas", "throughput_per_replica", "routed", "utilization", "ttft_ms", "tpot_ms", "latency_ms", "batch", "memory_gib_per_gpu", "binding_limit", "error_band", "slo_checks", "at_load", "cap_per_replica", "cap_per_replica_nominal", "verified", "headroom_utilization", "engine_options")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    ROUTED_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GIB_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ERROR_BAND_FIELD_NUMBER: _ClassVar[int]
    SLO_CHECKS_FIELD_NUMBER: _ClassVar[int]
    AT_LOAD_FIELD_NUMBER: _ClassVar[int]
    CAP_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    CAP_PER_REPLICA_NOMINAL_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    ENGINE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    config: str
    offer_id: str
    gpu: str
    gpus_per_replica: int
    instances_per_replica: int
    precision: str
    source: str
    replicas: int
    throughput_per_replica: _containers.RepeatedScalarFieldContainer[float]
    routed: _containers.RepeatedScalarFieldContainer[float]
    utilization: float
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    batch: int
    memory_gib_per_gpu: float
    binding_limit: str
    error_band: float
    slo_checks: _containers.RepeatedCompositeFieldContainer[SloCheck]
    at_load: AtLoad
    cap_per_replica: float
    cap_per_replica_nominal: float
    verified: Verified
    headroom_utilization: float
    engine_options: EngineSettings
    def __init__(self, config: _Optional[str] = ..., offer_id: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_replica: _Optional[int] = ..., instances_per_replica: _Optional[int] = ..., precision: _Optional[str] = ..., source: _Optional[str] = ..., replicas: _Optional[int] = ..., throughput_per_replica: _Optional[_Iterable[float]] = ..., routed: _Optional[_Iterable[float]] = ..., utilization: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., tpot_ms: _Optional[float] = ..., latency_ms: _Optional[float] = ..., batch: _Optional[int] = ..., memory_gib_per_gpu: _Optional[float] = ..., binding_limit: _Optional[str] = ..., error_band: _Optional[float] = ..., slo_checks: _Optional[_Iterable[_Union[SloCheck, _Mapping]]] = ..., at_load: _Optional[_Union[AtLoad, _Mapping]] = ..., cap_per_replica: _Optional[float] = ..., cap_per_replica_nominal: _Optional[float] = ..., verified: _Optional[_Union[Verified, _Mapping]] = ..., headroom_utilization: _Optional[float] = ..., engine_options: _Optional[_Union[EngineSettings, _Mapping]] = ...) -> None: ...

class EngineSettings(_message.Message):
    __slots__ = ("max_batch", "kv_cache_memory_fraction", "kv_cache_dtype", "max_num_batched_tokens", "scheduler", "kv_admission", "multi_step")
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_MEMORY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_DTYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    KV_ADMISSION_FIELD_NUMBER: _ClassVar[int]
    MULTI_STEP_FIELD_NUMBER: _ClassVar[int]
    max_batch: int
    kv_cache_memory_fraction: float
    kv_cache_dtype: str
    max_num_batched_tokens: int
    scheduler: str
    kv_admission: str
    multi_step: int
    def __init__(self, max_batch: _Optional[int] = ..., kv_cache_memory_fraction: _Optional[float] = ..., kv_cache_dtype: _Optional[str] = ..., max_num_batched_tokens: _Optional[int] = ..., scheduler: _Optional[str] = ..., kv_admission: _Optional[str] = ..., multi_step: _Optional[int] = ...) -> None: ...

class Verified(_message.Message):
    __slots__ = ("verdict", "rate_per_s", "requests", "seeds", "percentile", "ttft_ms_p", "tpot_ms_p", "latency_ms_p", "ci", "reason")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    PERCENTILE_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_P_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_P_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_P_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    rate_per_s: float
    requests: int
    seeds: int
    percentile: int
    ttft_ms_p: float
    tpot_ms_p: float
    latency_ms_p: float
    ci: LoadBand
    reason: str
    def __init__(self, verdict: _Optional[str] = ..., rate_per_s: _Optional[float] = ..., requests: _Optional[int] = ..., seeds: _Optional[int] = ..., percentile: _Optional[int] = ..., ttft_ms_p: _Optional[float] = ..., tpot_ms_p: _Optional[float] = ..., latency_ms_p: _Optional[float] = ..., ci: _Optional[_Union[LoadBand, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class AtLoad(_message.Message):
    __slots__ = ("percentile", "utilization", "ttft_ms", "tpot_ms", "latency_ms", "meets_slo", "meets_slo_robust", "confidence", "slowdown", "band")
    PERCENTILE_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MEETS_SLO_FIELD_NUMBER: _ClassVar[int]
    MEETS_SLO_ROBUST_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    SLOWDOWN_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    percentile: int
    utilization: float
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    meets_slo: bool
    meets_slo_robust: bool
    confidence: float
    slowdown: float
    band: LoadBand
    def __init__(self, percentile: _Optional[int] = ..., utilization: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., tpot_ms: _Optional[float] = ..., latency_ms: _Optional[float] = ..., meets_slo: bool = ..., meets_slo_robust: bool = ..., confidence: _Optional[float] = ..., slowdown: _Optional[float] = ..., band: _Optional[_Union[LoadBand, _Mapping]] = ...) -> None: ...

class LoadBand(_message.Message):
    __slots__ = ("ttft_ms", "tpot_ms", "latency_ms")
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_ms: LoadRange
    tpot_ms: LoadRange
    latency_ms: LoadRange
    def __init__(self, ttft_ms: _Optional[_Union[LoadRange, _Mapping]] = ..., tpot_ms: _Optional[_Union[LoadRange, _Mapping]] = ..., latency_ms: _Optional[_Union[LoadRange, _Mapping]] = ...) -> None: ...

class LoadRange(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ...) -> None: ...

class SloCheck(_message.Message):
    __slots__ = ("name", "predicted_ms", "slo_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_MS_FIELD_NUMBER: _ClassVar[int]
    SLO_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    predicted_ms: float
    slo_ms: float
    def __init__(self, name: _Optional[str] = ..., predicted_ms: _Optional[float] = ..., slo_ms: _Optional[float] = ...) -> None: ...

class Alternative(_message.Message):
    __slots__ = ("config", "gpu", "gpus_per_replica", "precision", "verdict", "reason", "delta_usd_per_hour", "exact", "offer_id", "gpus_per_instance", "basis")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DELTA_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    BASIS_FIELD_NUMBER: _ClassVar[int]
    config: str
    gpu: str
    gpus_per_replica: int
    precision: str
    verdict: str
    reason: str
    delta_usd_per_hour: float
    exact: bool
    offer_id: str
    gpus_per_instance: int
    basis: str
    def __init__(self, config: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus_per_replica: _Optional[int] = ..., precision: _Optional[str] = ..., verdict: _Optional[str] = ..., reason: _Optional[str] = ..., delta_usd_per_hour: _Optional[float] = ..., exact: bool = ..., offer_id: _Optional[str] = ..., gpus_per_instance: _Optional[int] = ..., basis: _Optional[str] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("offer_id", "instance", "replicas", "spot")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SPOT_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    instance: int
    replicas: _containers.RepeatedCompositeFieldContainer[PlacedReplicas]
    spot: bool
    def __init__(self, offer_id: _Optional[str] = ..., instance: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[PlacedReplicas, _Mapping]]] = ..., spot: bool = ...) -> None: ...

class PlacedReplicas(_message.Message):
    __slots__ = ("config", "count")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    config: str
    count: int
    def __init__(self, config: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class InfeasibilityReason(_message.Message):
    __slots__ = ("constraint", "message", "fix", "service")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIX_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    message: str
    fix: str
    service: str
    def __init__(self, constraint: _Optional[str] = ..., message: _Optional[str] = ..., fix: _Optional[str] = ..., service: _Optional[str] = ...) -> None: ...

class Evaluation(_message.Message):
    __slots__ = ("ok", "violations", "cost_usd_per_hour")
    OK_FIELD_NUMBER: _ClassVar[int]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    violations: _containers.RepeatedScalarFieldContainer[str]
    cost_usd_per_hour: float
    def __init__(self, ok: bool = ..., violations: _Optional[_Iterable[str]] = ..., cost_usd_per_hour: _Optional[float] = ...) -> None: ...

class SolverInfo(_message.Message):
    __slots__ = ("backend", "solve_time_s", "total_time_s", "gap", "bound_usd_per_hour", "model_size", "candidates", "rejected", "pruned_offers", "tie_break", "detail", "timings")
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    SOLVE_TIME_S_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TIME_S_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    BOUND_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    MODEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    PRUNED_OFFERS_FIELD_NUMBER: _ClassVar[int]
    TIE_BREAK_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    backend: str
    solve_time_s: float
    total_time_s: float
    gap: float
    bound_usd_per_hour: float
    model_size: ModelSize
    candidates: int
    rejected: int
    pruned_offers: int
    tie_break: str
    detail: str
    timings: _containers.RepeatedCompositeFieldContainer[PhaseTime]
    def __init__(self, backend: _Optional[str] = ..., solve_time_s: _Optional[float] = ..., total_time_s: _Optional[float] = ..., gap: _Optional[float] = ..., bound_usd_per_hour: _Optional[float] = ..., model_size: _Optional[_Union[ModelSize, _Mapping]] = ..., candidates: _Optional[int] = ..., rejected: _Optional[int] = ..., pruned_offers: _Optional[int] = ..., tie_break: _Optional[str] = ..., detail: _Optional[str] = ..., timings: _Optional[_Iterable[_Union[PhaseTime, _Mapping]]] = ...) -> None: ...

class PhaseTime(_message.Message):
    __slots__ = ("phase", "seconds")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    phase: str
    seconds: float
    def __init__(self, phase: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class ModelSize(_message.Message):
    __slots__ = ("variables", "integer_variables", "constraints", "nonzeros")
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    INTEGER_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    NONZEROS_FIELD_NUMBER: _ClassVar[int]
    variables: int
    integer_variables: int
    constraints: int
    nonzeros: int
    def __init__(self, variables: _Optional[int] = ..., integer_variables: _Optional[int] = ..., constraints: _Optional[int] = ..., nonzeros: _Optional[int] = ...) -> None: ...

class Infeasibility(_message.Message):
    __slots__ = ("reasons",)
    REASONS_FIELD_NUMBER: _ClassVar[int]
    reasons: _containers.RepeatedCompositeFieldContainer[InfeasibilityReason]
    def __init__(self, reasons: _Optional[_Iterable[_Union[InfeasibilityReason, _Mapping]]] = ...) -> None: ...

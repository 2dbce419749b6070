"""The review file: a base workload, named scenarios, sweeps and sensitivity options.

A review file is YAML or JSON. Each scenario is a list of changes applied to the base;
each change is a one-key mapping naming its kind, e.g. `{demand: {factor: 2}}` or
`{price: {gpu: H100-SXM, factor: 0.7}}`. A sweep varies one field of one change kind
over a list or a range of values; each value becomes a scenario of its own.
`solver-cli schema --review` prints `ReviewFile.model_json_schema()`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from solver.catalog.schema import GpuSpec, OfferSpec
from solver.documents.strict import StrictModel, show_default
from solver.workload.schema import MAX_MS

SloField = Literal["ttft_ms", "tpot_ms", "latency_ms"]
MAX_SWEEP_POINTS = 10_000


# ---------------------------------------------------------------- one change each
class DemandChange(StrictModel):
    """Scale demand: one service's, or every service's when `service` is omitted."""

    service: str | None = Field(default=None, description="the service whose demand is scaled (a name in the "
                                "base workload); omitted: every service")
    factor: float = Field(ge=0, le=1e6, description="multiplier on the demand (every class and period): 2 doubles "
                          "it, 0 removes it")


class PriceChange(StrictModel):
    """Scale the price of the offers matching every given selector (none given: all offers)."""

    provider: str | None = Field(default=None, description="only offers of this provider (e.g. aws)")
    gpu: str | None = Field(default=None, description="only offers of this GPU type (e.g. H100-SXM)")
    offer: str | None = Field(default=None, description="only this offer (its id, provider/name)")
    factor: float = Field(gt=0, le=1e6, description="multiplier on the matching offers' prices (every tier): "
                          "0.7 is 30 % off")


class GpuQuotaChange(StrictModel):
    """Set a GPU type's quota in GPUs; null removes the quota."""

    gpu: str = Field(min_length=1, description="GPU type the quota counts (e.g. H100-SXM)")
    gpus: int | None = Field(ge=0, le=10_000_000, description="the most GPUs of that type the fleet may use; "
                             "null removes the quota")


class OfferQuotaChange(StrictModel):
    """Set an offer's quota in instances; null removes the quota."""

    offer: str = Field(min_length=1, description="offer id (provider/name)")
    instances: int | None = Field(ge=0, le=10_000_000, description="the most instances of the offer the fleet may "
                                  "use; null removes the quota")


class AvailabilityChange(StrictModel):
    """Set how many instances of an offer the market has (catalog availability); null = unlimited."""

    offer: str = Field(min_length=1, description="offer id (provider/name)")
    instances: int | None = Field(ge=0, le=10_000_000, description="instances the market has (the catalog's "
                                  "availability); null: unlimited")


class SloChange(StrictModel):
    """Set (a number) or remove (null) SLO bounds of one service."""

    service: str = Field(min_length=1, description="the service whose SLO changes (a name in the base workload)")
    ttft_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="new time-to-first-token bound, ms; "
                                  "null removes it; omitted: unchanged")
    tpot_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="new time-per-output-token bound, ms; "
                                  "null removes it; omitted: unchanged")
    latency_ms: float | None = Field(default=None, gt=0, le=MAX_MS, description="new end-to-end latency bound, ms; "
                                     "null removes it; omitted: unchanged")

    @model_validator(mode="after")
    def _something(self):
        if not self.model_fields_set - {"service"}:
            raise ValueError("an slo change sets at least one of ttft_ms, tpot_ms, latency_ms. "
                             "To fix: add e.g. `tpot_ms: 40` (or `tpot_ms: null` to remove the bound)")
        return self


class BudgetChange(StrictModel):
    """Set the budget in $/hour; null removes it."""

    usd_per_hour: float | None = Field(gt=0, le=1e7, description="the most the fleet may cost, $/hour; null "
                                       "removes the budget")


class ReservationChange(StrictModel):
    """Reserve exactly this many GPUs (all reserved offers together); null lifts the bound.
    A sweep over `gpus` answers "how much should we reserve?" (the workload must allow a
    reserved tier and have offers with reserved prices)."""

    gpus: int | None = Field(ge=0, le=10_000_000, description="reserved GPUs, all reserved offers together "
                             "(sets reserved_gpus_min and _max); null lifts both")


class SpotShareChange(StrictModel):
    """Set constraints.max_spot_share (null: no limit); the workload must allow spot."""

    share: float | None = Field(ge=0, le=1, description="the most of the fleet's GPUs that may be spot, 0 to 1; "
                                "null: no limit")


class HeadroomChange(StrictModel):
    """Set the headroom: serve demand x (1 + fraction)."""

    fraction: float = Field(ge=0, le=10, description="spare capacity above demand: 0.2 serves 1.2 x the demand")


class ConstraintChange(StrictModel):
    """Widen or narrow the offer filters of the workload's constraints (null removes a filter;
    a field left out stays as the base has it)."""

    providers: list[str] | None = Field(default=None, min_length=1, description="only offers of these providers "
                                        "(replaces constraints.providers); null: every provider")
    regions: list[str] | None = Field(default=None, min_length=1, description="only offers in these regions "
                                      "(replaces constraints.regions); null: every region")
    gpu_types: list[str] | None = Field(default=None, min_length=1, description="only these GPU types (replaces "
                                        "constraints.gpu_types); null: every type")
    exclude_gpu_types: list[str] | None = Field(default=None, description="GPU types never used (replaces "
                                                "constraints.exclude_gpu_types); null: none excluded")
    allow_consumer_gpus: bool | None = Field(default=None, description="whether consumer GPUs (RTX 4090 and the "
                                             "like) may be planned; null: the default, false")
    pricing: Literal["on_demand", "spot"] | None = Field(default=None, description="price list the plan pays: "
                                                         "on_demand or spot; null: the default, on_demand")


class ServingChange(StrictModel):
    """Set how one service (or every service) is served: aggregated, disaggregated or auto
    (docs/disaggregation.md). Scenarios side by side compare the choice."""

    service: str | None = Field(default=None, description="the service (a name in the base workload); omitted: "
                                "every LLM service")
    serving: Literal["auto", "aggregated", "disaggregated"] = Field(description="aggregated, disaggregated, or "
                                                                     "auto: the optimizer picks")


class RedundancyChange(StrictModel):
    """Set the failure domain every service (or one service) must survive losing
    (constraints.redundancy; docs/redundancy.md). A sweep varies serve_fraction."""

    service: str | None = Field(default=None, description="the service (a name in the base workload); omitted: "
                                "the workload's constraints.redundancy")
    domain: Literal["none", "instance", "zone", "region", "provider"] = Field(description="the failure domain; "
                                                                               "none: no redundancy")
    serve_fraction: float = Field(default=1.0, gt=0, le=1, description="the share of demand served after the "
                                  "loss")


class SpotInterruptionsChange(StrictModel):
    """Set the share of demand every service (or one service) must keep after a spot pool is
    reclaimed (constraints.spot_interruptions; docs/redundancy.md). A sweep varies
    serve_fraction. The base must allow spot (pricing_tiers)."""

    service: str | None = Field(default=None, description="the service (a name in the base workload); omitted: "
                                "the workload's constraints.spot_interruptions")
    serve_fraction: float = Field(default=1.0, ge=0, le=1, description="the share of demand served after the "
                                  "spot instances of any one offer are reclaimed; 0: no cover")


class SitePowerChange(StrictModel):
    """Set an owned site's power cap (docs/owned-and-power.md). A sweep varies power_cap_kw."""

    site: str = Field(min_length=1, description="the site (a name in the base workload's sites)")
    power_cap_kw: float | None = Field(gt=0, le=1e7, description="the most the site's owned servers may draw, kW; "
                                       "null: no cap")


class Change(StrictModel):
    """Exactly one kind of change."""

    demand: DemandChange | None = Field(default=None, description="scale demand (one service or all)")
    price: PriceChange | None = Field(default=None, description="scale the prices of matching offers")
    gpu_quota: GpuQuotaChange | None = Field(default=None, description="set or remove a GPU type's quota")
    offer_quota: OfferQuotaChange | None = Field(default=None, description="set or remove an offer's quota")
    availability: AvailabilityChange | None = Field(default=None, description="set how many instances of an "
                                                    "offer the market has")
    slo: SloChange | None = Field(default=None, description="set or remove a service's SLO bounds")
    budget: BudgetChange | None = Field(default=None, description="set or remove the budget")
    headroom: HeadroomChange | None = Field(default=None, description="set the spare capacity above demand")
    reservation: ReservationChange | None = Field(default=None, description="reserve exactly this many GPUs")
    spot_share: SpotShareChange | None = Field(default=None, description="set the most of the fleet that may be "
                                               "spot")
    constraints: ConstraintChange | None = Field(default=None, description="widen or narrow the offer filters")
    serving: ServingChange | None = Field(default=None, description="serve a service aggregated, disaggregated or "
                                          "as the optimizer picks")
    redundancy: RedundancyChange | None = Field(default=None, description="set the failure domain to survive "
                                                "(N+1 by instance, zone, region or provider)")
    spot_interruptions: SpotInterruptionsChange | None = Field(default=None, description="set the cover for "
                                                               "reclaimed spot capacity")
    site_power: SitePowerChange | None = Field(default=None, description="set an owned site's power cap")
    add_gpus: list[GpuSpec] | None = Field(default=None, min_length=1, description="new GPU types for the catalog")
    add_offers: list[OfferSpec] | None = Field(default=None, min_length=1, description="new offers for the catalog")
    remove_gpus: list[str] | None = Field(default=None, min_length=1, description="remove every offer of these GPU types")
    remove_offers: list[str] | None = Field(default=None, min_length=1, description="offer ids to remove")

    @model_validator(mode="after")
    def _exactly_one(self):
        if len(self.model_fields_set) != 1:
            kinds = ", ".join(CHANGE_KINDS)
            raise ValueError(f"each change has exactly one kind, got {len(self.model_fields_set)} "
                             f"({', '.join(sorted(self.model_fields_set)) or 'none'}). To fix: write one of "
                             f"{kinds} per list entry")
        if self.body is None:
            raise ValueError(f"the {self.kind} change is empty. To fix: give its fields, e.g. "
                             "`budget: {usd_per_hour: null}` to remove the budget")
        return self

    @property
    def kind(self) -> str:
        return next(iter(self.model_fields_set))

    @property
    def body(self) -> Any:
        return getattr(self, self.kind)


CHANGE_KINDS = tuple(Change.model_fields)
# The field a sweep varies when it does not name one.
SWEEP_DEFAULT_PARAMETER = {"demand": "factor", "price": "factor", "gpu_quota": "gpus", "offer_quota": "instances",
                           "availability": "instances", "budget": "usd_per_hour", "headroom": "fraction",
                           "reservation": "gpus", "spot_share": "share", "redundancy": "serve_fraction",
                           "spot_interruptions": "serve_fraction", "site_power": "power_cap_kw"}


# ---------------------------------------------------------------- scenarios and sweeps
class ScenarioSpec(StrictModel):
    """A named what-if: the base workload with these changes, applied in order."""

    name: str = Field(min_length=1, max_length=100, description="the scenario's name in the report, unique among "
                      "the scenarios and sweep points")
    description: str = Field(default="", description="free text shown with the scenario in the report")
    changes: list[Change] = Field(default_factory=list, json_schema_extra=show_default([]),
                                  description="changes applied to the base, in order, each a one-key mapping "
                                  "naming its kind (e.g. {demand: {factor: 2}}); none: the base itself")


class Range(StrictModel):
    """Inclusive range: from, from + step, ... up to `to` (within rounding)."""

    from_: float = Field(alias="from", description="the first value")
    to: float = Field(description="the last value (included when a whole number of steps from `from`)")
    step: float = Field(gt=0, description="the distance between values")

    def values(self) -> list[float]:
        if self.to < self.from_:
            raise ValueError(f"range goes from {self.from_:g} down to {self.to:g}. To fix: make `to` at least `from`")
        count = (self.to - self.from_) / self.step  # inf for a span or step beyond double range
        if not count < MAX_SWEEP_POINTS:
            raise ValueError(f"range from {self.from_:g} to {self.to:g} in steps of {self.step:g} has more than "
                             f"{MAX_SWEEP_POINTS} points. To fix: use a larger step")
        n = math.floor(count + 1e-9) + 1
        if n > MAX_SWEEP_POINTS:
            raise ValueError(f"range has {n} points (more than {MAX_SWEEP_POINTS}). To fix: use a larger step")
        return [round(self.from_ + i * self.step, 10) for i in range(n)]


class SweepSpec(StrictModel):
    """One change kind with one field varied; `fixed` holds its other fields."""

    name: str = Field(min_length=1, max_length=80, description="the sweep's name; each point is the scenario "
                      "`name=value`")
    change: Literal["demand", "price", "gpu_quota", "offer_quota", "availability", "slo", "budget", "headroom",
                    "reservation", "spot_share", "redundancy", "spot_interruptions", "site_power"] = Field(
        description="the change kind swept")
    parameter: str | None = Field(default=None, description="the field varied; default: the kind's main number "
                                  "(demand/price: factor, gpu_quota: gpus, slo: required, e.g. tpot_ms)")
    fixed: dict[str, Any] = Field(default_factory=dict, json_schema_extra=show_default({}),
                                  description="the change's other fields, e.g. {service: chat}")
    values: list[float] | Range = Field(description="the values of the varied field: a list, or a range "
                                        "{from, to, step}")
    also: list[Change] = Field(default_factory=list, json_schema_extra=show_default([]),
                               description="changes applied at every point of the sweep")

    @model_validator(mode="after")
    def _parameter(self):
        if self.parameter is None and self.change not in SWEEP_DEFAULT_PARAMETER:
            raise ValueError(f"a {self.change} sweep needs `parameter` (e.g. tpot_ms). To fix: add parameter")
        if isinstance(self.values, Range):
            self.point_values()  # raises on a bad range
        elif not self.values:
            raise ValueError("values is empty. To fix: list at least one value or give a range")
        return self

    @property
    def varied(self) -> str:
        return self.parameter or SWEEP_DEFAULT_PARAMETER[self.change]

    def point_values(self) -> list[float]:
        return self.values.values() if isinstance(self.values, Range) else list(self.values)


class SensitivitySpec(StrictModel):
    """Relax each constraint of the base one step and re-solve."""

    enabled: bool = Field(default=True, description="run the sensitivity scenarios (one relaxed constraint "
                          "each)")
    slo_step: float = Field(default=0.25, gt=0, le=10, description="relax each SLO bound by this fraction")
    budget_step: float = Field(default=0.25, gt=0, le=10, description="raise the budget by this fraction")
    headroom_step: float = Field(default=0.1, gt=0, le=10, description="lower the headroom by this much")
    quota_step_instances: int = Field(default=1, ge=1, le=1000, description="quota relaxed by this many of the "
                                      "largest instance of the GPU type")
    filters: bool = Field(default=True, description="also try removing each offer filter (providers, regions, "
                          "gpu_types, exclude_gpu_types)")


class BaseSpec(StrictModel):
    """The workload every scenario changes."""

    workload: str | dict[str, Any] = Field(description="path (relative to the review file) or inline workload")
    catalog: str | None = Field(default=None, description="catalog file overriding the workload's catalog")


class ReviewFile(StrictModel):
    """A capacity review: a base workload, named scenarios, sweeps and sensitivity options."""

    name: str = Field(default="review", min_length=1, max_length=100, description="the review's name, shown in "
                      "the report")
    description: str = Field(default="", description="free text shown at the top of the report")
    base: BaseSpec = Field(description="the workload (and optionally a catalog) every scenario starts from")
    scenarios: list[ScenarioSpec] = Field(default_factory=list, max_length=MAX_SWEEP_POINTS,
                                          json_schema_extra=show_default([]),
                                          description="named scenarios, each a list of changes to the base")
    sweeps: list[SweepSpec] = Field(default_factory=list, max_length=1000, json_schema_extra=show_default([]),
                                    description="one change kind with one field varied over values; each value "
                                    "is a scenario")
    sensitivity: SensitivitySpec = Field(default_factory=SensitivitySpec, json_schema_extra=show_default({}),
                                         description="relax each binding constraint of the base one step and "
                                         "re-solve")
    time_limit_per_scenario_s: float = Field(default=30.0, gt=0, le=86_400, description="each scenario's solve "
                                             "time limit, seconds")

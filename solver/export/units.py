"""A plan's JSON -> deployment units: one per service and configuration (offer, GPUs, precision).

The shared half of the export. Each target (skypilot.py, kubernetes.py) turns a unit
into its own files; nothing here knows about either. The plan is read as data (the
output of `solver-cli solve --format json`), so every check names the plan field that
is wrong and says how to get a good plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from solver.errors import FieldViolation, InputError
from solver.export import names as naming
from solver.export.served_model import served_model

ENGINES = ("vllm", "sglang", "tensorrt-llm")


@dataclass(frozen=True)
class Unit:
    """The replicas of one service on one configuration: what one deployment runs."""

    name: str  # DNS-1035 label, unique within the plan (Kubernetes object and SkyPilot service name)
    service: str
    service_slug: str
    model: str | None  # as the plan names it; None: a measured-profile service
    model_repo: str | None  # what the engine loads: the user's Hugging Face id, or the one chosen for a library name
    model_note: str | None  # the files' comment on which weights are served, and why
    engine: str | None
    offer_id: str
    provider: str
    instance_type: str
    region: str
    gpu: str
    gpus_per_instance: int
    gpus_per_replica: int
    instances_per_replica: int
    precision: str | None
    replicas: int
    batch: int | None
    vcpus: float | None  # per instance, where the catalog states it
    host_memory_gib: float | None
    spot: bool
    routed_share: float  # this unit's share of the service's planned traffic, 0..1
    shares_instances: bool  # the plan packs this unit's replicas with other replicas on one instance
    name_notes: tuple[str, ...] = ()  # why a name carries a hash (written as comments)
    # The failure domain the plan sized the service for (constraints.redundancy): "" none.
    redundancy_domain: str = ""
    config: str = ""  # the plan's configuration key (SERVICE@OFFER:Ngpu[xMinst]:PRECISION)
    # A scheduled export (schedule.py): (period, replicas) for every period, in order; the
    # unit's objects then start at 0 replicas and KEDA sets the count. Empty: `replicas` it is.
    replicas_by_period: tuple[tuple[str, int], ...] = ()
    # A disaggregated service's worker (issue 24): "prefill" or "decode", and the pool's link tier
    # (PROVIDER/REGION/LINK, the plan's `link`); "" for a replica that serves whole requests.
    role: str = ""
    pool: str = ""
    routed_per_s: float = 0.0  # the rate the plan routes to this unit (its service's unit: requests/s)
    # The engine's settings the plan sized this configuration with (the assignment's
    # engine_options: token budget, memory fraction, KV-cache type, scheduler, multi-step),
    # as (name, value) pairs; empty for plans from before they were reported.
    engine_settings: tuple[tuple[str, object], ...] = ()
    engine_version: str = ""  # the planned engine's version ("0.9" of "vllm-0.9"); "": its current release

    def setting(self, name: str):
        """One of the planned engine settings; None where the plan does not say."""
        return dict(self.engine_settings).get(name)

    @property
    def tensor_parallel(self) -> int:
        """GPUs per pipeline stage: the planner's performance model puts one stage on each instance."""
        return self.gpus_per_replica // self.pipeline_parallel

    @property
    def pipeline_parallel(self) -> int:
        return max(self.instances_per_replica, 1)

    @property
    def gpus_per_node(self) -> int:
        """GPUs one pod / one node of a replica uses."""
        return self.gpus_per_replica // self.pipeline_parallel

    @property
    def multi_node(self) -> bool:
        return self.instances_per_replica > 1

    @property
    def own_instance(self) -> bool:
        """Each replica (or each node of one) has its instance to itself, whether or not it uses every GPU."""
        return not self.shares_instances


@dataclass(frozen=True)
class PlanSummary:
    workload: str
    status: str
    total_price_usd_per_hour: float | None
    pricing: str
    units: tuple[Unit, ...]
    warnings: tuple[str, ...] = ()  # for stderr: what the user should know about the files


# What an assignment's engine_options may say: the values each may take (the plan JSON's
# names, solver.perf.llm.engine_settings; whole numbers within the workload schema's bounds).
_SETTINGS = {"max_batch": (1, 100_000), "kv_cache_memory_fraction": float, "kv_cache_dtype": ("fp16", "bf16", "fp8"),
             "max_num_batched_tokens": (16, 10_000_000), "scheduler": ("chunked_mixed", "prefill_first"),
             "kv_admission": ("whole_sequence", "paged_on_demand"), "multi_step": (1, 64)}


def _engine_settings(a: dict, where: str) -> tuple[tuple[str, object], ...]:
    """An assignment's engine_options, checked: they become engine flags, so a tampered value
    must not reach a command line."""
    opts = a.get("engine_options")
    if opts is None:
        return ()
    if not isinstance(opts, dict):
        raise InputError.single(f"{where}.engine_options", "must be an object of engine settings.", _FIX)
    out = []
    for name, value in opts.items():
        if value is None:
            continue  # not stated: the image's default
        kind = _SETTINGS.get(name)
        field_ = f"{where}.engine_options.{str(name)[:40]}"
        if kind is None:
            raise InputError.single(field_, "is not an engine setting the export knows.", _FIX)
        if kind is float:
            ok = _is_number(value) and 0 < value <= 1
        elif isinstance(kind[0], int):
            ok = isinstance(value, int) and not isinstance(value, bool) and kind[0] <= value <= kind[1]
        else:
            ok = value in kind
        if not ok:
            raise InputError.single(field_, f"is {str(value)[:40]!r}, not a valid value.", _FIX)
        out.append((name, value))
    return tuple(out)


def _engine_version(engine) -> str:
    if not isinstance(engine, str):
        return ""
    from solver.perf.engines import parse_engine

    try:
        return parse_engine(engine)[1] or ""
    except ValueError:
        return ""


def _engine_family(engine):
    """The engine a plan names, without its version ("vllm-0.9" -> "vllm"): the export runs the
    family's pinned server image (solver/export/engines.py); anything unknown is kept as it is
    and refused below."""
    if not isinstance(engine, str):
        return engine
    from solver.perf.engines import parse_engine

    try:
        return parse_engine(engine)[0]
    except ValueError:
        return engine

def load_plan_file(path: str | Path) -> dict:
    """Read PLAN.json; a missing, unreadable or non-JSON file is bad input, not a traceback."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.single(str(path), "no such file.", "give the path of a plan written by "
                                "`solver-cli solve WORKLOAD --format json > PLAN.json`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.single(str(path), f"cannot be read ({exc.__class__.__name__}).",
                                "give a readable UTF-8 JSON file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError.single(str(path), f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
                                "give the output of `solver-cli solve WORKLOAD --format json`") from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting past the stack
        raise InputError.single(str(path), f"cannot be read as a plan ({str(exc)[:80]}).",
                                "give the output of `solver-cli solve WORKLOAD --format json`") from None


def plan_units(plan: object) -> PlanSummary:
    """Check the plan's shape and cut it into deployment units."""
    status = plan.get("status") if isinstance(plan, dict) else None
    if status == "infeasible" or (isinstance(status, str) and status not in ("optimal", "feasible")):
        reasons = "; ".join(str(r.get("message", r)) for r in plan.get("infeasibility") or [] if isinstance(r, dict))
        raise InputError.single("plan.status", f"is {status!r}: there is no fleet to deploy"
                                + (f" ({reasons.rstrip('.')})." if reasons else "."),
                                "change the workload until `solver-cli solve` finds a plan, then export that plan")
    if not isinstance(plan, dict) or "services" not in plan or "fleet" not in plan or status is None:
        raise InputError.single("plan", "is not a plan: it needs `status`, `fleet` and `services`.",
                                "give the output of `solver-cli solve WORKLOAD --format json`")
    fleet = _list(plan, "fleet", "plan")
    offers: dict[str, dict] = {}
    for i, line in enumerate(fleet):
        where = f"fleet[{i}]"
        _need(line, where, ("offer_id", str), ("provider", str), ("name", str), ("region", str), ("gpu", str),
              ("gpus_per_instance", int))
        _need_numbers(line, where, "vcpus", "host_memory_gib")  # pod sizes are computed from them
        if line["gpus_per_instance"] < 1:
            raise InputError.single(f"{where}.gpus_per_instance", "must be >= 1.", _FIX)
        offers[line["offer_id"]] = line
    packed = _packed_configs(plan.get("placements") or [])
    plan_spot = plan.get("pricing") == "spot"
    errors: list[FieldViolation] = []
    units: list[Unit] = []
    unit_keys: list[str] = []  # per unit: what makes it unique in the plan (its hash suffix, if it needs one)
    services = _list(plan, "services", "plan")
    # A disaggregated service's prefill and decode pools are services of the plan of their own
    # (`role`, `serves`, `link`); their units belong to the service they serve, under its name.
    service_labels, service_notes, warnings = _service_labels(
        [s for s in services if not (isinstance(s, dict) and s.get("role"))])
    served = {m: served_model(m) for m in {s.get("model") for s in services if isinstance(s, dict)}
              if isinstance(m, str)}
    warnings += sorted({v.warning for v in served.values() if v.warning})
    for si, svc in enumerate(services):
        where = f"services[{si}]"
        _need(svc, where, ("name", str), ("assignments", list))
        role, serves, pool = _pool_of(svc, where, service_labels)
        label = service_labels[serves or svc["name"]]
        model = svc.get("model")
        engine = _engine_family(svc.get("engine"))
        estimated = any(isinstance(a, dict) and a.get("source") == "estimate" for a in svc["assignments"])
        if "model" not in svc and estimated:
            # Plans from before the export existed carry no model: refuse rather than export a placeholder.
            errors.append(FieldViolation(f"{where}.model", "is missing, but the service was planned from a model's "
                                         "estimates (the plan predates `solver-cli export`).",
                                         "re-run `solver-cli solve WORKLOAD --format json` and export that plan"))
            continue
        if model is not None and not isinstance(model, str):
            errors.append(FieldViolation(f"{where}.model", "must be a model name or null.", "re-run `solver-cli solve`"))
            continue
        if model is not None and engine not in ENGINES:
            errors.append(FieldViolation(f"{where}.engine", f"is {engine!r}; an LLM service needs one of "
                                         f"{', '.join(ENGINES)}.", "re-run `solver-cli solve` with this version"))
            continue
        for ai, a in enumerate(svc["assignments"]):
            if isinstance(a, dict):
                _need_numbers(a, f"{where}.assignments[{ai}]", "batch")
                routed = a.get("routed")
                if routed is not None and not (isinstance(routed, list) and all(_is_number(r) for r in routed)):
                    raise InputError.single(f"{where}.assignments[{ai}].routed", "must be a list of rates.", _FIX)
        total_routed = sum(sum(a.get("routed") or [0.0]) for a in svc["assignments"] if isinstance(a, dict)) or 0.0
        for ai, a in enumerate(svc["assignments"]):
            aw = f"{where}.assignments[{ai}]"
            _need(a, aw, ("config", str), ("offer_id", str), ("gpu", str), ("gpus_per_replica", int),
                  ("instances_per_replica", int), ("replicas", int))
            line = offers.get(a["offer_id"])
            if line is None:
                errors.append(FieldViolation(f"{aw}.offer_id", f"{a['offer_id']!r} is not in the plan's fleet.",
                                             "export the plan exactly as `solver-cli solve` wrote it"))
                continue
            if a["replicas"] < 1 or a["gpus_per_replica"] < 1 or a["instances_per_replica"] < 1:
                errors.append(FieldViolation(aw, "replicas, gpus_per_replica and instances_per_replica must be >= 1.",
                                             "export the plan exactly as `solver-cli solve` wrote it"))
                continue
            if a["gpus_per_replica"] % a["instances_per_replica"]:
                errors.append(FieldViolation(f"{aw}.gpus_per_replica", f"{a['gpus_per_replica']} GPUs do not split "
                                             f"evenly over {a['instances_per_replica']} instances.",
                                             "export the plan exactly as `solver-cli solve` wrote it"))
                continue
            routed = sum(a.get("routed") or [0.0])
            # A period may run one configuration both on demand and on spot: two units.
            spot_here = a.get("spot") is True
            unit_keys.append(f"{svc['name']}|{a['config']}|{a['offer_id']}" + ("|spot" if spot_here else ""))
            units.append(Unit(
                name=_unit_name(f"{label}-{role}" if role else label, line["provider"], a["gpu"],
                                a["gpus_per_replica"], a.get("precision")) + ("-spot" if spot_here else ""),
                service=serves or svc["name"], service_slug=label,
                name_notes=service_notes.get(serves or svc["name"], ()),
                model=model, model_repo=served[model].repo if model is not None else None,
                model_note=served[model].note if model is not None else None,
                engine=engine if model is not None else None,
                offer_id=a["offer_id"], provider=line["provider"], instance_type=line["name"], region=line["region"],
                gpu=a["gpu"], gpus_per_instance=line["gpus_per_instance"], gpus_per_replica=a["gpus_per_replica"],
                instances_per_replica=a["instances_per_replica"], precision=a.get("precision"),
                replicas=a["replicas"], batch=a.get("batch"), vcpus=line.get("vcpus"),
                host_memory_gib=line.get("host_memory_gib"),
                spot=plan_spot or a.get("spot") is True,  # a period's assignment says per configuration
                routed_share=routed / total_routed if total_routed > 0 else 1.0 / len(svc["assignments"]),
                shares_instances=a["config"] in packed,
                redundancy_domain=_redundancy_domain(svc), config=a["config"], role=role, pool=pool,
                routed_per_s=routed, engine_settings=_engine_settings(a, aw) if model is not None else (),
                engine_version=_engine_version(svc.get("engine")) if model is not None else ""))
    if errors:
        raise InputError(errors)
    if not units:
        raise InputError.single("plan.services", "no service has a replica: nothing to deploy.",
                                "export a plan that places at least one replica")
    units = _distinct_unit_names(units, unit_keys, frozenset(service_labels.values()))
    return PlanSummary(str(plan.get("workload", "workload")), status, plan.get("total_price_usd_per_hour"),
                       str(plan.get("pricing", "on_demand")), tuple(units), tuple(warnings))


def _pool_of(svc: dict, where: str, service_labels: dict[str, str]) -> tuple[str, str, str]:
    """(role, the service it serves, its link tier) of a prefill or decode pool; ("", "", "") otherwise."""
    role = svc.get("role")
    if role is None:
        return "", "", ""
    if role not in ("prefill", "decode"):
        raise InputError.single(f"{where}.role", f"is {role!r}; a pool's role is prefill or decode.", _FIX)
    serves, link = svc.get("serves"), svc.get("link")
    if not isinstance(serves, str) or serves not in service_labels:
        raise InputError.single(f"{where}.serves", f"is {serves!r}, not a service of the plan; a {role} pool "
                                "names the service it serves.", _FIX)
    if not isinstance(link, str) or not link:
        raise InputError.single(f"{where}.link", ("is missing" if link is None else f"is {link!r}, not text")
                                + ": a pool names the link tier that joins its prefill and decode workers.", _FIX)
    return role, serves, link


def _redundancy_domain(svc: dict) -> str:
    """The plan's `redundancy.domain` of a service ("" without one, or not a known domain)."""
    red = svc.get("redundancy")
    domain = red.get("domain") if isinstance(red, dict) else None
    return domain if domain in ("instance", "zone", "region", "provider") else ""


def _service_labels(services: list) -> tuple[dict[str, str], dict[str, tuple[str, ...]], list[str]]:
    """Service name -> its DNS label, the notes for the files of renamed services, and the warnings."""
    texts = {s["name"]: s["name"] for s in services if isinstance(s, dict) and isinstance(s.get("name"), str)}
    labels, collided = naming.distinct(texts)
    notes: dict[str, tuple[str, ...]] = {}
    warnings = []
    for group in collided:
        listing = ", ".join(f"{n!r} -> {labels[n]}" for n in group)
        warnings.append(f"services {', '.join(repr(n) for n in group)} all reduce to the Kubernetes name "
                        f"{naming.shorten(naming.slug(group[0]) or 'service')!r}; each keeps its own objects, "
                        f"named with a hash of its name: {listing}")
        for n in group:
            if labels[n] != n:
                notes[n] = (f"Service {n!r} is named {labels[n]!r} here: the names {', '.join(map(repr, group))} "
                            "all reduce to the same DNS label, so each but an exact match gets a hash of its own "
                            "name (stable across exports).",)
    return labels, notes, warnings


def _distinct_unit_names(units: list[Unit], keys: list[str], service_labels: frozenset[str]) -> list[Unit]:
    """Units of one service on offers that slug alike (two regions, `a/b` and `a:b`) get a hash of
    their configuration, so no two share a Deployment or a file; nor may a unit take a service's
    name (a unit's own Service and a service's Service are both Services)."""
    labels, _ = naming.distinct({k: u.name for k, u in zip(keys, units)}, keep_exact=False, reserved=service_labels)
    return [replace(u, name=labels[k]) for k, u in zip(keys, units)]


def _packed_configs(placements: list) -> set[str]:
    """Configurations whose replicas share an instance with another replica (theirs or another service's)."""
    packed: set[str] = set()
    for p in placements:
        if not isinstance(p, dict):
            continue
        # One entry per replica on the instance: (configuration key, GPUs it takes there).
        entries = [r for r in p.get("replicas") or [] if isinstance(r, (list, tuple)) and len(r) == 2]
        if len(entries) > 1:
            packed.update(str(c) for c, _ in entries)
    return packed


_FIX = "export the plan exactly as `solver-cli solve` wrote it"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _need_numbers(d: dict, where: str, *keys: str) -> None:
    """Optional numeric fields: absent, null or a number."""
    for key in keys:
        value = d.get(key)
        if value is not None and not _is_number(value):
            raise InputError.single(f"{where}.{key}", "must be a number or null.", _FIX)


def _list(d: dict, key: str, where: str) -> list:
    value = d.get(key)
    if not isinstance(value, list):
        raise InputError.single(f"{where}.{key}", "must be a list.", "export the plan exactly as `solver-cli solve` wrote it")
    return value


def _need(d: object, where: str, *fields: tuple[str, type]) -> None:
    if not isinstance(d, dict):
        raise InputError.single(where, "must be an object.", "export the plan exactly as `solver-cli solve` wrote it")
    bad = []
    for key, kind in fields:
        value = d.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            bad.append(FieldViolation(f"{where}.{key}", "is missing." if key not in d else
                                      f"must be {'a whole number' if kind is int else 'text' if kind is str else 'a list'}.",
                                      "export the plan exactly as `solver-cli solve` wrote it"))
    if bad:
        raise InputError(bad)


def _unit_name(service_label: str, provider: str, gpu: str, gpus: int, precision: str | None) -> str:
    parts = [service_label, naming.slug(provider), naming.slug(gpu), f"x{gpus}"]
    if precision:
        parts.append(naming.slug(precision))
    return "-".join(p for p in parts if p)

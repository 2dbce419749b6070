"""Hypothesis strategies for fuzzing the planner's inputs (issue 11).

Three layers, each mixing plausible and hostile values:
- `workloads()`, `reviews()`, `catalogs()`: documents shaped like the real ones (so that
  many get past the schema and reach name checks and the solver), with fields deleted,
  replaced by arbitrary JSON, or given edge-case numbers and strings;
- `document_texts()`: those documents (or arbitrary JSON) as JSON or YAML text, then
  possibly mutated at the character level, plus known hostile texts (alias bombs, deep
  nesting, huge numbers, lone surrogates, YAML tags);
- `solve_requests()`, `validate_requests()`, `estimate_requests()`, `catalog_requests()`,
  `review_requests()`: the gRPC messages carrying them (a Struct, JSON or YAML text, a
  catalog document, unknown enum numbers, NaN time limits).

Used by tests/test_fuzz.py (a short run) and bench/fuzz.py (100,000 inputs).
"""

from __future__ import annotations

import functools
import json
import math
import random

import yaml
from google.protobuf import struct_pb2
from google.protobuf.message import Message
from hypothesis import strategies as st

from server.generated.fleetplanner.v1 import planner_pb2 as pb

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b", "llama-3.1-405b", "llama-3.1-8bb", ""]
GPUS = ["A10", "L4", "H100-SXM", "A100-80GB", "L40S", "GH200", "RTX-4090", "H100", "nope"]
PROVIDERS = ["aws", "gcp", "lambda", "nebius", "cudo", "azure", "nowhere"]
PRECISIONS = ["fp16", "bf16", "fp8", "int8", "q4_k_m", "fp4"]
CALIBRATION_KEYS = ["bandwidth_efficiency", "compute_efficiency", "max_batch", "link_efficiency",
                    "engine_factor.vllm", "engine_factor_sglang", "fp8_compute_efficiency", "activation_tokens",
                    "usable_memory_fraction", "error_band", "runtime_overhead_gib", "allreduce_latency_us.pcie",
                    "bandwith_efficiency"]
CATALOG_PATHS = ["catalog.json", "catalog.yaml", "bad-catalog.json", "missing.json", "fifo.json", "/dev/zero",
                 "/proc/self/mem", "/", "x" * 5000 + ".json", "a\x00b.json", "../" * 50 + "etc/hostname"]

EDGE_FLOATS = [0.0, -0.0, 5e-324, 1e-300, 1e-6, 0.5, 1.0, 1e9, 1e18, 1e19, 1.7e308, -1.7e308, -1.0,
               math.nan, math.inf, -math.inf]
EDGE_INTS = [0, -1, 1, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 10**30]
EDGE_TEXT = ["", " ", "\ud800", "\udfff", "a\x00b", "é", "\U0001F680", "\u202e", "x" * 20_000, "null", "1e999",
             "-", "../../etc/passwd", "<script>", "${HOME}", "%s%s%n"]

_CACHE: dict = {}


def _cached(key, make):
    strategy = _CACHE.get(key)
    if strategy is None:
        strategy = _CACHE[key] = make()
    return strategy


def pick(values) -> st.SearchStrategy:
    """sampled_from, built once per list of values (building strategies per draw is slow)."""
    values = tuple(values)
    return _cached(("pick", values), lambda: st.sampled_from(values))


def ints(low: int, high: int) -> st.SearchStrategy:
    return _cached(("ints", low, high), lambda: st.integers(low, high))


def lists(strategy: st.SearchStrategy, min_size: int = 0, max_size: int = 3, unique: bool = False) -> st.SearchStrategy:
    return _cached(("lists", id(strategy), min_size, max_size, unique),
                   lambda: st.lists(strategy, min_size=min_size, max_size=max_size, unique=unique))


def either(*strategies: st.SearchStrategy) -> st.SearchStrategy:
    return _cached(("one_of", *map(id, strategies)), lambda: st.one_of(*strategies))


def just(value) -> st.SearchStrategy:
    return _cached(("just", value), lambda: st.just(value))


def dicts(keys: st.SearchStrategy, values: st.SearchStrategy, max_size: int) -> st.SearchStrategy:
    return _cached(("dicts", id(keys), id(values), max_size), lambda: st.dictionaries(keys, values, max_size=max_size))


BOOLS = st.booleans()


edge_numbers = st.one_of(st.sampled_from(EDGE_FLOATS), st.sampled_from(EDGE_INTS))
numbers = st.one_of(st.integers(-5, 2000), st.floats(allow_nan=True, allow_infinity=True), edge_numbers,
                    st.integers())
texts = st.one_of(st.text(max_size=12), st.sampled_from(EDGE_TEXT),
                  st.sampled_from(MODELS + GPUS + PROVIDERS + PRECISIONS))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
NAMES = st.one_of(st.just("fuzz"), st.just("review"), texts)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(texts, inner, max_size=4)),
                           max_leaves=12)


ONE_IN_20 = st.integers(0, 19)
ONE_IN_50 = st.integers(0, 49)
ACTIONS = pick(["delete", "replace", "add"])


@functools.lru_cache(maxsize=None)
def sane(low: float, high: float) -> st.SearchStrategy:
    """Plausible numbers in [low, high]; one in 50 is an edge case (NaN, 1e308, -1, ...)."""
    plain = st.floats(low, high)
    return ONE_IN_50.flatmap(lambda k: edge_numbers if k == 49 else plain)


@functools.lru_cache(maxsize=None)
def whole(low: int, high: int) -> st.SearchStrategy:
    plain = ints(low, high)
    return ONE_IN_50.flatmap(lambda k: edge_numbers if k == 49 else plain)


def mutate(draw, value: object) -> object:
    """One time in 20, a dict loses a key, has a value replaced by arbitrary JSON, or gains an unknown key."""
    if not isinstance(value, dict) or draw(ONE_IN_20) != 19:
        return value
    value = dict(value)
    action = draw(ACTIONS)
    keys = sorted(value)
    if action == "delete" and keys:
        value.pop(keys[draw(ints(0, len(keys) - 1))])
    elif action == "replace" and keys:
        value[keys[draw(ints(0, len(keys) - 1))]] = draw(json_values)
    else:
        value[draw(texts)] = draw(json_values)
    return value


@functools.lru_cache(maxsize=None)
def _optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return either(just(None), strategy)


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return _optional(strategy)


def _compact(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


@st.composite
def _slo(draw) -> dict:
    return _compact({"ttft_ms": draw(optional(sane(10, 20_000))), "tpot_ms": draw(optional(sane(5, 500))),
                     "latency_ms": draw(optional(sane(10, 100_000)))})


@st.composite
def _llm_service(draw, name: str) -> dict:
    demand = {"requests_per_s": draw(sane(0.01, 50))}
    if draw(BOOLS):
        demand.update(prompt_tokens=draw(whole(1, 8192)), output_tokens=draw(whole(1, 2048)))
    else:
        n = draw(ints(1, 3))
        demand["classes"] = [{"name": f"c{i}", "share": 1 / n if draw(ints(0, 9)) else draw(sane(0, 1)),
                              "prompt_tokens": draw(whole(1, 8192)), "output_tokens": draw(whole(1, 2048))}
                             for i in range(n)]
    return _compact({
        "name": name, "model": draw(pick(MODELS[:4]) if draw(ints(0, 9)) else pick(MODELS)),
        "precisions": draw(optional(lists(pick(PRECISIONS[:4]), 1, 3, True))),
        "engine": draw(optional(pick(["vllm", "sglang", "tensorrt-llm", "vllm", "sglang", "tensorrt-llm", "llama.cpp"]))),
        "demand": mutate(draw, demand), "slo": draw(optional(_slo())),
        "min_replicas": draw(optional(whole(0, 4))), "max_replicas": draw(optional(whole(1, 50))),
        "size_with_error_band": draw(optional(BOOLS)),
    })


@st.composite
def _profile_service(draw, name: str) -> dict:
    profiles = [_compact({"gpu": draw(pick(GPUS)), "items_per_min": draw(sane(0.1, 500)),
                          "latency_ms": draw(optional(sane(1, 5000))), "gpus_per_replica": draw(optional(whole(1, 8)))})
                for _ in range(draw(ints(1, 3)))]
    return _compact({"name": name, "demand": {"items_per_min": draw(sane(0.1, 5000))}, "slo": draw(optional(_slo())),
                     "profiles": [mutate(draw, p) for p in profiles]})


@st.composite
def _services(draw) -> list:
    out = []
    for i in range(draw(ints(1, 3))):
        name = f"svc-{i}" if draw(ints(0, 9)) else draw(texts)
        make = _llm_service if draw(BOOLS) else _profile_service
        out.append(mutate(draw, draw(make(name))))
    return out


@st.composite
def _offers(draw) -> list:
    offers = []
    for i in range(draw(ints(1, 3))):
        offer = _compact({"provider": draw(pick(PROVIDERS)), "name": f"o{i}",
                          "gpu": draw(pick(GPUS)), "gpus_per_instance": draw(whole(1, 8)),
                          "price_usd_per_hour": draw(sane(0.1, 100)),
                          "available_instances": draw(optional(whole(0, 10)))})
        offers.append(mutate(draw, offer))
    return offers


@st.composite
def catalogs(draw) -> dict:
    """A catalog file's content (`solver-cli schema --catalog`)."""
    return mutate(draw, _compact({"offers": draw(_offers()), "include_default_gpus": draw(optional(BOOLS))}))


@st.composite
def _catalog_ref(draw) -> dict | None:
    kind = draw(pick(["default", "default", "file", "inline"]))
    if kind == "file":
        return {"file": draw(pick(CATALOG_PATHS))}
    if kind == "inline":
        return {"offers": draw(_offers()), "include_default_offers": draw(BOOLS)}
    return None


@st.composite
def _constraints(draw) -> dict | None:
    if draw(BOOLS):
        return None
    return _compact({
        "budget_usd_per_hour": draw(optional(sane(0.5, 1000))), "headroom": draw(optional(sane(0, 2))),
        "gpu_quotas": draw(optional(dicts(pick(GPUS), whole(-1, 16), 2))),
        "providers": draw(optional(lists(pick(PROVIDERS), 1, 3))),
        "gpu_types": draw(optional(lists(pick(GPUS), 1, 3))),
        "allow_consumer_gpus": draw(optional(BOOLS)),
        "pricing": draw(optional(pick(["on_demand", "spot", "on_demand", "spot", "reserved"]))),
    })


@st.composite
def _solver_options(draw) -> dict | None:
    if draw(ints(0, 2)):
        return None
    return _compact({"time_limit_s": draw(optional(sane(0.1, 5))),
                     "backend": draw(optional(pick(["auto", "scip", "highs", "cp-sat", "gurobi"]))),
                     "calibration": draw(optional(dicts(pick(CALIBRATION_KEYS), either(sane(0, 2), numbers), 2)))})


@st.composite
def workloads(draw) -> dict:
    """A workload document (`solver-cli schema`), often valid, sometimes subtly not."""
    return mutate(draw, _compact({
        "name": draw(optional(NAMES)), "services": draw(_services()),
        "constraints": draw(_constraints()), "catalog": draw(_catalog_ref()), "solver": draw(_solver_options())}))


CHANGE_KINDS = ["demand", "price", "gpu_quota", "offer_quota", "availability", "slo", "budget", "headroom",
                "constraints", "remove_gpus", "remove_offers", "add_offers", "bogus"]


@st.composite
def _change(draw) -> dict:
    kind = draw(pick(CHANGE_KINDS))
    body = {
        "demand": lambda: {"factor": draw(sane(0, 5)), **({"service": "svc-0"} if draw(BOOLS) else {})},
        "price": lambda: {"gpu": draw(pick(GPUS)), "factor": draw(sane(0, 3))},
        "gpu_quota": lambda: {"gpu": draw(pick(GPUS)), "gpus": draw(optional(whole(0, 16)))},
        "offer_quota": lambda: {"offer": "aws/g5.xlarge", "instances": draw(optional(whole(0, 4)))},
        "availability": lambda: {"offer": "lambda/gpu_1x_a10", "instances": draw(optional(whole(0, 4)))},
        "slo": lambda: {"service": "svc-0", "tpot_ms": draw(optional(sane(1, 200)))},
        "budget": lambda: {"usd_per_hour": draw(optional(sane(1, 100)))},
        "headroom": lambda: {"fraction": draw(sane(0, 2))},
        "constraints": lambda: {"providers": draw(lists(pick(PROVIDERS), 1, 2))},
        "remove_gpus": lambda: draw(lists(pick(GPUS), 1, 2)),
        "remove_offers": lambda: ["aws/g5.xlarge"],
        "add_offers": lambda: draw(_offers()),
        "bogus": lambda: draw(json_values),
    }[kind]()
    return {kind: body}


SCENARIOS = st.lists(st.fixed_dictionaries({"name": st.one_of(st.just("sc"), texts),
                                            "changes": st.lists(_change(), max_size=2)}), max_size=3)
SENSITIVITY = st.fixed_dictionaries({"enabled": st.booleans()})


@st.composite
def _sweep(draw) -> dict:
    change = draw(pick(["demand", "price", "budget", "headroom", "slo", "gpu_quota"]))
    if draw(BOOLS):
        values = draw(lists(sane(0, 10), 0, 4))
    else:
        values = {"from": draw(either(sane(0, 2), edge_numbers)), "to": draw(either(sane(0, 5), edge_numbers)),
                  "step": draw(either(sane(0.01, 1), edge_numbers))}
    sweep = {"name": draw(either(just("s"), texts)), "change": change, "values": values}
    if change == "slo":
        sweep.update(parameter="tpot_ms", fixed={"service": "svc-0"})
    elif change in ("price", "gpu_quota"):
        sweep["fixed"] = {"gpu": draw(pick(GPUS))}
    return mutate(draw, sweep)


@st.composite
def reviews(draw) -> dict:
    """A review document with an inline base (as the Review RPC requires)."""
    return mutate(draw, _compact({
        "name": draw(optional(NAMES)),
        "base": {"workload": draw(workloads())},
        "scenarios": draw(optional(SCENARIOS)),
        "sweeps": draw(optional(lists(_sweep(), 0, 2))),
        "sensitivity": draw(optional(SENSITIVITY)),
        "time_limit_per_scenario_s": draw(optional(sane(0.1, 5))),
    }))


# ---------------------------------------------------------------- text
WORKLOADS_OR_JSON = st.one_of(workloads(), workloads(), workloads(), workloads(), json_values)
def yaml_bomb(levels: int, width: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nservices: [*l{levels - 1}]\n"


def _hostile_texts() -> list[tuple[str, str]]:
    return [
        (yaml_bomb(7, 10), ".yaml"), (yaml_bomb(3, 50), ".yaml"), (yaml_bomb(20, 2), ".yaml"),
        ('{"services": ' + "[" * 1000 + "]" * 1000 + "}", ".json"),
        ("services: " + "[" * 10_000 + "]" * 10_000, ".yaml"),
        ("services:\n" + "".join(" " * i + "- \n" for i in range(1, 1500)), ".yaml"),
        ('{"name": "\\ud800", "services": []}', ".json"),
        ('{"services": [{"name": "a", "demand": {"items_per_min": ' + "9" * 5000 + "}}]}", ".json"),
        ("x: 1" + ":1" * 30_000, ".yaml"), ("x: 0x" + "f" * 10_000, ".yaml"),
        ("services: &s [*s]", ".yaml"), ("a: &a {<<: *a}", ".yaml"),
        ("x: !!python/object/apply:os.system [echo]", ".yaml"), ("x: !!binary aGk=", ".yaml"),
        ("? [1, 2]\n: x", ".yaml"), ("--- a\n--- b\n", ".yaml"), ("%YAML 9.9\n---\na: 1", ".yaml"),
        ('{"a": 1, "a": 2}', ".json"), ("\ufeff{}", ".json"), ("\x00", ".json"), ("", ".json"), ("   ", ".yaml"),
        ('{"services": [{"name": "a", "model": "llama-3.1-8b", "demand": {"requests_per_s": 1, "prompt_tokens": 1, '
         '"output_tokens": 1}}], "solver": {"calibration": {"max_batch": 0}}}', ".json"),
        ('{"base": {"workload": {"services": []}}, "sweeps": [{"name": "s", "change": "demand", '
         '"values": {"from": -1.7e308, "to": 1.7e308, "step": 1}}]}', ".json"),
    ]


HOSTILE_TEXTS = _hostile_texts()


def _to_json(doc, ensure_ascii: bool) -> str:
    try:
        return json.dumps(doc, ensure_ascii=ensure_ascii)
    except (ValueError, TypeError, RecursionError):
        return "{}"


def _to_yaml(doc) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True, default_flow_style=None)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError, UnicodeEncodeError):
        return "{}"


@st.composite
def _mutated_text(draw, text: str) -> str:
    """Character-level damage: truncation, insertion, deletion, duplication."""
    if not text or draw(ints(0, 3)):
        return text
    i = draw(ints(0, len(text)))
    action = draw(pick(["truncate", "insert", "delete", "duplicate"]))
    if action == "truncate":
        return text[:i]
    if action == "insert":
        return text[:i] + draw(pick(["{", "}", "[", "]", ",", ":", "\"", "&a ", "*a", "\n  ", "\t", "#",
                                                "!!str ", "\\", "\x00", "\ud800", "- ", "? ", "|", ">"])) + text[i:]
    if action == "delete":
        return text[:i] + text[i + draw(ints(1, 20)):]
    j = draw(ints(i, min(len(text), i + 200)))
    return text[:j] + text[i:j] + text[j:]


@st.composite
def document_texts(draw, documents: st.SearchStrategy | None = None) -> tuple[str, str]:
    """(text, suffix): a document as JSON or YAML, maybe damaged, or a known hostile text."""
    if draw(ints(0, 19)) == 0:
        return draw(pick(HOSTILE_TEXTS))
    if documents is None:
        documents = WORKLOADS_OR_JSON
    doc = draw(documents)
    if draw(BOOLS):
        text, suffix = _to_json(doc, draw(BOOLS)), ".json"
    else:
        text, suffix = _to_yaml(doc), ".yaml"
    return draw(_mutated_text(text)), suffix


# ---------------------------------------------------------------- gRPC messages
def to_struct(doc: dict) -> struct_pb2.Struct | None:
    """The document as a Struct, or None when protobuf cannot hold it (huge ints,
    strings that are not UTF-8, nesting past protobuf's limit)."""
    try:
        s = struct_pb2.Struct()
        s.update(doc)
        s.ByteSize()
        return s
    except Exception:  # noqa: BLE001 - protobuf raises several types; such a document is simply skipped
        return None


@st.composite
def workload_messages(draw, documents: st.SearchStrategy | None = None) -> pb.Workload:
    doc = draw(documents if documents is not None else workloads())
    kind = draw(pick(["object", "json", "yaml", "text", "none"]))
    msg = pb.Workload()
    if kind == "object" and isinstance(doc, dict) and (s := to_struct(doc)) is not None:
        msg.object.CopyFrom(s)
    elif kind in ("object", "json"):
        msg.json = _utf8(_to_json(doc, draw(BOOLS)))
    elif kind == "yaml":
        msg.yaml = _utf8(_to_yaml(doc))
    elif kind == "text":
        text, suffix = draw(document_texts())
        setattr(msg, "yaml" if suffix == ".yaml" else "json", _utf8(text))
    if draw(ints(0, 4)) == 0:
        cat_text, cat_suffix = draw(document_texts(catalogs()))
        msg.catalog_file.path = _utf8(draw(pick(["c" + cat_suffix, "c.json", "", "x" * 5000])))
        msg.catalog_file.text = _utf8(cat_text)
    return msg


def _utf8(text: str) -> str:
    """Protobuf strings are UTF-8: a lone surrogate cannot travel (it arrives escaped in JSON)."""
    return text.encode("utf-8", "replace").decode("utf-8")


@st.composite
def solve_requests(draw) -> pb.SolveRequest:
    req = pb.SolveRequest(workload=draw(workload_messages()), explain=draw(BOOLS),
                          backend=draw(either(ints(0, 4), ints(-(2**31), 2**31 - 1))))
    if draw(BOOLS):
        req.time_limit_s = draw(either(sane(0.05, 1.0), pick(EDGE_FLOATS)))
    return req


@st.composite
def validate_requests(draw) -> pb.ValidateRequest:
    return pb.ValidateRequest(workload=draw(workload_messages()))


@st.composite
def estimate_requests(draw) -> pb.EstimateRequest:
    req = pb.EstimateRequest(
        model=_utf8(draw(either(pick(MODELS), texts))),
        gpu=_utf8(draw(either(pick(GPUS + [""]), texts))),
        gpus_per_replica=draw(either(ints(0, 16), ints(-(2**31), 2**31 - 1))),
        precision=_utf8(draw(either(pick(PRECISIONS + [""]), texts))),
        engine=_utf8(draw(pick(["", "vllm", "sglang", "tensorrt-llm", "llama.cpp", "tensorrt-llm-0.9", "x"]))),
        prompt_tokens=draw(either(ints(0, 8192), ints(-(2**31), 2**31 - 1))),
        output_tokens=draw(either(ints(0, 2048), ints(-(2**31), 2**31 - 1))))
    for field in ("ttft_ms", "tpot_ms", "latency_ms"):
        if draw(BOOLS):
            setattr(req, field, draw(either(sane(1, 10_000), pick(EDGE_FLOATS))))
    return req


@st.composite
def catalog_requests(draw) -> pb.GetCatalogRequest:
    return pb.GetCatalogRequest(gpu=_utf8(draw(either(just(""), pick(GPUS), texts))),
                                provider=_utf8(draw(either(just(""), pick(PROVIDERS), texts))),
                                region=_utf8(draw(either(just(""), texts))))


@st.composite
def review_requests(draw) -> pb.ReviewRequest:
    text, suffix = draw(document_texts(reviews()))
    req = pb.ReviewRequest(**{"yaml" if suffix == ".yaml" else "json": _utf8(text)})
    if draw(BOOLS):
        req.time_limit_per_scenario_s = draw(either(sane(0.05, 1.0), pick(EDGE_FLOATS)))
    return req


# ---------------------------------------------------------------- cheap variants
# Drawing one structured input through hypothesis costs 10-40 ms here; a run of 100,000
# inputs therefore draws one input per family and derives the family's other members
# from it with a seeded random.Random (microseconds each): damaged text, a value
# replaced by an edge case, a key deleted or added.
EDGE_VALUES = [*EDGE_FLOATS, *EDGE_INTS, *EDGE_TEXT[:12], None, True, [], {}, [1], {"a": None}]
TEXT_DAMAGE = ["{", "}", "[", "]", ",", ":", '"', "&a ", "*a", "\n  ", "\t", "#", "!!str ", "\\", "\x00", "- ",
               "? ", "|", ">", "NaN", "1e999", "\ud800", "<<: *a", "~"]


def families(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """(input, seed): the seed derives the family's other members with `vary`."""
    return st.tuples(strategy, st.integers(0, 2**32 - 1))


def vary(example, rng: random.Random):
    """A cheap random variant of a generated input of any of this module's kinds."""
    if isinstance(example, tuple) and len(example) == 2 and isinstance(example[0], str):
        text, suffix = example
        return damage(text, rng), (suffix if rng.random() < 0.9 else rng.choice([".json", ".yaml"]))
    if isinstance(example, dict):
        return vary_value(example, rng)
    if isinstance(example, Message):
        return vary_message(example, rng)
    return example


def damage(text: str, rng: random.Random) -> str:
    if not text:
        return rng.choice(TEXT_DAMAGE)
    i = rng.randrange(len(text) + 1)
    action = rng.randrange(5)
    if action == 0:
        return text[:i]
    if action == 1:
        return text[:i] + rng.choice(TEXT_DAMAGE) + text[i:]
    if action == 2:
        return text[:i] + text[i + rng.randint(1, 20):]
    if action == 3:
        j = min(len(text), i + rng.randint(1, 200))
        return text[:j] + text[i:j] + text[j:]
    return text[:i] + chr(rng.randint(0, 0x2FFF)) + text[i + 1:]


def vary_value(doc, rng: random.Random, depth: int = 0):
    """A copy of a JSON-like value with one random leaf or subtree changed."""
    if isinstance(doc, dict) and doc and depth < 8 and rng.random() < 0.8:
        out = dict(doc)
        key = rng.choice(list(out))
        roll = rng.random()
        if roll < 0.1:
            del out[key]
        elif roll < 0.15:
            out[rng.choice(["extra", "", "services", "name", "\ud800"])] = rng.choice(EDGE_VALUES)
        else:
            out[key] = vary_value(out[key], rng, depth + 1)
        return out
    if isinstance(doc, list) and doc and depth < 8 and rng.random() < 0.8:
        out = list(doc)
        i = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.1:
            del out[i]
        elif roll < 0.2:
            out.append(out[i])
        else:
            out[i] = vary_value(out[i], rng, depth + 1)
        return out
    if isinstance(doc, (int, float)) and not isinstance(doc, bool) and rng.random() < 0.5:
        return rng.choice([doc * 10, -doc, doc + 1, doc / 3, 0, doc * 1e9])
    return rng.choice(EDGE_VALUES)


def vary_message(msg, rng: random.Random):
    out = type(msg)()
    out.CopyFrom(msg)
    workload = out.workload if hasattr(out, "workload") else None
    if workload is not None:
        kind = workload.WhichOneof("document")
        if kind in ("json", "yaml"):
            setattr(workload, kind, _utf8(damage(getattr(workload, kind), rng)))
        elif kind == "object":
            from server import convert

            varied = to_struct(vary_value(convert.struct_to_dict(workload.object), rng))
            if varied is not None:
                workload.object.CopyFrom(varied)
    elif isinstance(out, pb.ReviewRequest):
        kind = out.WhichOneof("document")
        if kind:
            setattr(out, kind, _utf8(damage(getattr(out, kind), rng)))
    numeric = [f for f in out.DESCRIPTOR.fields if f.type in (f.TYPE_DOUBLE, f.TYPE_INT32, f.TYPE_ENUM)]
    if numeric and rng.random() < 0.3:
        f = rng.choice(numeric)
        try:
            setattr(out, f.name, rng.choice([0, -1, 1, 2**31 - 1, 7]) if f.type != f.TYPE_DOUBLE
                    else rng.choice([math.nan, math.inf, -1.0, 0.0, 1e-300, 0.5, 1e308]))
        except (ValueError, TypeError):
            pass
    return out

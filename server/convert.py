"""Pure conversions between the planner's JSON-shaped dicts and the API's proto messages.

The proto messages mirror the JSON (PlanResult.to_dict(), catalog and estimate rows):
same names, same key order (proto field order), so one descriptor-driven converter
serves them all. The few places where the JSON is not a plain object tree are listed
in tables below. Conversions are strict: a dict key with no proto field raises
ValueError, so a field added to the plan JSON but not to the proto fails the tests
instead of silently vanishing on the wire.

Only protobuf is imported here (no grpc, no solver): the client uses this module too.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from server.generated.fleetplanner.v1 import planner_pb2 as pb

# Message fields whose JSON form, when absent, is an empty object rather than null.
_ABSENT_AS_EMPTY = {("fleetplanner.v1.Plan", "evaluation"), ("fleetplanner.v1.PeriodPlan", "evaluation")}
# Fields numbered from 40 extend existing messages for multi-period plans; single-hour
# plans have no such keys at all. A Plan has them exactly when horizon_hours is set, and
# changes/rollout exactly when rollout is; a Placement has `spot` when it is set.
_EXTENSION_FROM = 40
# Repeated message fields whose JSON form is a list of lists (field values in order).
_AS_TUPLES = {("fleetplanner.v1.Placement", "replicas")}
# Repeated two-field messages whose JSON form is one object {first: second, ...}; a
# repeated field keeps the key order, which a proto map would not.
_AS_OBJECT = {("fleetplanner.v1.SolverInfo", "timings")}
# Plan keys present exactly when `solver` is (PlanResult.to_dict() derives them from it).
_WITH_SOLVER = ("optimality_gap", "solve_time_s")
# Message fields whose JSON form is a list of the message's field values in order
# ([low, high]), not an object.
_AS_LIST = {("fleetplanner.v1.LoadBand", "ttft_ms"), ("fleetplanner.v1.LoadBand", "tpot_ms"),
            ("fleetplanner.v1.LoadBand", "latency_ms")}
# String fields whose JSON form is a number or a word ("nominal" or 0.9): the number
# travels as its shortest decimal text, which reads back as the same float.
_NUMBER_OR_WORD = {("fleetplanner.v1.ServiceConfidence", "level")}


# ------------------------------------------------------------------ generic
def to_message(cls: type[Message], data: dict, where: str = "") -> Message:
    """A JSON-shaped dict -> a proto message of type `cls`."""
    msg = cls()
    _fill(msg, data, where or cls.DESCRIPTOR.name)
    return msg


# How each field of a message type is filled, looked up once per type (descriptor
# attribute reads are slow in upb): name -> (kind, field, absent_as_empty).
_SCALAR, _FLOAT, _ENUM, _MESSAGE, _REPEATED, _MESSAGE_AS_LIST, _NUMBER_AS_TEXT = range(7)
_FILL_TABLES: dict[str, dict[str, tuple[int, FieldDescriptor, bool]]] = {}


def _fill_table(desc: Descriptor) -> dict[str, tuple[int, FieldDescriptor, bool]]:
    table = _FILL_TABLES.get(desc.full_name)
    if table is None:
        table = {}
        for f in desc.fields:
            if f.is_repeated:
                kind = _REPEATED
            elif f.type == FieldDescriptor.TYPE_MESSAGE:
                kind = _MESSAGE_AS_LIST if (desc.full_name, f.name) in _AS_LIST else _MESSAGE
            elif (desc.full_name, f.name) in _NUMBER_OR_WORD:
                kind = _NUMBER_AS_TEXT
            elif f.type == FieldDescriptor.TYPE_ENUM:
                kind = _ENUM
            elif f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
                kind = _FLOAT
            else:
                kind = _SCALAR
            table[f.name] = (kind, f, (desc.full_name, f.name) in _ABSENT_AS_EMPTY)
        _FILL_TABLES[desc.full_name] = table
    return table


def _fill(msg: Message, data: dict, where: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    table = _fill_table(msg.DESCRIPTOR)
    for key, value in data.items():
        entry = table.get(key)
        if entry is None:
            raise ValueError(f"{where}.{key}: no such field in {msg.DESCRIPTOR.full_name}")
        kind, field, absent_as_empty = entry
        if kind == _FLOAT:  # the most common case first; the path is built only for an error
            if value is None:
                if not field.has_presence:
                    raise ValueError(f"{where}.{key}: null for a field that is never null")
            elif type(value) is float:
                setattr(msg, key, value)
            else:
                setattr(msg, key, _scalar_in(field, value, f"{where}.{key}"))
        elif kind == _REPEATED:
            _fill_repeated(msg, field, value, f"{where}.{key}")
        elif kind == _MESSAGE:
            if value is None or (absent_as_empty and value == {}):
                continue
            getattr(msg, key).SetInParent()  # present even where every field inside is unset
            _fill(getattr(msg, key), value, f"{where}.{key}")
        elif kind == _MESSAGE_AS_LIST:
            if value is None:
                continue
            names = [f.name for f in field.message_type.fields]
            if not isinstance(value, (list, tuple)) or len(value) != len(names):
                raise ValueError(f"{where}.{key}: expected [{', '.join(names)}]")
            getattr(msg, key).SetInParent()
            _fill(getattr(msg, key), dict(zip(names, value)), f"{where}.{key}")
        elif kind == _NUMBER_AS_TEXT:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError(f"{where}.{key}: expected a number or a word, got {value!r}")
            setattr(msg, key, value if isinstance(value, str) else repr(float(value)))
        elif value is None:
            if not field.has_presence:
                raise ValueError(f"{where}.{key}: null for a field that is never null")
        elif kind == _SCALAR:
            setattr(msg, key, value)
        else:
            setattr(msg, key, _scalar_in(field, value, f"{where}.{key}"))


def _fill_repeated(msg: Message, field: FieldDescriptor, values: Any, path: str) -> None:
    if (msg.DESCRIPTOR.full_name, field.name) in _AS_OBJECT:
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected an object, got {type(values).__name__}")
        values = [list(item) for item in values.items()]
        as_tuples = True
    elif not isinstance(values, (list, tuple)):
        raise ValueError(f"{path}: expected a list, got {type(values).__name__}")
    else:
        as_tuples = (msg.DESCRIPTOR.full_name, field.name) in _AS_TUPLES
    target = getattr(msg, field.name)
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        target.extend(_scalar_in(field, v, f"{path}[{i}]") for i, v in enumerate(values))
        return
    names = None
    for i, v in enumerate(values):
        item = target.add()
        if as_tuples:
            if names is None:
                names = [f.name for f in item.DESCRIPTOR.fields]
            if not isinstance(v, (list, tuple)) or len(v) != len(names):
                raise ValueError(f"{path}[{i}]: expected [{', '.join(names)}]")
            v = dict(zip(names, v))
        _fill(item, v, f"{path}[{i}]")


def _scalar_in(field: FieldDescriptor, value: Any, path: str) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        name = _enum_prefix(field) + str(value).upper()
        number = field.enum_type.values_by_name.get(name)
        if number is None or number.number == 0:
            raise ValueError(f"{path}: {value!r} is not a known {field.enum_type.name}")
        return number.number
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{path}: expected a number, got {value!r}")
        return float(value)
    return value


def _enum_prefix(field: FieldDescriptor) -> str:
    """PlanStatus -> "PLAN_STATUS_": the proto style guide's value prefix."""
    return _enum_prefix_of(field.enum_type.name)


@functools.lru_cache(maxsize=None)
def _enum_prefix_of(name: str) -> str:
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper() + "_"


# How each field of a message type is read back, in proto field order, looked up once per
# type: (name, kind, enum field or None, absent_as_empty).
(_D_SCALAR, _D_PRESENCE, _D_MESSAGE, _D_REPEATED, _D_REPEATED_MESSAGE, _D_AS_TUPLES, _D_AS_OBJECT, _D_AS_LIST,
 _D_NUMBER_OR_WORD) = range(9)
_DICT_TABLES: dict[str, list[tuple[str, int, FieldDescriptor | None, bool]]] = {}
_ENUM_OUT: dict[str, dict[int, str | None]] = {}


def _dict_table(desc: Descriptor) -> list[tuple[str, int, FieldDescriptor | None, bool]]:
    table = _DICT_TABLES.get(desc.full_name)
    if table is None:
        table = []
        for f in desc.fields:
            key = (desc.full_name, f.name)
            if f.is_repeated:
                if f.type != FieldDescriptor.TYPE_MESSAGE:
                    kind = _D_REPEATED
                else:
                    kind = (_D_AS_OBJECT if key in _AS_OBJECT else _D_AS_TUPLES if key in _AS_TUPLES
                            else _D_REPEATED_MESSAGE)
            elif f.type == FieldDescriptor.TYPE_MESSAGE:
                kind = _D_AS_LIST if key in _AS_LIST else _D_MESSAGE
            elif key in _NUMBER_OR_WORD:
                kind = _D_NUMBER_OR_WORD
            elif f.has_presence:
                kind = _D_PRESENCE
            else:
                kind = _D_SCALAR
            table.append((f.name, kind, f if f.type == FieldDescriptor.TYPE_ENUM else None, key in _ABSENT_AS_EMPTY))
        _DICT_TABLES[desc.full_name] = table
    return table


def to_dict(msg: Message) -> dict:
    """A proto message -> its JSON-shaped dict, keys in proto field order."""
    out: dict[str, Any] = {}
    for name, kind, enum, absent_as_empty in _dict_table(msg.DESCRIPTOR):
        value = getattr(msg, name)
        if kind == _D_SCALAR:
            out[name] = value if enum is None else _scalar_out(enum, value)
        elif kind == _D_PRESENCE:
            if not msg.HasField(name):
                out[name] = None
            else:
                out[name] = value if enum is None else _scalar_out(enum, value)
        elif kind == _D_MESSAGE:
            if msg.HasField(name):
                out[name] = to_dict(value)
            else:
                out[name] = {} if absent_as_empty else None
        elif kind == _D_REPEATED:
            out[name] = list(value) if enum is None else [_scalar_out(enum, v) for v in value]
        elif kind == _D_REPEATED_MESSAGE:
            out[name] = [to_dict(v) for v in value]
        elif kind == _D_AS_TUPLES:
            out[name] = [list(to_dict(v).values()) for v in value]
        elif kind == _D_AS_LIST:
            out[name] = list(to_dict(value).values()) if msg.HasField(name) else None
        elif kind == _D_NUMBER_OR_WORD:
            out[name] = _number_or_word(value)
        else:  # _D_AS_OBJECT
            out[name] = dict(tuple(to_dict(v).values()) for v in value)
    return _without_absent_extensions(msg, out)


# Plan fields from 60 on (power and energy) are in every plan, not horizon extensions.
_EVERY_PLAN_FROM = 60
_PLAN_EXTENSIONS = [f.name for f in pb.Plan.DESCRIPTOR.fields if _EXTENSION_FROM <= f.number < _EVERY_PLAN_FROM]


def _without_absent_extensions(msg: Message, out: dict) -> dict:
    full_name = msg.DESCRIPTOR.full_name
    if full_name == "fleetplanner.v1.Plan":
        if not msg.HasField("horizon_hours"):
            drop = _PLAN_EXTENSIONS
        elif not msg.HasField("rollout"):
            drop = ["changes", "rollout"]
        else:
            return out
        return {k: v for k, v in out.items() if k not in drop}
    if full_name == "fleetplanner.v1.Placement" and not msg.HasField("spot"):
        out.pop("spot", None)
    return out


def _number_or_word(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _scalar_out(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        names = _ENUM_OUT.get(field.enum_type.full_name)
        if names is None:
            prefix = len(_enum_prefix(field))
            names = {v.number: v.name[prefix:].lower() if v.number else None for v in field.enum_type.values}
            _ENUM_OUT[field.enum_type.full_name] = names
        return names[value]  # KeyError for a number the enum does not name, as values_by_number
    return value


# ------------------------------------------------------------------ plans
def plan_to_proto(plan: dict) -> pb.Plan:
    """PlanResult.to_dict() -> Plan."""
    return to_message(pb.Plan, plan, "plan")


def plan_from_proto(msg: pb.Plan) -> dict:
    """Plan -> exactly the dict PlanResult.to_dict() gave (same keys, same order)."""
    d = to_dict(msg)
    if d["solver"] is None:
        for key in _WITH_SOLVER:
            del d[key]
    return d


def progress_to_proto(progress: dict) -> pb.Progress:
    return to_message(pb.Progress, progress, "progress")


def reasons_to_proto(reasons: list[dict]) -> pb.Infeasibility:
    return pb.Infeasibility(reasons=[to_message(pb.InfeasibilityReason, r, "reason") for r in reasons])


def reasons_from_proto(msg: pb.Infeasibility) -> list[dict]:
    return [to_dict(r) for r in msg.reasons]


# ------------------------------------------------------------------ workload documents
def struct_to_dict(struct: struct_pb2.Struct) -> dict:
    """A google.protobuf.Struct -> plain dict. Struct numbers are doubles; whole ones
    become ints, so integer fields (replicas, token counts) validate as typed. NaN and
    infinities are kept (the caller rejects them with their field path)."""
    return {k: _value(v) for k, v in struct.fields.items()}


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        n = v.number_value
        return int(n) if math.isfinite(n) and n.is_integer() and abs(n) < 2**53 else n
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return struct_to_dict(v.struct_value)
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    return None  # null_value, or no kind set


def dict_to_struct(data: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s



# ------------------------------------------------------------------ the running fleet
def current_fleet_to_proto(fleet: list[dict]) -> pb.CurrentFleet:
    """[{offer_id, instances, spot?, replicas?: [{service, count, gpus_per_replica?, precision?}]}]
    -> CurrentFleet (strict: unknown keys raise ValueError)."""
    if not isinstance(fleet, (list, tuple)):
        raise ValueError(f"current_fleet: expected a list, got {type(fleet).__name__}")
    return to_message(pb.CurrentFleet, {"instances": list(fleet)}, "current_fleet")


def current_fleet_from_proto(msg: pb.CurrentFleet) -> list[dict]:
    """CurrentFleet -> the workload's `current_fleet` list (defaults left out, so the
    workload schema validates it like a file's)."""
    out = []
    for inst in msg.instances:
        item: dict = {"offer_id": inst.offer_id, "instances": inst.instances}
        if inst.spot:
            item["spot"] = True
        if inst.replicas:
            item["replicas"] = []
            for r in inst.replicas:
                rep: dict = {"service": r.service, "count": r.count}
                if r.gpus_per_replica:
                    rep["gpus_per_replica"] = r.gpus_per_replica
                if r.HasField("precision"):
                    rep["precision"] = r.precision
                item["replicas"].append(rep)
        out.append(item)
    return out

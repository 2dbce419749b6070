"""The base of every document schema (workloads, catalogs, reviews): strict pydantic models
whose errors name the field's dotted path and a fix (`StrictModel.model_validate_with_paths`).
"""

# No `from __future__ import annotations` in the schema modules: pydantic would then evaluate
# every field's annotation string at class creation (~150 compile() calls at each CLI start).

import copy
import functools
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from solver.errors import FieldViolation, InputError
from solver.suggest import did_you_mean


def show_default(value: Any):
    """json_schema_extra for a default_factory field: pydantic leaves such defaults out of the
    JSON Schema, this writes them in (a nested object's default is {}: all its own defaults)."""
    def extra(schema: dict) -> None:
        schema["default"] = copy.deepcopy(value)
    return extra


class StrictModel(BaseModel):
    # strict: numbers must be numbers and booleans booleans. Lax mode took `hours: "8"` and
    # `instances: "6"` but refused `percentile: "99"` (a literal); now a quoted number is
    # refused everywhere, with a message that says so (_quoted_number). Whole numbers are
    # accepted for float fields; an integer field takes no 2.0.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)

    @classmethod
    def model_validate_with_paths(cls, data: Any, prefix: str = ""):
        """Validate, turning pydantic errors into InputError with dotted field paths."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            violations = _merged_branches(errors, [_violation(e, prefix, cls) for e in errors], cls)
            # A union (confidence: "nominal" or a number) reports once per branch: one line per field suffices
            # when the input was a quoted number.
            quoted = {v.field for v in violations if v.message.startswith(QUOTED_NUMBER)}
            violations = [v for v in violations if v.field not in quoted or v.message.startswith(QUOTED_NUMBER)]
            raise InputError(list(dict.fromkeys(violations))) from None

    @field_validator("*", mode="before")
    @classmethod
    def _whole_floats_as_ints(cls, value: Any, info):
        """2.0 where a whole number goes is 2, as lax mode read it (JSON writers such as Python's
        json.dumps write whole floats so); 2.5 and "2" stay errors."""
        if isinstance(value, float) and value.is_integer() and _whole_only(cls, info.field_name):
            return int(value)
        if isinstance(value, dict) and any(isinstance(v, float) for v in value.values()) \
                and _whole_only(cls, info.field_name, in_dict=True):
            return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in value.items()}
        return value


_INTERNAL = ("function-", "tagged-union", "union[", "literal[")
_BUILTIN = {"str": str, "int": int, "float": float, "bool": bool}


def _branch_parts(root: type, loc: tuple) -> frozenset[int]:
    """The positions in an error location that are pydantic's names for a union's branch
    ('str', 'InlineModel', 'dict[str,any]', 'function-after[...]'): they mean nothing to
    users. Found by walking the schema along the location, so that a user's key or an
    unknown field that happens to be spelled like a branch ('SLO', 'bool') stays in the path."""
    out: set[int] = set()
    ann = root
    for i, part in enumerate(loc):
        if ann is None:  # off the schema: only pydantic's own wrapper names are known
            if isinstance(part, str) and part.startswith(_INTERNAL):
                out.add(i)
            continue
        members = _members(ann)
        if len(members) > 1:
            member = _member_for(members, part)
            if member is _NO_MEMBER:
                ann = None
                continue
            out.add(i)
            ann = member
            continue
        ann = members[0] if members else None
        if isinstance(part, str) and part.startswith(_INTERNAL):
            out.add(i)
            continue
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(str(part))
            ann = field.annotation if field is not None else None
        elif typing.get_origin(ann) in (list, tuple) and isinstance(part, int):
            args = typing.get_args(ann)
            ann = args[0] if args else None
        elif typing.get_origin(ann) is dict:
            args = typing.get_args(ann)
            ann = args[1] if len(args) == 2 else None
        else:
            ann = None
    return frozenset(out)


_NO_MEMBER = object()


def _members(annotation) -> list:
    """A union's members other than None (Annotated unwrapped); one element otherwise."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) if a is not type(None) for m in _members(a)]
    return [annotation]


def _member_for(members: list, part):
    """The member of a union that pydantic names `part` (_NO_MEMBER: none; None: one it
    names but the walk cannot follow, e.g. a validator's wrapper)."""
    if not isinstance(part, str):
        return _NO_MEMBER
    for m in members:
        if isinstance(m, type) and issubclass(m, BaseModel) and m.__name__ == part:
            return m
    if part in _BUILTIN and _BUILTIN[part] in members:
        return _BUILTIN[part]
    for prefix, origin in (("dict[", dict), ("list[", list)):
        if part.startswith(prefix):
            return next((m for m in members if typing.get_origin(m) is origin or m is origin), None)
    if part.startswith(_INTERNAL):
        return None
    return _NO_MEMBER


def _path(loc: tuple, prefix: str, root: type) -> str:
    out = prefix
    branches = _branch_parts(root, loc)
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i in branches:
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


_FIXES = {
    "extra_forbidden": "remove it, or check its spelling against `solver-cli schema`",
    "missing": "add it",
    "finite_number": "use a finite number",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value (check the units)",
    "less_than": "use a smaller value (check the units)",
    "literal_error": "use one of the allowed values",
    "int_type": "use a whole number",
    "int_from_float": "use a whole number",
    "float_parsing": "use a number",
    "float_type": "use a number",
    "too_short": "add at least one entry",
    "list_type": "use a list ([...])",
    "model_type": "use an object ({...})",
    "dict_type": "use an object ({...})",
    "string_type": "use a text string in quotes",
    "bool_type": "use true or false",
    "bool_parsing": "use true or false",
    "int_parsing": "use a whole number",
}


def _model_at(root: type, loc: tuple) -> type | None:
    """The pydantic model class that holds the last element of an error location."""
    model: type | None = root
    branches = _branch_parts(root, loc)
    for i, part in enumerate(loc[:-1]):
        if model is None:
            return None
        if isinstance(part, int) or i in branches:
            continue
        field = model.model_fields.get(str(part)) if isinstance(model, type) and issubclass(model, BaseModel) else None
        model = _model_in(field.annotation) if field is not None else (model if str(part) == model.__name__ else None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _model_in(annotation) -> type | None:
    """The first pydantic model inside an annotation (list[X], X | None, dict[str, X], ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


@functools.cache
def _whole_only(model: type, field: str, in_dict: bool = False) -> bool:
    """Whether the field (or, in_dict, its dict's values) takes whole numbers and no fractional
    ones: int, or a Literal of ints (percentile), possibly optional."""
    annotation = model.model_fields[field].annotation
    if in_dict:
        if typing.get_origin(annotation) is not dict:
            return False
        annotation = typing.get_args(annotation)[1]
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    numbers = [a for a in options if a is not type(None)]
    return bool(numbers) and all(
        a is int or (typing.get_origin(a) is Literal and all(type(x) is int for x in typing.get_args(a)))
        for a in numbers)


QUOTED_NUMBER = "a number written as text"
# Error types a quoted number meets in strict mode (a numeric literal such as percentile's too).
_NUMBER_ERRORS = ("int_type", "float_type", "literal_error", "int_parsing", "float_parsing")


def is_number_text(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def quoted_number(value: str) -> tuple[str, str]:
    """The message and fix for a number given in quotes."""
    return (f"{QUOTED_NUMBER} ({value!r}); numbers are not read from strings.",
            f"write the number without quotes: {value.strip()}")


def _violation(err: dict, prefix: str, root: type) -> FieldViolation:
    loc = tuple(err["loc"])
    expected = str((err.get("ctx") or {}).get("expected", ""))
    if (err["type"] in _NUMBER_ERRORS and is_number_text(err.get("input"))
            and not (err["type"] == "literal_error" and "'" in expected)):  # not a literal of words
        return FieldViolation(_path(loc, prefix, root), *quoted_number(err["input"]))
    if err["type"] == "int_type" and type(err.get("input")) is float:
        return FieldViolation(_path(loc, prefix, root), f"{err['input']!r} is not a whole number.", "use a whole number")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    below: list[str] = []
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
        holder = _model_at(root, tuple(err["loc"]))
        if holder is not None:
            # A field of an object one level down, written a level too high, before a near spelling.
            name = str(err["loc"][-1])
            below = _belongs_below(holder, name)
            msg += ("; it belongs in " + " or ".join(f"{f}.{name}" for f in below)) if below else \
                did_you_mean(name, holder.model_fields)
    fix = _FIXES.get(err["type"], "")
    if below:
        fix = "move it into " + " or ".join(_into(f) for f in below)
    if err["type"] in ("model_type", "dict_type"):
        # pydantic's "valid dictionary or instance of CatalogRef" names a class of ours.
        msg = f"an object ({{...}}) is needed here, not {_json_kind(err.get('input'))}"
        if _optional(root, loc):
            fix += ", or leave the field out"
    if "To fix:" in msg:
        msg, fix = (s.strip() for s in msg.split("To fix:", 1))
    if not msg.endswith((".", "?")):
        msg += "."
    if not loc and msg.split(" ", 1)[0] in root.model_fields:
        loc = (msg.split(" ", 1)[0],)  # a whole-document check about one field: name that field
    return FieldViolation(_path(loc, prefix, root), msg, fix)


def _json_kind(value: Any) -> str:
    """What a JSON or YAML value is, in a user's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a text string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "this value"


def _optional(root: type, loc: tuple) -> bool:
    """Whether the field at `loc` may be left out of its object."""
    branches = _branch_parts(root, loc)
    loc = tuple(part for i, part in enumerate(loc) if i not in branches)
    if not loc or isinstance(loc[-1], int):
        return False
    holder = _model_at(root, loc)
    field = holder.model_fields.get(str(loc[-1])) if holder is not None else None
    return field is not None and not field.is_required()


def _belongs_below(holder: type, name: str) -> list[str]:
    """Where an unknown field written one level too high belongs: the paths, below
    `holder`, of the objects that have a field `name` (`demand`, `services[]` for each entry
    of a list, `profile.<key>` for each value of a mapping). None where more than two
    would do: a guess among many helps nobody."""
    found = []
    for field_name, field in holder.model_fields.items():
        inner = _model_in(field.annotation)
        if inner is None or inner is holder or name not in inner.model_fields:
            continue
        found.append(field_name + _container(field.annotation))
    return found if len(found) <= 2 else []


def _container(annotation) -> str:
    """'[]' for a list of objects, '.<key>' for a mapping to objects, '' for one object."""
    for a in _members(annotation):
        origin = typing.get_origin(a)
        if origin in (list, tuple):
            return "[]"
        if origin is dict:
            return ".<key>"
    return ""


# What each type error asks for, in a user's words (to merge a union's branches into one line).
_WANTED = {"string_type": "a text string", "model_type": "an object ({...})", "dict_type": "an object ({...})",
           "list_type": "a list ([...])", "int_type": "a whole number", "float_type": "a number",
           "bool_type": "true or false"}


def _merged_branches(errors: list[dict], violations: list[FieldViolation], root: type) -> list[FieldViolation]:
    """A field whose type is a union (`model`: a library name or an inline object) gets one
    type error per branch: one line that names every kind it takes replaces them."""
    by_field: dict[str, list[int]] = {}
    for i, (err, v) in enumerate(zip(errors, violations)):
        if err["type"] in _WANTED:
            by_field.setdefault(v.field, []).append(i)
    drop: set[int] = set()
    out = list(violations)
    for field, idx in by_field.items():
        wanted = list(dict.fromkeys(_WANTED[errors[i]["type"]] for i in idx))
        if len(wanted) < 2:
            continue
        first = errors[idx[0]]
        fix = "use " + " or ".join(wanted)
        if _optional(root, tuple(first["loc"])):
            fix += ", or leave the field out"
        out[idx[0]] = FieldViolation(field, f"{' or '.join(wanted)} is needed here, not {_json_kind(first.get('input'))}.",
                                     fix)
        drop.update(idx[1:])
    # An object given for a union that takes a string or an object, with errors inside it:
    # the object was meant; "should be a valid string" beside them only misleads.
    inside = {v.field.rsplit(".", 1)[0] for v in violations if "." in v.field}
    for i, (err, v) in enumerate(zip(errors, violations)):
        if err["type"] == "string_type" and isinstance(err.get("input"), dict) and v.field in inside:
            drop.add(i)
    return [v for i, v in enumerate(out) if i not in drop]


def _into(path: str) -> str:
    if path.endswith("[]"):
        return f"each entry of {path[:-2]}"
    if path.endswith(".<key>"):
        return f"each value of {path[:-6]}"
    return path

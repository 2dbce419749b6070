"""Fast construction of frozen dataclasses on hot paths.

A frozen dataclass's generated __init__ sets each field through object.__setattr__
(~0.2-0.3 us a field): a 20-field performance query or estimate costs 5-9 us to make, and
candidate building makes tens of thousands of them. `maker(cls)` returns a function that
makes the same object (equal, same hash, same fields, unfrozen by nothing) by filling its
__dict__ at once. Only for plain frozen dataclasses: no __post_init__, no __slots__, no
InitVar; keyword arguments only, and every field without a default must be given.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def maker(cls: type[T]) -> Callable[..., T]:
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: maker() needs a plain dataclass")
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    factories = {f.name: f.default_factory for f in fields(cls) if f.default_factory is not MISSING}
    count = len(fields(cls))
    new = object.__new__

    def make(**values) -> T:
        obj = new(cls)
        d = obj.__dict__
        d.update(defaults)
        d.update(values)
        if factories:
            for name, factory in factories.items():
                if name not in values:
                    d[name] = factory()
        if len(d) != count:  # a name that is no field, or a field without a default left out
            known = {f.name for f in fields(cls)}
            raise TypeError(f"{cls.__name__}: unknown fields {sorted(set(values) - known)}, missing "
                            f"{sorted(known - d.keys())}")
        return obj

    return make


def stamper(cls: type[T], name: str) -> Callable[[dict, object], T]:
    """A function (template, value) -> the object of `cls` whose fields are the template's
    with `name` set to value: the same object `cls(**template, name=value)` makes, for the
    many objects that differ in one field only (a configuration on each offer of one GPU).
    The template holds every other field (unchecked here: `maker`'s rules, and callers'
    tests compare with the dataclass's own constructor); it is copied, never kept."""
    _check_stampable(cls, name, "stamper")
    new = object.__new__

    def stamp(template: dict, value) -> T:
        obj = new(cls)
        d = obj.__dict__
        d.update(template)
        d[name] = value
        return obj

    return stamp


def stamper_into(cls: type[T], name: str) -> Callable[[Sequence[dict], object, list], None]:
    """`stamper` for many templates at once: a function (templates, value, out) that appends
    to `out` the object of each template with `name` set to value, in order (one call per
    list instead of one per object: candidate building stamps thousands a plan)."""
    _check_stampable(cls, name, "stamper_into")
    new = object.__new__

    def stamp_into(templates: Sequence[dict], value, out: list) -> None:
        for template in templates:
            obj = new(cls)
            d = obj.__dict__
            d.update(template)
            d[name] = value
            out.append(obj)

    return stamp_into


def _check_stampable(cls: type, name: str, what: str) -> None:
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: {what}() needs a plain dataclass")
    if name not in {f.name for f in fields(cls)}:
        raise TypeError(f"{cls.__name__} has no field {name!r}")


def row_maker(cls: type[T]) -> Callable[[Sequence], T]:
    """A function: every field's value, in field order (a tuple) -> the object `cls(*values)`
    makes. For objects made by the thousand from columns zipped into rows (performance
    estimates): no keyword dictionary to build and no defaults to copy first, about half
    `maker`'s time. `maker`'s rules; every field must be given."""
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: row_maker() needs a plain dataclass")
    names = tuple(f.name for f in fields(cls))
    count = len(names)
    new = object.__new__

    def make(values: Sequence) -> T:
        if len(values) != count:  # zip would drop the surplus or leave fields out
            raise TypeError(f"{cls.__name__}: {count} fields, {len(values)} values")
        obj = new(cls)
        obj.__dict__.update(zip(names, values))
        return obj

    return make

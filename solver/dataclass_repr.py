"""`dataclass` as in the standard library, with one shared __repr__ instead of a generated one.

Python 3.11 makes each generated method of a dataclass by compiling source text at class
creation (~0.2-0.3 ms a method). A cold CLI solve creates ~60 dataclasses and prints none
of them: their __repr__ is compiled for nothing, ~2 % of the process's instructions
(valgrind) across all of them. `field_repr` prints exactly what the generated __repr__
would: the class's qualified name and each field with repr=True as name=value!r, in field
order, with "..." for an object met again inside its own repr (per thread), as
dataclasses' recursion guard does. Only __dataclass_params__.repr reads differently (False).
"""

from __future__ import annotations

import dataclasses
import reprlib


@reprlib.recursive_repr()
def field_repr(self) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
    return f"{self.__class__.__qualname__}({shown})"


def dataclass(cls=None, /, **options):
    """dataclasses.dataclass(cls, **options); where it would generate __repr__ (repr=True and
    none in the class body), the class gets field_repr instead."""

    def wrap(cls):
        shared = options.get("repr", True) and "__repr__" not in cls.__dict__
        made = dataclasses.dataclass(cls, **{**options, "repr": False} if shared else options)
        if shared:
            made.__repr__ = field_repr
        return made

    return wrap if cls is None else wrap(cls)

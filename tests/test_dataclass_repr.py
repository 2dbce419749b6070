"""solver.dataclass_repr.dataclass prints what dataclasses.dataclass's generated __repr__ prints."""

import dataclasses
from dataclasses import field

import pytest

from solver.dataclass_repr import dataclass as lean


def _pair(**options):
    """The same class body made by the standard decorator and by the lean one."""

    def body():
        class Point:  # __qualname__: _pair.<locals>.body.<locals>.Point, in both
            x: int
            y: float = 0.5
            hidden: str = field(default="secret", repr=False)
            items: list = field(default_factory=list)
            inner: object = None

        return Point

    return dataclasses.dataclass(body(), **options), lean(body(), **options)


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"slots": True}, {"eq": False}, {"frozen": True, "slots": True}])
def test_the_same_text_as_the_generated_repr(options):
    std, mine = _pair(**options)
    for args in [(1,), (2, float("nan")), (3, 1e-300, "s", [1, "two", (3,)], {"k": None})]:
        assert repr(mine(*args)) == repr(std(*args))
    assert mine.__dataclass_fields__.keys() == std.__dataclass_fields__.keys()
    assert (mine(1) == mine(1)) == (std(1) == std(1))


def test_recursion_and_nesting_read_the_same():
    std, mine = _pair()
    a, b = std(1), mine(1)
    a.items.append(a)
    b.items.append(b)
    a.inner, b.inner = std(2, inner=a), mine(2, inner=b)
    assert repr(b) == repr(a) and "..." in repr(b)


def test_subclasses_and_explicit_reprs():
    std, mine = _pair()

    class Plain(mine):  # not a dataclass: the parent's fields, its own name
        pass

    class PlainStd(std):
        pass

    assert repr(Plain(4)).replace("Plain", "X", 1) == repr(PlainStd(4)).replace("PlainStd", "X", 1)

    @lean
    class Own:
        a: int

        def __repr__(self):
            return "own"

    assert repr(Own(1)) == "own"

    @lean(repr=False)
    class Off:
        a: int

    assert repr(Off(1)).startswith("<") and "Off object at" in repr(Off(1))

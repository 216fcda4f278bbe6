"""Building frozen attrs records fast, for the paths that make one per message.

A frozen attrs class's generated ``__init__`` goes through ``object.__setattr__`` once per
field, and calling a class with keyword arguments builds a dict of them first. On the hot
paths (a flow's commands, the models read from every ``input_required`` result) that is
most of the cost of a small record. The helpers here write the slots through their
member descriptors instead, which is what ``object.__setattr__`` ends up doing, minus the
frozen check and the name lookup:

- :func:`slot_setters` gives the descriptors' setters, for a hand-written keyword-only
  ``__init__`` (the public constructor stays the same, only cheaper);
- :func:`record_maker` gives a positional builder that skips ``__init__`` altogether,
  for code that builds the record from values it has already checked.

Either way the result is an ordinary instance of the class: equality, hashing, ``repr``
and immutability are the class's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs

__all__ = ["record_maker", "slot_setters"]

T = TypeVar("T")

Setter = Callable[[Any, Any], None]
"""Writes one slot of an instance: ``setter(instance, value)``."""


def _slot(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__name__} has no slot {name!r}")


def slot_setters(cls: type, *names: str) -> tuple[Setter, ...]:
    """The setters of the slots ``names`` of the slotted class ``cls``, in that order.

    Raises:
        TypeError: a name is not a slot of ``cls``.
    """
    setters: list[Setter] = []
    for name in names:
        slot = _slot(cls, name)
        if type(slot).__name__ != "member_descriptor":
            raise TypeError(f"{cls.__name__}.{name} is not a slot")
        setters.append(slot.__set__)
    return tuple(setters)


def record_maker(cls: type[T]) -> Callable[..., T]:
    """A function ``make(*values)`` building a ``cls`` from all its fields, in order.

    ``cls`` must be a slotted attrs class whose fields have no validator, converter or
    ``init=False``: the builder runs no ``__init__``, applies no default and checks
    nothing, so every field is given, positionally, in declaration order. The instance is
    equal to the one the class's constructor builds from the same values.

    Raises:
        TypeError: ``cls`` is not such a class.
    """
    fields = attrs.fields(cast(Any, cls))
    for field in fields:
        if field.validator is not None or field.converter is not None or not field.init:
            raise TypeError(f"{cls.__name__}.{field.name} is checked or converted on init")
    if getattr(cls, "__attrs_post_init__", None) is not None:
        raise TypeError(f"{cls.__name__} has an __attrs_post_init__")
    setters = slot_setters(cls, *(field.name for field in fields))
    new = object.__new__
    # One closure per arity: no loop and no argument tuple on the common sizes.
    if len(setters) == 1:
        (s0,) = setters

        def make1(v0: Any) -> T:
            obj = new(cls)
            s0(obj, v0)
            return obj

        return make1
    if len(setters) == 2:
        s0, s1 = setters

        def make2(v0: Any, v1: Any) -> T:
            obj = new(cls)
            s0(obj, v0)
            s1(obj, v1)
            return obj

        return make2
    if len(setters) == 3:
        s0, s1, s2 = setters

        def make3(v0: Any, v1: Any, v2: Any) -> T:
            obj = new(cls)
            s0(obj, v0)
            s1(obj, v1)
            s2(obj, v2)
            return obj

        return make3

    def make(*values: Any) -> T:
        if len(values) != len(setters):
            raise TypeError(f"{cls.__name__} takes {len(setters)} values, got {len(values)}")
        obj = new(cls)
        for setter, value in zip(setters, values, strict=True):
            setter(obj, value)
        return obj

    return make

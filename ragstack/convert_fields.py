"""Mechanical conversion between a domain dataclass and the message of the same shape, by field
name, read from the message's descriptor and the dataclass's type hints: a field added to both
needs no conversion code. Repeated fields become the dataclass's tuple or list, maps its dict, and
nested messages its nested dataclasses. A dataclass field the message lacks is left out (on the
way back it keeps its default); one that needs more than a copy (an enum) is passed in `given`."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

M = TypeVar("M", bound=Message)
T = TypeVar("T")


def to_pb(obj: Any, message: type[M], **given: Any) -> M:
    """`message` built from the dataclass `obj`'s fields it has; `given` overrides."""
    values: dict[str, Any] = {}
    for name, nested, repeated in _to_plan(type(obj), message):
        if name in given:
            continue
        value = getattr(obj, name)
        if nested is None:
            values[name] = list(value) if isinstance(value, tuple) else value
        elif repeated:
            values[name] = [to_pb(v, nested) for v in value]
        elif value is not None:
            values[name] = to_pb(value, nested)
    return message(**values, **given)


def from_pb(pb: Message, cls: type[T], **given: Any) -> T:
    """The dataclass `cls` built from `pb`'s fields of the same names; `given` overrides."""
    values: dict[str, Any] = dict(given)
    for name, container, nested in _from_plan(cls, type(pb)):
        if name in given:
            continue
        value = getattr(pb, name)
        if nested is None:
            values[name] = container(value) if container is not None else value
        elif container is not None:
            values[name] = container(from_pb(v, nested) for v in value)
        elif pb.HasField(name):
            values[name] = from_pb(value, nested)
    return cls(**values)


# What each conversion does, field by field, worked out once per pair of types: a search converts
# dozens of hits a call, and reading descriptors and type hints cost more than the copying.
ToPlan = tuple[tuple[str, type[Message] | None, bool], ...]
FromPlan = tuple[tuple[str, Any, Any], ...]
_to_plans: dict[tuple[type, type[Message]], ToPlan] = {}
_from_plans: dict[tuple[type, type[Message]], FromPlan] = {}


def _to_plan(cls: type, message: type[Message]) -> ToPlan:
    """(name, nested message class or None, repeated) for each field the message also has."""
    plan = _to_plans.get((cls, message))
    if plan is None:
        fields = message.DESCRIPTOR.fields_by_name
        plan = _to_plans[cls, message] = tuple(
            (f.name, _message_of(fields[f.name]), fields[f.name].is_repeated)
            for f in dataclasses.fields(cls)
            if f.name in fields
        )
    return plan


def _from_plan(cls: type, message: type[Message]) -> FromPlan:
    """(name, container (tuple, list, dict) or None, nested dataclass or None) for each field of
    `cls` the message also has."""
    plan = _from_plans.get((cls, message))
    if plan is not None:
        return plan
    fields = message.DESCRIPTOR.fields_by_name
    names = {f.name for f in dataclasses.fields(cls)}
    steps = []
    for name, hint in typing.get_type_hints(cls).items():
        if name not in names or name not in fields:
            continue
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        container = origin if origin in (tuple, list, dict) else None
        if _message_of(fields[name]) is None:
            steps.append((name, container, None))
        elif container in (list, tuple):  # tuple[X, ...]: args[0] is X too
            steps.append((name, container, args[0]))
        else:  # X or X | None
            steps.append((name, None, next(a for a in args if a is not type(None)) if args else hint))
    plan = _from_plans[cls, message] = tuple(steps)
    return plan


def _message_of(field: FieldDescriptor) -> type[Message] | None:
    """The class of a message-typed field (a map is copied as a dict, not as its entries)."""
    if field.message_type is None or field.message_type.GetOptions().map_entry:
        return None
    return GetMessageClass(field.message_type)

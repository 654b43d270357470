"""Mechanical conversion between a domain dataclass and the message of the same shape, by field
name, read from the message's descriptor and the dataclass's type hints: a field added to both
needs no conversion code. Repeated fields become the dataclass's tuple or list, maps its dict, and
nested messages its nested dataclasses. A dataclass field the message lacks is left out (on the
way back it keeps its default); one that needs more than a copy (an enum) is passed in `given`."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

M = TypeVar("M", bound=Message)
T = TypeVar("T")


def to_pb(obj: Any, message: type[M], **given: Any) -> M:
    """`message` built from the dataclass `obj`'s fields it has; `given` overrides."""
    fields = message.DESCRIPTOR.fields_by_name
    values: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.name in given or f.name not in fields:
            continue
        value = getattr(obj, f.name)
        nested = _message_of(fields[f.name])
        if nested is None:
            values[f.name] = list(value) if isinstance(value, tuple) else value
        elif fields[f.name].is_repeated:
            values[f.name] = [to_pb(v, nested) for v in value]
        elif value is not None:
            values[f.name] = to_pb(value, nested)
    return message(**values, **given)


def from_pb(pb: Message, cls: type[T], **given: Any) -> T:
    """The dataclass `cls` built from `pb`'s fields of the same names; `given` overrides."""
    fields = pb.DESCRIPTOR.fields_by_name
    values: dict[str, Any] = dict(given)
    for name, hint in _hints(typing.cast(type, cls)).items():
        if name in given or name not in fields:
            continue
        value = getattr(pb, name)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if _message_of(fields[name]) is None:
            values[name] = origin(value) if origin in (tuple, list, dict) else value
        elif origin in (list, tuple):  # tuple[X, ...]: args[0] is X too
            values[name] = origin(from_pb(v, args[0]) for v in value)
        elif pb.HasField(name):
            values[name] = from_pb(value, next(a for a in args if a is not type(None)) if args else hint)
    return cls(**values)


def _message_of(field: FieldDescriptor) -> type[Message] | None:
    """The class of a message-typed field (a map is copied as a dict, not as its entries)."""
    if field.message_type is None or field.message_type.GetOptions().map_entry:
        return None
    return GetMessageClass(field.message_type)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in typing.get_type_hints(cls).items() if k in names}

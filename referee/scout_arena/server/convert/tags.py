"""Field tags computed from the generated descriptors, for the messages the referee splices.

A serialized field starts with its tag: the varint of ``number << 3 | wire type``. The fast
path (`fast`) writes fields itself, so it takes every tag from here, where each is read from
``scout.v1``'s descriptors when the module is imported: renumbering a field in a ``.proto``
changes the bytes written with it, and changing a field into a kind the fast path does not
write that way (a string into a number, a packed list into messages, an implicit field into
an optional one) stops the import with `FieldKindMismatch` instead of writing wrong bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, TypeAlias

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

if TYPE_CHECKING:
    from google._upb._message import FieldDescriptor as UpbFieldDescriptor

    Field: TypeAlias = FieldDescriptor | UpbFieldDescriptor


class WireType(IntEnum):
    """The two wire types the referee writes (protobuf's encoding guide)."""

    VARINT = 0
    LEN = 2


class FieldKind(IntEnum):
    """How the fast path writes a field, which must be how protobuf writes it."""

    VARINT = 0
    """A singular integer, bool or enum without presence: omitted at zero."""
    OPTIONAL_VARINT = 1
    """A singular integer, bool or enum with presence (``optional``, or in a oneof)."""
    DELIMITED = 2
    """A string, bytes or message, singular or each entry of a repeated one."""
    PACKED = 3
    """A repeated integer or bool, packed: one length-delimited run of varints."""


_VARINT_TYPES = frozenset({
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM})
_DELIMITED_TYPES = frozenset({
    FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE})


class FieldKindMismatch(TypeError):
    """A field the fast path writes is missing, or is not of the kind it writes it as."""


@dataclass(frozen=True)
class FieldTag:
    """One field the fast path writes, and the tag it writes it with."""

    message: str
    field: str
    kind: FieldKind
    tag: bytes


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative ``value``."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_kind(field: Field) -> FieldKind | None:
    """How protobuf writes ``field``, or None for a kind the fast path never writes."""
    if field.type in _DELIMITED_TYPES:
        return FieldKind.DELIMITED
    if field.type not in _VARINT_TYPES:
        return None
    if field.is_repeated:
        return FieldKind.PACKED if field.is_packed else None
    return FieldKind.OPTIONAL_VARINT if field.has_presence else FieldKind.VARINT


def field_tag(field: Field) -> bytes:
    """The serialized tag of ``field`` as protobuf writes it (packed lists are delimited)."""
    kind = field_kind(field)
    wire = WireType.VARINT if kind in (FieldKind.VARINT, FieldKind.OPTIONAL_VARINT) \
        else WireType.LEN
    return varint(field.number << 3 | wire)


class TagTable:
    """The tags one encoder uses, each checked against the kind it is written as; `used`
    lists them all (a test compares each with the bytes protobuf itself serializes)."""

    def __init__(self) -> None:
        self.used: list[FieldTag] = []

    def tag(self, message: type[Message], name: str, kind: FieldKind) -> bytes:
        descriptor = message.DESCRIPTOR
        field = descriptor.fields_by_name.get(name)
        if field is None:
            raise FieldKindMismatch(f"{descriptor.full_name} has no field {name!r}")
        actual = field_kind(field)
        if actual is not kind:
            raise FieldKindMismatch(
                f"{descriptor.full_name}.{name} is written as {kind.name}, but the descriptor "
                f"makes it {actual.name if actual is not None else 'a kind never spliced'}")
        tag = field_tag(field)
        self.used.append(FieldTag(descriptor.full_name, name, kind, tag))
        return tag

    def varint(self, message: type[Message], name: str) -> bytes:
        return self.tag(message, name, FieldKind.VARINT)

    def optional_varint(self, message: type[Message], name: str) -> bytes:
        return self.tag(message, name, FieldKind.OPTIONAL_VARINT)

    def delimited(self, message: type[Message], name: str) -> bytes:
        return self.tag(message, name, FieldKind.DELIMITED)

    def packed(self, message: type[Message], name: str) -> bytes:
        return self.tag(message, name, FieldKind.PACKED)

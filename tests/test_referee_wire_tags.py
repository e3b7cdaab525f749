"""The referee's fast path takes its field tags from the generated descriptors, never from
literals, and its caches are bounded: renumbering or retyping a field in a .proto changes (or
refuses) the bytes it writes instead of breaking them silently."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from scout.v1 import arena_pb2, game_pb2
from scout_arena.server.convert import fast
from scout_arena.server.convert.cache import BoundedCache
from scout_arena.server.convert.tags import FieldKind, FieldKindMismatch, TagTable, varint


def _serialized_alone(cls: type[Message], name: str) -> bytes:
    """``cls`` with only field ``name`` set to a value other than its default, serialized by
    protobuf itself: its bytes start with the field's tag."""
    message = cls()
    field = cls.DESCRIPTOR.fields_by_name[name]
    value: object = {FieldDescriptor.TYPE_STRING: "x", FieldDescriptor.TYPE_BYTES: b"x",
                     FieldDescriptor.TYPE_BOOL: True}.get(field.type, 1)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        container = getattr(message, name)
        if field.is_repeated:
            container.add()
        else:
            container.SetInParent()
    elif field.is_repeated:
        getattr(message, name).append(value)
    else:
        setattr(message, name, value)
    return message.SerializeToString()


def _message_class(full_name: str) -> type[Message]:
    pool = descriptor_pool.Default()
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _read_varint(data: bytes) -> int:
    value = 0
    for shift, byte in enumerate(data):
        value |= (byte & 0x7F) << (7 * shift)
    return value


def test_every_tag_the_fast_path_writes_is_the_one_protobuf_serializes() -> None:
    assert len(fast.TAGS.used) >= 30
    for used in fast.TAGS.used:
        cls = _message_class(used.message)
        number = cls.DESCRIPTOR.fields_by_name[used.field].number
        wire_type = 0 if used.kind in (FieldKind.VARINT, FieldKind.OPTIONAL_VARINT) else 2
        assert _read_varint(used.tag) == number << 3 | wire_type, used
        assert _serialized_alone(cls, used.field).startswith(used.tag), used


def test_the_fast_path_writes_every_field_of_the_messages_it_builds_whole() -> None:
    """A field added to one of these messages in its .proto must be written by the fast path
    too (the byte-identity tests compare it with the object mapping's messages)."""
    written: dict[str, set[str]] = {}
    for used in fast.TAGS.used:
        written.setdefault(used.message, set()).add(used.field)
    for cls in (game_pb2.Observation, arena_pb2.DecisionRequest, game_pb2.PublicAction,
                arena_pb2.PublicEvent):
        assert written[cls.DESCRIPTOR.full_name] == set(cls.DESCRIPTOR.fields_by_name), cls


def test_the_fast_path_holds_no_literal_bytes() -> None:
    """Tags (and the values written beside them) are computed, not spelled as bytes."""
    source = Path(fast.__file__).read_text()
    literals = [node.value for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Constant) and isinstance(node.value, bytes)]
    assert set(literals) <= {b""}, literals


def _renumbered_pool(changes: dict[str, tuple[int, int | None]]) -> descriptor_pool.DescriptorPool:
    """A pool holding game.proto with fields of Observation given new numbers (and types)."""
    proto = descriptor_pb2.FileDescriptorProto()
    game_pb2.DESCRIPTOR.CopyToProto(proto)
    for message in proto.message_type:
        if message.name != "Observation":
            continue
        for field in message.field:
            if field.name in changes:
                number, kind = changes[field.name]
                field.number = number
                if kind is not None:
                    field.type = kind  # type: ignore[assignment]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


def test_a_renumbered_field_is_written_with_the_tag_of_its_new_number() -> None:
    pool = _renumbered_pool({"captured_counts": (111, None), "history": (3000, None),
                             "seat": (20, None)})
    renumbered = message_factory.GetMessageClass(pool.FindMessageTypeByName("scout.v1.Observation"))
    table = TagTable()
    for name, write, kind in (("captured_counts", table.packed, FieldKind.PACKED),
                              ("history", table.delimited, FieldKind.DELIMITED),
                              ("seat", table.varint, FieldKind.VARINT)):
        tag = write(renumbered, name)
        original = TagTable().tag(game_pb2.Observation, name, kind)
        assert tag != original
        assert _serialized_alone(renumbered, name).startswith(tag)
    assert table.tag(renumbered, "history", FieldKind.DELIMITED) == varint(3000 << 3 | 2)


def test_a_field_of_another_kind_than_the_fast_path_writes_stops_the_import() -> None:
    table = TagTable()
    with pytest.raises(FieldKindMismatch, match="match_id"):
        table.varint(game_pb2.Observation, "match_id")
    with pytest.raises(FieldKindMismatch, match="active_owner"):
        table.varint(game_pb2.Observation, "active_owner")  # optional: written even at 0
    with pytest.raises(FieldKindMismatch, match="no field"):
        table.packed(game_pb2.Observation, "hand_size")
    retyped = _renumbered_pool({"scores": (14, FieldDescriptor.TYPE_STRING)})
    cls = message_factory.GetMessageClass(retyped.FindMessageTypeByName("scout.v1.Observation"))
    with pytest.raises(FieldKindMismatch, match="scores"):
        table.packed(cls, "scores")
    assert table.used == []


def test_a_bounded_cache_never_outgrows_its_size_and_keeps_the_recent_entries() -> None:
    cache: BoundedCache[int, str] = BoundedCache(8)
    for i in range(100):
        assert cache.keep(i, str(i)) == str(i)
        assert len(cache) <= 8
    assert cache.entries.get(99) == "99" and cache.entries.get(98) == "98"
    assert cache.entries.get(0) is None
    with pytest.raises(ValueError):
        BoundedCache(1)

"""Hypothesis strategies for hostile A2A requests, built from the generated descriptors.

`requests(method)` draws what one call of an A2AService method sends, as a `Wire`: a message of the
method's input type (every field walked from its descriptor, with hostile values), or raw bytes made
from one (truncated, with unknown fields, padded to the size limit), or bytes that are no message at all.
`call_metadata()` draws request headers gRPC's client accepts. Nothing here talks to a server.

Ids, page tokens and config ids are sometimes placeholders (`{{task:open}}` ...) that the test fills
with the seeded values just before a request is encoded. Webhook URLs are never anything but loopback
(or not a URL at all): a generated config must not make the server dial anything else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from conftest import DEAD_HOOK
from google.protobuf import message_factory, struct_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from a2a_grpc.ext import timestamp, traceability
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import A2A_SERVICE, RESUME_EXTENSION_URI

MAX_DEPTH = 4  # message fields below this depth are left unset (Struct and Value nest on their own)
MAX_MESSAGE_BYTES = 1024 * 1024  # the server's grpc.max_receive_message_length in the hostile suite

# The placeholders a request may hold, filled by the test with the seeded values (see `fill`).
TASK_DONE = "{{task:done}}"  # a COMPLETED task of the main caller
TASK_OPEN = "{{task:open}}"  # an INPUT_REQUIRED task of the main caller
CONTEXT_DONE = "{{context:done}}"
CONTEXT_OPEN = "{{context:open}}"
CONFIG_ID = "{{config}}"  # a push config of TASK_DONE
TASK_PAGE = "{{task-page}}"  # a real ListTasks next_page_token
CONFIG_PAGE = "{{config-page}}"  # a real ListTaskPushNotificationConfigs next_page_token
PLACEHOLDERS = (TASK_DONE, TASK_OPEN, CONTEXT_DONE, CONTEXT_OPEN, CONFIG_ID, TASK_PAGE, CONFIG_PAGE)

Fill: TypeAlias = Callable[[Message], Message]
Metadata: TypeAlias = tuple[tuple[str, str | bytes], ...]

# ---- scalar values ---------------------------------------------------------------------------------

ODD_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\u202e\u200b",
    "\ufeff",
    "\U0001f600",
    "..",
    "../../../etc/passwd",
    "%s%d%n",
    "{0}{}",
    "' OR 1=1 --",
    "\\",
    "\r\n",
    "null",
    "NaN",
    "-1",
    "9" * 30,
]
OUTCOMES = ["complete", "input", "fail", "reject", "auth", "input please"]  # what tests/agents.OutcomeAgent reads
HUGE_LENGTHS = [300, 5_000, 70_000, 300_000]  # characters; a request up to MAX_MESSAGE_BYTES is served


def huge_text() -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["x", "\u00e9", "\U0001f600"]), st.sampled_from(HUGE_LENGTHS)).map(
        lambda pair: pair[0] * (pair[1] // len(pair[0].encode()))
    )


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=24), huge_text())


def _with_placeholder(names: list[str]) -> st.SearchStrategy[str]:
    """A placeholder alone, or with hostile text around it (a real id or token, tampered with)."""
    refs = st.sampled_from(names)
    return st.one_of(
        refs,
        st.tuples(refs, st.sampled_from(["x", " ", "\x00", "=", "/..", "%00"])).map("".join),
        st.tuples(st.sampled_from(["x", " ", "tasks/"]), refs).map("".join),
    )


def ids() -> st.SearchStrategy[str]:
    return st.one_of(_with_placeholder([TASK_DONE, TASK_OPEN, CONTEXT_DONE, CONTEXT_OPEN, CONFIG_ID]), hostile_text())


def page_tokens() -> st.SearchStrategy[str]:
    base64ish = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", max_size=40)
    return st.one_of(_with_placeholder([TASK_PAGE, CONFIG_PAGE]), base64ish, hostile_text())


SAFE_URLS = [
    DEAD_HOOK,
    "",
    "/relative/hook",
    "http://",
    "https://",
    "http:///no-host",
    "ftp://127.0.0.1/hook",
    "javascript:alert(1)",
    "http://user:pw@127.0.0.1:9/hook",
    "https://127.0.0.1:9/hook",
    "http://[::ffff:127.0.0.1]:9/hook",
    "http://127.0.0.1:99999/hook",
    "http://127.0.0.1:9/\x00",
    "HTTP://127.0.0.1:9/hook",
]


def webhook_urls() -> st.SearchStrategy[str]:
    """Only loopback destinations, or strings that are no http(s) URL with a host at all."""
    paths = st.one_of(st.text(max_size=20), st.sampled_from([2_100, 70_000]).map(lambda size: "a" * size))
    return st.one_of(st.sampled_from(SAFE_URLS), paths.map(lambda path: "http://127.0.0.1:9/" + path))


INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)
INT_RANGES = {
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_INT64: INT64,
    FieldDescriptor.TYPE_SINT64: INT64,
    FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT32: UINT32,
    FieldDescriptor.TYPE_FIXED32: UINT32,
    FieldDescriptor.TYPE_UINT64: UINT64,
    FieldDescriptor.TYPE_FIXED64: UINT64,
}


def integers(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [value for value in (0, 1, -1, 50, 100, 101, low, low + 1, high - 1, high) if low <= value <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


# ---- JSON values and the other google.protobuf well-known types -------------------------------------

Json: TypeAlias = bool | float | str | list[Any] | dict[str, Any] | None

# Extensions whose data (in request, Message or Part metadata, under its key) the server checks against a
# JSON schema when a call activates them; the hostile suite's agent declares them.
SCHEMA_EXTENSIONS = (timestamp.EXTENSION, traceability.EXTENSION)
DATA_KEYS = [extension.data_key for extension in SCHEMA_EXTENSIONS]
PAYLOADS: list[Json] = [
    "2024-02-29T23:59:60Z",
    "9999-12-31T23:59:59.999999999Z",
    {"trace_id": "t", "steps": []},
    {"trace_id": "t", "steps": [{}]},
    {"trace_id": "t", "steps": [{"step_id": "s", "trace": {"trace_id": "u", "steps": []}}]},
    {"trace_id": None, "steps": "no"},
]
ODD_NUMBERS = [math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 2.0**53 + 1]


def _json() -> st.SearchStrategy[Json]:
    leaves: st.SearchStrategy[Json] = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(ODD_NUMBERS),
        hostile_text(),
        st.sampled_from(PAYLOADS),
    )
    keys = st.one_of(st.text(max_size=8), st.sampled_from(DATA_KEYS))
    return st.recursive(
        leaves,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
        max_leaves=8,
    )


def _nested(depth: int, as_list: bool) -> Json:
    """`depth` objects (or arrays) inside each other: the server refuses more than 24 (MAX_JSON_NESTING)."""
    value: Json = "bottom"
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


def json_values() -> st.SearchStrategy[Json]:
    # Up to 30: protobuf-python copies no message nested deeper than its decoder takes (100 levels);
    # `deep_requests` sends deeper nesting as bytes.
    deep = st.tuples(st.sampled_from([23, 24, 25, 26, 30]), st.booleans())
    return st.one_of(_json(), deep.map(lambda pair: _nested(*pair)))


def to_value(data: Json) -> struct_pb2.Value:
    value = struct_pb2.Value()
    _set_value(value, data)
    return value


def _set_value(value: struct_pb2.Value, data: Json) -> None:
    if data is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, float):
        value.number_value = data
    elif isinstance(data, str):
        value.string_value = data
    elif isinstance(data, list):
        items = value.list_value
        items.SetInParent()
        for item in data:
            _set_value(items.values.add(), item)
    else:
        _fill_struct(value.struct_value, data)


def _fill_struct(struct: struct_pb2.Struct, data: dict[str, Any]) -> None:
    struct.SetInParent()
    for key, item in data.items():
        _set_value(struct.fields[key], item)


def to_struct(data: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    _fill_struct(struct, data)
    return struct


def structs() -> st.SearchStrategy[struct_pb2.Struct]:
    """Objects, or one value under a plain key or an extension's data key."""
    keyed = st.tuples(st.sampled_from(["v", *DATA_KEYS]), json_values()).map(lambda pair: {pair[0]: pair[1]})
    return st.one_of(keyed, json_values()).map(lambda data: to_struct(data if isinstance(data, dict) else {"v": data}))


def timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    seconds = integers(*INT64) | st.sampled_from([-62_135_596_801, -62_135_596_800, 253_402_300_799, 253_402_300_800])
    nanos = integers(*INT32) | st.sampled_from([999_999_999, 1_000_000_000])
    return st.builds(timestamp_pb2.Timestamp, seconds=seconds, nanos=nanos)


WELL_KNOWN: dict[str, Callable[[], st.SearchStrategy[Any]]] = {
    "google.protobuf.Struct": structs,
    "google.protobuf.Value": lambda: json_values().map(to_value),
    "google.protobuf.ListValue": lambda: st.lists(json_values(), max_size=3).map(
        lambda items: to_value(items).list_value
    ),
    "google.protobuf.Timestamp": timestamps,
}

# ---- messages from descriptors ---------------------------------------------------------------------

# Fields whose values mean something to the server, by name: they get values it can act on as well.
BY_NAME: dict[str, Callable[[], st.SearchStrategy[Any]]] = {
    "id": ids,
    "task_id": ids,
    "context_id": ids,
    "reference_task_ids": ids,
    "page_token": page_tokens,
    "url": webhook_urls,
    "text": lambda: st.one_of(st.sampled_from(OUTCOMES), hostile_text()),
    "extensions": lambda: st.one_of(st.sampled_from([RESUME_EXTENSION_URI, *DATA_KEYS, timestamp.URI]), hostile_text()),
}


def field_values(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any] | None:
    """Values for one (non-repeated) occurrence of `field`; None where the depth bound stops."""
    if field.name in BY_NAME and field.type == FieldDescriptor.TYPE_STRING:
        return BY_NAME[field.name]()
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        sub = field.message_type
        assert sub is not None
        if sub.full_name in WELL_KNOWN:
            return WELL_KNOWN[sub.full_name]()
        return messages(sub, depth + 1) if depth < MAX_DEPTH else None
    if kind == FieldDescriptor.TYPE_STRING:
        return hostile_text()
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), huge_text().map(str.encode))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None
        return st.one_of(st.sampled_from([value.number for value in enum.values]), integers(*INT32))
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return st.floats()
    if kind == FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32)
    return integers(*INT_RANGES[kind])


def _repeated(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """A few values, or one value many times (an extreme count within the size limit)."""
    many = st.tuples(values, st.sampled_from([200, 2_000])).map(lambda pair: [pair[0]] * _bounded(*pair))
    return st.one_of(st.lists(values, max_size=4), many)


def _bounded(value: Any, count: int) -> int:
    """`count`, or fewer copies of `value` when that many would pass twice the message size limit."""
    size = value.ByteSize() if isinstance(value, Message) else len(value) if isinstance(value, str | bytes) else 8
    return max(1, min(count, 2 * MAX_MESSAGE_BYTES // max(size, 1)))


def _map_entries(field: FieldDescriptor, depth: int) -> st.SearchStrategy[dict[Any, Any]] | None:
    entry = field.message_type
    assert entry is not None
    keys = field_values(entry.fields_by_name["key"], depth)
    values = field_values(entry.fields_by_name["value"], depth)
    if keys is None or values is None:
        return None
    return st.dictionaries(keys, values, max_size=4)


def _is_map(field: FieldDescriptor) -> bool:
    sub = field.message_type
    return sub is not None and sub.GetOptions().map_entry


_MESSAGES: dict[tuple[str, int], st.SearchStrategy[Message]] = {}


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of `descriptor`'s type: every field optionally set, to any value its type can carry."""
    key = (descriptor.full_name, depth)
    if key not in _MESSAGES:
        optional: dict[str, st.SearchStrategy[Any]] = {}
        for field in descriptor.fields:
            values: st.SearchStrategy[Any] | None
            if _is_map(field):
                values = _map_entries(field, depth)
            else:
                values = field_values(field, depth)
                if values is not None and field.is_repeated:
                    values = _repeated(values)
            if values is not None:
                optional[field.name] = values
        cls = message_factory.GetMessageClass(descriptor)
        _MESSAGES[key] = st.fixed_dictionaries({}, optional=optional).map(lambda chosen: build(cls, descriptor, chosen))
    return _MESSAGES[key]


def build(cls: type[Message], descriptor: Descriptor, chosen: Mapping[str, Any]) -> Message:
    message = cls()
    for name, value in chosen.items():
        field = descriptor.fields_by_name[name]
        target = getattr(message, name)
        if _is_map(field):
            for key, item in value.items():
                if isinstance(item, Message):
                    target[key].CopyFrom(item)
                else:
                    target[key] = item
        elif field.is_repeated:
            target.extend(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


def fill(message: Message, values: Mapping[str, str]) -> Message:
    """A copy of `message` with every placeholder in its A2A string fields replaced by its value."""
    filled = type(message)()
    filled.CopyFrom(message)
    _fill_in_place(filled, values)
    return filled


def _fill_in_place(message: Message, values: Mapping[str, str]) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                items = getattr(message, field.name)
                items[:] = [_replace(item, values) for item in items]
            else:
                setattr(message, field.name, _replace(value, values))
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(field):
            sub = field.message_type
            if sub is None or not sub.full_name.startswith("lf.a2a."):
                continue
            for item in value if field.is_repeated else (value,):
                _fill_in_place(item, values)


def _replace(text: str, values: Mapping[str, str]) -> str:
    if "{{" not in text:
        return text
    for name, value in values.items():
        text = text.replace(name, value)
    return text


# ---- what goes on the wire -------------------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


@dataclass(frozen=True)
class Wire:
    """One request body: `message` (placeholders filled, then encoded) changed as `form` says, or `data`.

    forms: "encoded" as is; "truncated" cut to its first `cut` bytes (modulo its length); "unknown"
    with `data` (unknown fields) appended, or prepended when `cut` is 1; "padded" with an unknown field
    that brings it to MAX_MESSAGE_BYTES + `cut` bytes; "bytes" is `data` alone.
    """

    form: str
    message: Message | None = None
    cut: int = 0
    data: bytes = b""

    def encode(self, fill_placeholders: Fill) -> bytes:
        if self.message is None:
            return self.data
        encoded = fill_placeholders(self.message).SerializeToString()
        if self.form == "truncated":
            return encoded[: self.cut % len(encoded)] if encoded else b""
        if self.form == "unknown":
            return self.data + encoded if self.cut == 1 else encoded + self.data
        if self.form == "padded":
            return encoded + padding(MAX_MESSAGE_BYTES + self.cut - len(encoded))
        return encoded

    def __repr__(self) -> str:
        shown = "" if self.message is None else f", {type(self.message).__name__}({_short(self.message)})"
        return (
            f"Wire({self.form!r}{shown}, cut={self.cut}, data={self.data[:80]!r}{'...' if len(self.data) > 80 else ''})"
        )


def _short(message: Message) -> str:
    text = str(message).replace("\n", " ")
    return text if len(text) <= 400 else text[:400] + f"... ({len(text)} chars)"


PADDING_FIELD = 536_870_911  # the largest field number: unknown to every A2A message


def padding(size: int) -> bytes:
    """An unknown length-delimited field of exactly `size` bytes (b"" when `size` is too small for one)."""
    head = tag(PADDING_FIELD, 2)
    for length_bytes in range(1, 6):
        length = size - len(head) - length_bytes
        if length >= 0 and len(varint(length)) == length_bytes:
            return head + varint(length) + b"\x00" * length
    return b""


def _declared_numbers(descriptor: Descriptor) -> set[int]:
    return {field.number for field in descriptor.fields}


def unknown_fields(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """Fields `descriptor` does not declare: every wire type, valid or not, with a fitting payload or none."""
    numbers = st.one_of(st.integers(1, 50), st.sampled_from([1000, 19_000, 19_999, 2**29 - 1])).filter(
        lambda number: number not in _declared_numbers(descriptor)
    )
    one = st.tuples(numbers, st.integers(0, 7), st.binary(max_size=16)).map(lambda spec: _field(*spec))
    return st.lists(one, min_size=1, max_size=4).map(b"".join)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    if wire_type == 0:
        return tag(number, 0) + varint(int.from_bytes(payload[:9] or b"\x00", "little"))
    if wire_type == 1:
        return tag(number, 1) + payload[:8].ljust(8, b"\x00")
    if wire_type == 2:
        return tag(number, 2) + varint(len(payload)) + payload
    if wire_type == 3:  # a group: its end follows, or not
        return tag(number, 3) + (tag(number, 4) if payload[:1] != b"\x01" else b"")
    if wire_type == 5:
        return tag(number, 5) + payload[:4].ljust(4, b"\x00")
    return tag(number, wire_type) + payload  # 4 (an end of group no group opened), 6 and 7 (no such type)


def field_soup(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """Declared field numbers with wrong wire types and payloads: strings that are not UTF-8, lengths
    past the end, varints longer than ten bytes, negative lengths."""
    numbers = st.one_of(st.sampled_from(sorted(_declared_numbers(descriptor)) or [1]), st.integers(0, 20))
    odd = st.sampled_from(
        [
            b"\xff\xfe\xfd",  # not UTF-8
            b"\xc0\x80",  # overlong NUL
            b"\xed\xa0\x80",  # a surrogate
            b"\x80" * 11 + b"\x01",  # a varint too long
            b"\xff\xff\xff\xff\x0f",  # a length of 4 GiB
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # -1 as a length
        ]
    )
    entry = st.one_of(
        st.tuples(numbers, st.integers(0, 7), st.binary(max_size=12)).map(lambda spec: _field(*spec)),
        st.tuples(numbers, odd).map(lambda pair: tag(pair[0], 2) + varint(len(pair[1])) + pair[1]),
        st.tuples(numbers, st.integers(0, 7), odd).map(lambda spec: tag(spec[0], spec[1]) + spec[2]),
    )
    return st.lists(entry, min_size=1, max_size=5).map(b"".join)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload


def deep_json(depth: int) -> bytes:
    """A google.protobuf.Value holding `depth` lists inside each other, encoded by hand."""
    value = _length_delimited(3, b"bottom")  # Value.string_value
    for _ in range(depth):
        value = _length_delimited(6, _length_delimited(1, value))  # Value.list_value.values[0]
    return value


def deep_groups(depth: int) -> bytes:
    """Unknown groups nested `depth` deep: a parser that keeps unknown fields walks every level."""
    return tag(PADDING_FIELD, 3) * depth + tag(PADDING_FIELD, 4) * depth


def deep_requests(method: MethodDescriptor) -> st.SearchStrategy[Wire]:
    """Requests nested past the decoder's depth limit (100 messages), which no Python message can hold."""
    depths = st.sampled_from([34, 50, 99, 100, 101, 1_000, 10_000])
    groups = depths.map(lambda depth: Wire("bytes", data=deep_groups(depth)))
    if method.input_type.full_name != a2a_pb2.SendMessageRequest.DESCRIPTOR.full_name:
        return groups
    head = a2a_pb2.Message(message_id="m-deep", role=a2a_pb2.ROLE_USER).SerializeToString()

    def send(depth: int) -> Wire:
        part = _length_delimited(4, deep_json(depth))  # Part.data
        return Wire("bytes", data=_length_delimited(2, head + _length_delimited(5, part)))

    return st.one_of(groups, depths.map(send))


# Per method: a request the server accepts, so that hostile fields merged into it reach past validation.
def valid_request(method: MethodDescriptor) -> Message:
    cls = message_factory.GetMessageClass(method.input_type)
    message_fields: dict[str, Any] = {
        "message_id": "m-hostile",
        "role": a2a_pb2.ROLE_USER,
        "parts": [a2a_pb2.Part(text="complete")],
    }
    bases: dict[str, dict[str, Any]] = {
        "SendMessage": {"message": a2a_pb2.Message(**message_fields)},
        "SendStreamingMessage": {"message": a2a_pb2.Message(**message_fields)},
        "GetTask": {"id": TASK_DONE},
        "ListTasks": {},
        "CancelTask": {"id": TASK_OPEN},
        "SubscribeToTask": {"id": TASK_OPEN},
        "CreateTaskPushNotificationConfig": {"task_id": TASK_DONE, "url": DEAD_HOOK},
        "GetTaskPushNotificationConfig": {"task_id": TASK_DONE, "id": CONFIG_ID},
        "ListTaskPushNotificationConfigs": {"task_id": TASK_DONE},
        "DeleteTaskPushNotificationConfig": {"task_id": TASK_DONE, "id": CONFIG_ID},
        "GetExtendedAgentCard": {},
    }
    return cls(**bases[method.name])


def _merged(base: Message, extra: Message) -> Message:
    merged = type(base)()
    merged.CopyFrom(base)
    merged.MergeFrom(extra)
    return merged


FieldPath: TypeAlias = tuple[FieldDescriptor, ...]


def field_paths(descriptor: Descriptor, prefix: FieldPath = ()) -> Iterator[FieldPath]:
    """Every field of `descriptor` and, within the depth bound, of the A2A messages it holds (a repeated
    one through its first element)."""
    for field in descriptor.fields:
        path = (*prefix, field)
        yield path
        sub = field.message_type
        if sub is not None and sub.full_name.startswith("lf.a2a.") and not _is_map(field) and len(path) < MAX_DEPTH:
            yield from field_paths(sub, path)


def _path_values(path: FieldPath) -> st.SearchStrategy[Any] | None:
    field, depth = path[-1], len(path) - 1
    if _is_map(field):
        return _map_entries(field, depth)
    values = field_values(field, depth)
    return _repeated(values) if values is not None and field.is_repeated else values


def with_field(base: Message, path: FieldPath, value: Any) -> Message:
    """A copy of `base` with the field at `path` set to `value` (a repeated field's items replaced)."""
    message = type(base)()
    message.CopyFrom(base)
    target: Any = message
    for field in path[:-1]:
        if field.is_repeated:
            items = getattr(target, field.name)
            target = items[0] if len(items) else items.add()
        else:
            target = getattr(target, field.name)
    last = path[-1]
    current = getattr(target, last.name)
    if _is_map(last):
        current.clear()
        for key, item in value.items():
            if isinstance(item, Message):
                current[key].CopyFrom(item)
            else:
                current[key] = item
    elif last.is_repeated:
        del current[:]
        current.extend(value)
    elif last.type == FieldDescriptor.TYPE_MESSAGE:
        current.CopyFrom(value)
    else:
        setattr(target, last.name, value)
    return message


def mutations(descriptor: Descriptor, base: Message) -> st.SearchStrategy[Message]:
    """`base` (a request the server accepts) with one field, at any depth, set to a hostile value."""
    choices: list[st.SearchStrategy[Message]] = []
    for path in field_paths(descriptor):
        values = _path_values(path)
        if values is not None:
            choices.append(_setting(base, path, values))
    return st.one_of(choices)


def _setting(base: Message, path: FieldPath, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Message]:
    return values.map(lambda value: with_field(base, path, value))


def requests(method: MethodDescriptor) -> st.SearchStrategy[Wire]:
    """What one call of `method` sends (see `Wire`). Most are encoded messages: a valid request with one
    field changed, or a message of random fields (alone, or merged into the valid one); then broken
    encodings of those; then bytes that are no such message (another method's request, random bytes,
    declared fields with the wrong wire types, nesting past the decoder's limit)."""
    descriptor = method.input_type
    base = valid_request(method)
    changed = mutations(descriptor, base)
    hostile = messages(descriptor)
    shaped = st.one_of(changed, hostile, hostile.map(lambda extra: _merged(base, extra)))
    others = [m.input_type for m in A2A_SERVICE.methods if m.input_type.full_name != descriptor.full_name]
    garbage = st.one_of(
        st.sampled_from(others).flatmap(messages).map(lambda message: Wire("encoded", message)),
        st.binary(max_size=256).map(lambda data: Wire("bytes", data=data)),
        field_soup(descriptor).map(lambda data: Wire("bytes", data=data)),
        deep_requests(method),
    )
    return st.one_of(
        changed.map(lambda message: Wire("encoded", message)),
        changed.map(lambda message: Wire("encoded", message)),
        shaped.map(lambda message: Wire("encoded", message)),
        st.tuples(shaped, st.integers(0, 2**16)).map(lambda pair: Wire("truncated", pair[0], cut=pair[1])),
        st.tuples(shaped, unknown_fields(descriptor), st.integers(0, 1)).map(
            lambda spec: Wire("unknown", spec[0], cut=spec[2], data=spec[1])
        ),
        st.tuples(shaped, st.sampled_from([-1, 0, 1])).map(lambda pair: Wire("padded", pair[0], cut=pair[1])),
        garbage,
    )


def extension_data(method: MethodDescriptor) -> st.SearchStrategy[Wire]:
    """A valid request of `method` (SendMessage or SendStreamingMessage) carrying any JSON value as an
    extension's data, in the request's, the message's or its part's metadata."""
    base = valid_request(method)
    assert isinstance(base, a2a_pb2.SendMessageRequest)

    def placed(spec: tuple[str, str, Json]) -> Wire:
        place, key, data = spec
        request = a2a_pb2.SendMessageRequest()
        request.CopyFrom(base)
        places: dict[str, a2a_pb2.SendMessageRequest | a2a_pb2.Message | a2a_pb2.Part] = {
            "request": request,
            "message": request.message,
            "part": request.message.parts[0],
        }
        _set_value(places[place].metadata.fields[key], data)
        return Wire("encoded", request)

    numbers = st.sampled_from(ODD_NUMBERS)
    traces = [payload for payload in PAYLOADS if isinstance(payload, dict)]
    inside = st.tuples(st.sampled_from(traces), numbers).map(lambda pair: {**pair[0], "n": pair[1]})
    values = st.one_of(st.sampled_from(PAYLOADS), numbers, inside, json_values())
    return st.tuples(st.sampled_from(["request", "message", "part"]), st.sampled_from(DATA_KEYS), values).map(placed)


# ---- request headers -------------------------------------------------------------------------------

ALICE = "alice-token"  # bearer tokens of the hostile suite's server
BOB = "bob-token"
VERSIONS = ["1.0", "1.0.0", "1.0.99", "01.00", " 1.0 ", "1", "1.1", "0.3", "2.0", "", "1.0.0.0", "1..0", "1.0,1.0"]
VERSIONS += ["999999999.0", "9999999999.0", "-1.0", "1.0-rc1", "v1.0", "1.0;q=1", "+1.0", "1.0e0"]
AUTHORIZATIONS = [f"Bearer {ALICE}", f"Bearer {BOB}", f"bearer {ALICE}", f"Bearer  {ALICE} ", "Bearer", "Bearer "]
AUTHORIZATIONS += ["", "Basic YWxpY2U6cHc=", f"Token {ALICE}", f"Bearer {ALICE}x", f"{ALICE}", "Bearer " + "a" * 4000]
EVERY_EXTENSION = ",".join([RESUME_EXTENSION_URI, timestamp.URI, traceability.URI])
EXTENSIONS = [RESUME_EXTENSION_URI, timestamp.URI, traceability.URI, EVERY_EXTENSION, "", ",", ",,,"]
EXTENSIONS += [f"{RESUME_EXTENSION_URI},{RESUME_EXTENSION_URI}", f" {RESUME_EXTENSION_URI} ", "*"]
EXTENSIONS += ["https://example.com/unknown/v1", "not a uri", timestamp.URI.upper(), traceability.URI + "/"]
STREAM_AFTER = ["0", "1", "2", "-1", "", " 1", "1 ", "01", "+1", "1.0", "abc", "9223372036854775807"]
STREAM_AFTER += ["9223372036854775808", "99999999999999999999", "0x10", "\u0661"]
# Names gRPC or HTTP/2 keep for themselves: the transport's business, not the server's.
RESERVED = ("grpc-", "content-type", "te", "host", "user-agent", "connection", "authority", "upgrade")
HEADER_VALUE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
# The server's limit on request headers is 16 KiB: one of these passes it, two of the others may.
HUGE_HEADER = st.sampled_from([4_000, 9_000, 17_000]).map(lambda size: ("x-huge", "h" * size))


def printable(value: str) -> bool:
    """What gRPC's client sends in a text header (it refuses anything else before sending)."""
    return all(0x20 <= ord(char) <= 0x7E for char in value)


def _reserved(name: str) -> bool:
    return any(name == word or (word.endswith("-") and name.startswith(word)) for word in RESERVED)


def header_values(odd: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([value for value in odd if printable(value)]), HEADER_VALUE)


def _entries(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[tuple[str, str | bytes]]]:
    """No entry, one, or several (a repeated header)."""
    return st.lists(values.map(lambda value: (name, value)), max_size=3)


def other_headers() -> st.SearchStrategy[list[tuple[str, str | bytes]]]:
    names = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,30}", fullmatch=True).filter(lambda name: not _reserved(name))
    text = st.tuples(names.filter(lambda name: not name.endswith("-bin")), HEADER_VALUE)
    binary = st.tuples(names.map(lambda name: name + "-bin"), st.binary(max_size=64))
    entry: st.SearchStrategy[tuple[str, str | bytes]] = st.one_of(text, binary)
    return st.lists(entry, max_size=4)


def _usually(entries: list[tuple[str, str | bytes]], odd: st.SearchStrategy[list[tuple[str, str | bytes]]]) -> Any:
    """`entries` (so that the calls get past this header's check to the next) or odd ones."""
    return st.one_of(st.just(entries), odd)


def call_metadata() -> st.SearchStrategy[Metadata]:
    """Request headers gRPC's client sends: the A2A ones with odd values, repeated or missing, and others."""
    parts = st.tuples(
        _usually([("authorization", f"Bearer {ALICE}")], _entries("authorization", header_values(AUTHORIZATIONS))),
        _usually([("a2a-version", "1.0")], _entries("a2a-version", header_values(VERSIONS))),
        _entries("a2a-extensions", header_values(EXTENSIONS)),
        _entries("a2a-stream-after", header_values(STREAM_AFTER)),
        other_headers(),
        st.sampled_from([0, 0, 0, 1, 2]).flatmap(lambda count: st.lists(HUGE_HEADER, min_size=count, max_size=count)),
    )
    joined = parts.map(lambda groups: [entry for group in groups for entry in group])
    return joined.flatmap(lambda entries: st.permutations(entries)).map(tuple)


def metadata_values(metadata: Metadata) -> Iterator[bytes]:
    for _, value in metadata:
        yield value if isinstance(value, bytes) else value.encode()


# ---- what a webhook URL may be -----------------------------------------------------------------------

SAFE_URL_PREFIXES = ("http://127.0.0.1:9/", "https://127.0.0.1:9/")


def webhook_safe(method: MethodDescriptor, body: bytes) -> bool:
    """Whether every webhook URL `body` carries (if it parses) is loopback, or no http(s) URL at all.

    The strategies only make such URLs; this guards random bytes that happen to parse into a config.
    """
    try:
        request = message_factory.GetMessageClass(method.input_type).FromString(body)
    except Exception:
        return True
    return all(_safe_url(url) for url in _webhook_urls(request))


def _webhook_urls(message: Message) -> Iterator[str]:
    if isinstance(message, a2a_pb2.TaskPushNotificationConfig):
        yield message.url
    for field, value in message.ListFields():
        sub = field.message_type
        if sub is None or _is_map(field) or not sub.full_name.startswith("lf.a2a."):
            continue
        for item in value if field.is_repeated else (value,):
            yield from _webhook_urls(item)


def _safe_url(url: str) -> bool:
    lowered = url.strip().lower()
    if not lowered.startswith(("http:", "https:")):
        return True
    return url in SAFE_URLS or url.startswith(SAFE_URL_PREFIXES)

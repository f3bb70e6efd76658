"""How deeply JSON values (google.protobuf Struct, Value, ListValue) nest inside a request.

The protobuf decoders refuse messages nested past 100 levels, and every JSON level is two or three
message levels (Struct, its map entry, Value). A response embeds what a request carried a few levels
deeper (ListTasksResponse > Task > Message > Part > Value), so a request at the decoder's limit would
be stored fine and then make every later response that shows it undecodable. Requests are refused
well before that: MAX_JSON_NESTING levels leave room for every response wrapper.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

MAX_JSON_NESTING = 24  # x 3 message levels per JSON object, + the deepest response wrapper, < 100

JsonValue = struct_pb2.Struct | struct_pb2.ListValue | struct_pb2.Value


def nests_deeper_than(value: JsonValue, limit: int = MAX_JSON_NESTING) -> bool:
    """Whether `value` holds objects or arrays nested more than `limit` deep (an object is one level)."""
    stack: list[tuple[JsonValue, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, struct_pb2.Value):
            kind = node.WhichOneof("kind")
            if kind == "struct_value":
                stack.append((node.struct_value, depth))
            elif kind == "list_value":
                stack.append((node.list_value, depth))
            continue
        depth += 1
        if depth > limit:
            return True
        children = node.fields.values() if isinstance(node, struct_pb2.Struct) else node.values
        stack.extend((child, depth) for child in children)
    return False

"""Text a caller chose, made safe to show to a person: what the server writes back to callers (status messages,
ErrorInfo metadata, BadRequest violations) and what the access log writes both escape it.

A tab or newline can forge lines in whatever a client prints, a NUL cuts C strings short, and a bidi control
such as U+202E (right-to-left override) makes text read as something else. Those characters, every other one that
is not printable, and the backslash (so that an escape cannot be forged) are written as JSON writes them
(`\\t`, `\\u0000`, `\\u202e`, `\\\\`), the JSON encoder the access log quotes its values with; printable text,
non-ASCII letters included, is left as it is.
"""

from __future__ import annotations

import json

json_escaped = json.encoder.encode_basestring_ascii  # a str as a JSON string, quoted, every non-ASCII one escaped


def escaped(text: str) -> str:
    """`text` with the backslash and every character that is not printable written as its JSON escape."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(char if char.isprintable() and char != "\\" else json_escaped(char)[1:-1] for char in text)

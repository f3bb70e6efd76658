"""Identifiers the server generates (task, context, message, artifact and config ids)."""

from __future__ import annotations

import os

_ID_BYTES = 16
_BATCH_IDS = 256  # ids drawn from the OS per system call
_unused: list[str] = []
os.register_at_fork(after_in_child=_unused.clear)  # a forked child must never hand out its parent's ids


def new_id() -> str:
    """128 bits from the OS's cryptographic random source as 32 hex digits: as unique and unguessable as
    a UUID4 (on an open server a task id is all that keeps a task from other callers), read a batch at
    a time to save a system call per id."""
    if not _unused:
        batch = os.urandom(_ID_BYTES * _BATCH_IDS).hex()
        width = 2 * _ID_BYTES
        _unused.extend(batch[start : start + width] for start in range(0, len(batch), width))
    return _unused.pop()

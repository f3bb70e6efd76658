"""Identifiers the server generates (task, context, message, artifact and config ids)."""

from __future__ import annotations

import os


def new_id() -> str:
    """128 random bits as 32 hex digits: as unique as a UUID4, at a fraction of its cost."""
    return os.urandom(16).hex()

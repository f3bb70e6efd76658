"""The line `serve` stops with when it cannot listen on an address: a port in use names the flag that moves it."""

from __future__ import annotations

import errno


def cannot_listen(doing: str, listen: str, flag: str, error: OSError | None = None) -> OSError:
    """`cannot {doing} {listen}: ...`: `error` (None when the port is known to be in use), and for a port in use,
    `flag`, the setting that picks another."""
    if error is None or error.errno == errno.EADDRINUSE:
        return OSError(
            f"cannot {doing} {listen}: address already in use (another process holds it: choose another port with "
            f"{flag} HOST:PORT)"
        )
    return OSError(f"cannot {doing} {listen}: {error.strerror or error}")

"""The converters of `a2a-grpc serve`'s settings: each checks one value as it is read, from a flag, the
environment or the config file alike, and refuses it with a message that quotes at most SHOWN_CHARS of it."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import re

SHOWN_CHARS = 80
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
MAX_PORT = 65_535
# The rates a token bucket can hold (per second). A caller refused waits up to 1/rate seconds, which its RetryInfo
# carries as a Duration that clients read as 64-bit nanoseconds (up to ~292 years): 1e-9 keeps the longest wait at
# ~32 years, and a second of burst at 1e9 tokens.
MIN_RATE = 1e-9
MAX_RATE = 1e9
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shown(text: str) -> str:
    """`text` quoted, cut to SHOWN_CHARS characters."""
    return repr(text) if len(text) <= SHOWN_CHARS else repr(text[:SHOWN_CHARS]) + "\u2026"


def _refuse(what: str, text: str, *, verb: str = "expected") -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{verb} {what}, got {shown(text)}")


def plain_text(text: str) -> str:
    """A name, path or URL: no NUL or other control characters. The value is not quoted in the refusal: a URL
    may hold a password."""
    found = _CONTROL.search(text)
    if found:
        raise argparse.ArgumentTypeError(
            f"expected text without control characters (NUL, newlines, ...), got one at character {found.start() + 1}"
        )
    return text


def byte_count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise _refuse("a positive number of bytes", text, verb="must be")
    return int(text)


def positive_count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise _refuse("a positive whole number", text, verb="must be")
    return int(text)


def count(text: str) -> int:
    """A whole number from 0."""
    if not text.strip().isdigit():
        raise _refuse("a whole number from 0", text, verb="must be")
    return int(text)


def _number(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        return math.nan
    return number


def seconds_below(text: str, bound: float, *, zero: bool = False) -> float:
    """Seconds: a finite number above 0 (or 0 itself, with `zero`) and below `bound`."""
    seconds = _number(text)
    if not ((seconds >= 0 if zero else seconds > 0) and seconds < bound):
        raise _refuse(f"a number of seconds {'from' if zero else 'above'} 0 (below {bound:g})", text)
    return seconds


def seconds(text: str) -> float:
    return seconds_below(text, 86_400)


def duration(text: str) -> float:
    """Seconds that may pass a day (up to a century)."""
    return seconds_below(text, 100 * 365 * 86_400)


def retention(text: str) -> float:
    """How long something is kept: seconds up to a century, or 0 for forever."""
    return seconds_below(text, 100 * 365 * 86_400, zero=True)


def grace_seconds(text: str) -> float:
    """A shutdown grace period: 0 (stop at once) up to a day."""
    return seconds_below(text, 86_400, zero=True)


def seconds_or_never(text: str) -> float:
    """Seconds up to a day, or 0 for never."""
    return seconds_below(text, 86_400, zero=True)


def rate(text: str) -> float:
    value = _number(text)
    if not (value == 0 or MIN_RATE <= value < MAX_RATE):
        raise _refuse(f"a number per second from {MIN_RATE:g} and below {MAX_RATE:g}, or 0 for no limit", text)
    return value


def log_format(text: str) -> str:
    """`--log-format`'s value, checked (argparse reports the ValueError as an invalid value)."""
    value = text.strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(text)
    return value


def log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS or not isinstance(logging.getLevelName(level), int):
        raise _refuse(f"one of {', '.join(LOG_LEVELS)}", text)
    return level


def listen_address(text: str) -> str:
    """HOST:PORT (an IPv6 host in brackets), the port 0 (any free one) to 65535."""
    host, sep, port = text.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or int(port) > MAX_PORT or not _is_host(bare):
        raise _refuse("HOST:PORT with a port from 0 to 65535", text)
    return text


BINDING_NAMES = ("grpc", "jsonrpc", "http+json")


def bindings(text: str) -> str:
    """--bindings: a comma list of BINDING_NAMES, gRPC always among them; the served ones, comma-joined in order."""
    named = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(named.difference(BINDING_NAMES))
    if unknown:
        raise _refuse(f"a comma list of {', '.join(BINDING_NAMES)}", unknown[0])
    return ",".join(name for name in BINDING_NAMES if name in named or name == "grpc")


def optional_listen_address(text: str) -> str:
    """HOST:PORT, or '' for none."""
    return text if text == "" else listen_address(text)


def host_or_network(text: str) -> str:
    """--push-allow's items, comma-joined: each a host name, an IP address or a CIDR network."""
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if "/" in item:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise _refuse("a host, an IP address or a CIDR network (10.0.0.0/8)", item) from None
        elif not _is_host(item):
            raise _refuse("a host, an IP address or a CIDR network (10.0.0.0/8)", item)
    return text


def token_principals(text: str) -> str:
    """--auth-token's TOKEN=PRINCIPAL items, comma-joined (a token may end in base64 padding)."""
    for item in text.split(","):
        token, sep, principal = item.strip().rpartition("=")
        if item.strip() and (not sep or not token or not principal):
            raise argparse.ArgumentTypeError("takes TOKEN=PRINCIPAL (the value given is not shown)")
    return text


def leeway_seconds(text: str) -> float:
    """A JWT's allowed clock skew: 0 to 3600 seconds."""
    seconds = _number(text)
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to 3600, got {text!r}")
    return seconds


def _is_host(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return bool(_HOSTNAME.fullmatch(text))
    return True

"""What `serve` loads by name, `MODULE:ATTR` (`--agent`, `--interceptor`): one loader, one kind of refusal.

The attribute may be dotted (`module:Class.factory`). A class, or a callable that is not yet the thing itself,
is called with no arguments; an instance is taken as it is. Whatever goes wrong is one line (a ValueError),
which `serve` prints before it exits 2.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_object(spec: str, flag: str, what: str, is_one: Callable[[Any], bool]) -> Any:
    """The object `spec` (MODULE:ATTR) names, called first when it is a class or a factory (not `is_one`);
    ValueError, naming `flag` and `what` was wanted, when it cannot be loaded."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{flag} takes MODULE:ATTR, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for name in attr.split("."):
            target = getattr(target, name)
        if isinstance(target, type) or (callable(target) and not is_one(target)):
            target = target()
    except Exception as error:  # whatever the module or the constructor raised: one line, no traceback
        raise ValueError(f"cannot load {what} {spec}: {one_line(error)}{_where_hint(error, module_name)}") from None
    return target


def _where_hint(error: Exception, module_name: str) -> str:
    """For `module_name` itself (or a package of it) not found: where serve imports it from, and how to change
    that; nothing for a module it imports that is missing."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    if not missing or not (module_name == missing or module_name.startswith(missing + ".")):
        return ""
    return (
        f"; serve imports it from --app-dir (the working directory by default): run serve from the directory that "
        f"holds {missing.partition('.')[0]}, or give --app-dir DIR"
    )


def one_line(error: Exception) -> str:
    """What went wrong, on one line: the exception's kind and text (a syntax error's file and line too)."""
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg} ({error.filename}, line {error.lineno})"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__

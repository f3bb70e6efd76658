"""What `a2a-grpc serve` checks before it starts, in one place: `serve` runs it on its settings, and
`config check` on a config file's, so a file that `config check` passes is one `serve` starts on."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from a2a_grpc.card.model import CardError
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.workers import unshared_store


class SettingRefused(Exception):
    """A setting `serve` cannot start with, in one line (printed after `a2a-grpc: `, exit status 2)."""


def check_processes(args: argparse.Namespace) -> None:
    """The checks on serve's parsed `args` alone: --workers N needs a store the processes share, --agent's
    --app-dir must be a directory. SettingRefused otherwise."""
    if args.workers > 1:
        store = unshared_store(args.store)
        if store is not None:
            raise SettingRefused(
                f"--workers {args.workers} needs a store all processes share (postgresql://...), not {store}"
            )
    if (args.agent or args.interceptor) and not os.path.isdir(args.app_dir):
        raise SettingRefused(f"--app-dir {args.app_dir} is not a directory")


def built_server(settings: ServerSettings) -> A2AServer:
    """The server `settings` make, nothing started yet: its agent imported, its cards, keys, key files and TLS
    files loaded, its limits checked. SettingRefused, in one line, for what stops it."""
    try:
        return A2AServer(settings)
    except (CardError, ValueError, ImportError, AttributeError, OSError) as error:
        raise SettingRefused(str(error)) from None


@contextmanager
def importing_from(app_dir: str) -> Iterator[None]:
    """`app_dir` first on sys.path meanwhile, as serve puts it for its agent's module."""
    path = os.path.abspath(app_dir)
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)

"""Modules that moved into a package keep answering at their old names, so that code written against the old
layout still imports: `import a2a_grpc.card_verification` gives the module `a2a_grpc.card.verification`.

The old names are kept for applications, not used inside the project; type checkers know only the new ones.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED_MODULES = {
    "a2a_grpc.card_canonical": "a2a_grpc.card.canonical",
    "a2a_grpc.card_errors": "a2a_grpc.card.errors",
    "a2a_grpc.card_http": "a2a_grpc.card.http",
    "a2a_grpc.card_resolution": "a2a_grpc.card.resolution",
    "a2a_grpc.card_signing": "a2a_grpc.card.signing",
    "a2a_grpc.card_verification": "a2a_grpc.card.verification",
    "a2a_grpc.cli_client": "a2a_grpc.client.cli",
    "a2a_grpc.client_streams": "a2a_grpc.client.streams",
}


class _MovedModule(importlib.abc.Loader):
    def __init__(self, new_name: str) -> None:
        self._new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self._new_name)

    def exec_module(self, module: ModuleType) -> None:
        """The module was run under its new name."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED_MODULES.get(fullname)
        if new_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModule(new_name))


def install() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())

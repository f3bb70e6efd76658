"""The public API is written down in docs/api.md: each listed module has an `__all__` whose names exist, and every
import in the README and docs/ names a public module and, from it, a name its `__all__` lists."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GENERATED = "a2a_grpc.generated."


def public_modules() -> list[str]:
    rows = re.findall(r"^\| `(a2a_grpc[\w.]*)` \|", (ROOT / "docs" / "api.md").read_text(), re.MULTILINE)
    assert rows, "docs/api.md lists no module"
    return rows


def documented_imports(documents: list[Path] = DOCUMENTS) -> list[tuple[str, str, str | None]]:
    """(document, module, name imported from it or None) for every import of a2a_grpc in a Python block."""
    found: list[tuple[str, str, str | None]] = []
    for document in documents:
        for block in re.findall(r"```python\n(.*?)```", document.read_text(), re.DOTALL):
            for node in ast.walk(ast.parse(textwrap.dedent(block))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("a2a_grpc"):
                    found += [(document.name, node.module or "", alias.name) for alias in node.names]
                elif isinstance(node, ast.Import):
                    found += [(document.name, a.name, None) for a in node.names if a.name.startswith("a2a_grpc")]
    return found


def exported(module: str) -> list[str]:
    return list(importlib.import_module(module).__dict__.get("__all__", ()))


@pytest.mark.parametrize("module", public_modules())
def test_a_public_module_lists_what_it_exports(module: str) -> None:
    imported = importlib.import_module(module)
    if module.startswith(GENERATED):
        return
    exported = imported.__dict__.get("__all__")
    assert exported, f"{module} has no __all__"
    assert [name for name in exported if not hasattr(imported, name)] == []


def test_the_docs_import_only_public_names() -> None:
    public = set(public_modules())
    imports = documented_imports()
    assert imports, "no import found in the docs: the reader is broken"
    private = []
    for document, module, name in imports:
        if name is not None and f"{module}.{name}" in public:
            continue
        named_but_not_exported = name is not None and not module.startswith(GENERATED) and name not in exported(module)
        if module not in public or named_but_not_exported:
            private.append((document, module, name))
    assert private == []


def test_the_reader_sees_a_private_import(tmp_path: Path) -> None:
    document = tmp_path / "private.md"
    document.write_text("A page.\n\n```python\n    from a2a_grpc.tasks.machine import TaskMachine\n```\n")
    assert documented_imports([document]) == [("private.md", "a2a_grpc.tasks.machine", "TaskMachine")]
    assert "a2a_grpc.tasks.machine" not in public_modules()

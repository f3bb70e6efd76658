"""The task machine is not reached around: nothing but the module that defines `TaskMachine` assigns a machine's
fields, and nothing but the module that defines `TaskRun` a run's (attribute assignment, augmented or annotated
assignment, `del`, `setattr`, or a mutating call such as `.append` on a field), anywhere in a2a_grpc/ and
interceptors/. Everything else changes them through the named transitions of the machine and the run.

A machine or a run is recognised by the name it goes by (`machine`, `self._machine`, `run`, `machine.run`, ...),
and a field by the names the class declares (its `__slots__`, with or without the leading underscore, and its
properties)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "a2a_grpc", ROOT / "interceptors"]
OWNED = ("TaskMachine", "TaskRun")
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "add", "discard", "update", "setdefault"}
KINDS = {"TaskMachine": "machine", "TaskRun": "run"}


@functools.cache
def _modules() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(encoding="utf-8"), str(path))
        for source in SOURCES
        for path in sorted(source.rglob("*.py"))
        if "generated" not in path.parts
    }


def _owners(modules: dict[Path, ast.Module]) -> dict[str, tuple[Path, set[str]]]:
    """Each owned class: the module that defines it, and its field names."""
    owners: dict[str, tuple[Path, set[str]]] = {}
    for path, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in OWNED:
                owners[node.name] = (path, _fields(node))
    assert set(owners) == set(OWNED), f"not found: {set(OWNED) - set(owners)}"
    return owners


def _fields(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
            names |= {
                elt.value
                for elt in ast.walk(item.value)
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
            }
        elif isinstance(item, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
        ):
            names.add(item.name)
    return names | {name.lstrip("_") for name in names} | {"_" + name.lstrip("_") for name in names}


def _kind(expression: ast.expr) -> str | None:
    """ "machine" or "run" for an expression named as one, else None."""
    if isinstance(expression, ast.Name):
        name = expression.id
    elif isinstance(expression, ast.Attribute):
        name = expression.attr
    else:
        return None
    name = name.lstrip("_")
    if name == "machine" or name.endswith("_machine"):
        return "machine"
    if name == "run" or name.endswith("_run"):
        return "run"
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    """The expressions `node` assigns, deletes, or changes in place."""
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        found = [node.func.value]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
        first = node.args[0] if node.args else None
        return [] if first is None or _kind(first) is None else [ast.Attribute(value=first, attr="*", ctx=ast.Store())]
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        elif isinstance(target, ast.Starred):
            found.append(target.value)
        else:
            flat.append(target)
    return flat


def outside_writes(modules: dict[Path, ast.Module]) -> list[str]:
    """Every place outside a class's own module that assigns or changes a field of a machine or a run."""
    owners = {KINDS[name]: owner for name, owner in _owners(modules).items()}
    found: list[str] = []
    for path, tree in modules.items():
        for node in ast.walk(tree):
            for target in _targets(node):
                if not isinstance(target, ast.Attribute):
                    continue
                kind = _kind(target.value)
                if kind is None:
                    continue
                owner, fields = owners[kind]
                if path != owner and (target.attr == "*" or target.attr in fields):
                    assert isinstance(node, (ast.stmt, ast.expr))
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_code_outside_the_machine_and_run_modules_assigns_their_fields() -> None:
    assert outside_writes(_modules()) == []


def test_the_check_sees_each_kind_of_outside_write() -> None:
    """The check itself, on code that reaches around the machine and the run in each way it looks for."""
    modules = dict(_modules())
    reaching = ast.parse(
        "machine.push_config = config\n"
        "machine.subscribers.append(subscriber)\n"
        "self._machine._subscribers.remove(subscriber)\n"
        "run.runner = runner\n"
        "machine.run.trace = span.trace\n"
        "run.machine.seq += 1\n"
        "del run.cancelling\n"
        "setattr(machine, name, value)\n"
        "self.store.shared = False\n"  # not a machine or a run: allowed
        "machine.task.history.append(message)\n"  # a field's own object, not the field: not looked for
    )
    modules[ROOT / "a2a_grpc" / "reaching.py"] = reaching
    found = {line.split(": ", 1)[1] for line in outside_writes(modules) if line.startswith("a2a_grpc/reaching.py")}
    assert found == {
        "machine.push_config = config",
        "machine.subscribers.append(subscriber)",
        "self._machine._subscribers.remove(subscriber)",
        "run.runner = runner",
        "machine.run.trace = span.trace",
        "run.machine.seq += 1",
        "del run.cancelling",
        "setattr(machine, name, value)",
    }

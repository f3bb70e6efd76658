"""The house's shape, read from the source: no import circle (run time or TYPE_CHECKING) in a2a_grpc/ and
interceptors/, no module over 450 lines but the generated code, and the card and the client as packages."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = (("a2a_grpc", "a2a_grpc"), ("interceptors", "a2a_grpc.interceptors"))
MAX_MODULE_LINES = 450


def modules() -> dict[str, Path]:
    """module name -> file, for every module of the package but the generated code."""
    found: dict[str, Path] = {}
    for folder, package in TOPS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "generated" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the package that `name` imports anywhere in its source (TYPE_CHECKING blocks included); a
    package's own modules are not counted (importing one of them runs the package's `__init__` first)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name and not target.startswith(name + "."):
            found.add(target)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_circle_at_run_time_or_for_type_checking() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_450_lines_but_the_generated_code() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}


def test_the_card_and_the_client_are_packages() -> None:
    for package in ("card", "client"):
        assert (ROOT / "a2a_grpc" / package / "__init__.py").is_file()
        assert not (ROOT / "a2a_grpc" / f"{package}.py").exists()
    assert not list((ROOT / "a2a_grpc").glob("card_*.py"))
    assert not list((ROOT / "a2a_grpc").glob("client_*.py"))

"""No import cycle anywhere in the package, lazy imports inside functions included:
a cycle means two modules share a concept that belongs in a third."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "predgen_ros"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports, at any depth of its code."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in modules and c != name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycles_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_relative_and_lazy_imports():
    graph = import_graph()
    assert "predgen_ros.eval.bag_replay.bags" in graph["predgen_ros.eval.bag_replay.replay"]  # from .bags import ...
    assert "predgen_ros.audio.recognition.turn_models" in graph["predgen_ros.audio.recognition.vad"]  # imported inside make_vad


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


AUDIO_ROLES = ("recognition", "echo", "speech")


def test_the_audio_roles_import_none_of_each_other():
    """audio/ by role: the recognizer, the echo front-end and the robot's voice change
    apart; only audio/ear.py joins the echo front-end to recognition."""
    crossings = [
        (module, target)
        for module, targets in import_graph().items()
        for target in targets
        for role in AUDIO_ROLES
        if module.startswith(f"predgen_ros.audio.{role}.")
        and target.startswith("predgen_ros.audio.")
        and target.split(".")[2] in AUDIO_ROLES
        and target.split(".")[2] != role
    ]
    assert crossings == []

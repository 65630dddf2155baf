"""The engine's modules import each other without a circle (function-level imports included)."""
from __future__ import annotations

import ast
from pathlib import Path

import engine

ENGINE = Path(engine.__file__).resolve().parent


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``package`` (a package is its __init__)."""
    root = package.parent
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict) -> set[str]:
    """The modules of ``modules`` that ``name`` imports anywhere in its file (ast.walk: in functions too).

    ``from P import x`` counts as an import of P.x when that is a module, else of P; a
    relative import is resolved against ``name``'s package.  Importing a module also runs
    its parent packages' __init__, but that is not counted (every submodule would then
    import its package, which imports it back).
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base = ".".join(base_parts[:len(base_parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_names(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_engine_has_no_import_circle():
    graph = import_graph(ENGINE)
    assert len(graph) > 30 and graph["engine.models.bayesian"]  # the walk really read the engine
    found = circles(graph)
    assert not found, "import circles in the engine: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_check_sees_a_circle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "toy"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "driver.py").write_text("def run(m):\n    from .models.one import One\n    return One\n")
    (pkg / "models" / "one.py").write_text("from ..driver import run\n\nclass One:\n    pass\n")
    (pkg / "models" / "two.py").write_text("from . import one\nfrom .. import driver\n")
    graph = import_graph(pkg)
    assert graph["toy.models.one"] == {"toy.driver"}
    assert graph["toy.driver"] == {"toy.models.one"}  # the function-level import counts
    assert graph["toy.models.two"] == {"toy.models.one", "toy.driver"}  # `from P import module`
    assert circles(graph) == [["toy.driver", "toy.models.one"]]

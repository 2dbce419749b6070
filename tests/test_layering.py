"""The package's layers, read from the source (every import, at the top of a module or inside a
function): data below the workload schema, one pipeline, no gRPC in solver/.

What each rule keeps:
* the catalog, the performance model, the model library and document reading never import
  the workload schema, the compiled problem or the planner (the design note: catalog and
  calibration data sit below the workload schema);
* no import circle spans two parts of the package (the single-hour and multi-period planners
  read one solve stage, solver/solve_stage.py, and neither imports the other's callers; the
  catalog, calibration and workload schema no longer import one another);
* solver/ never imports grpc (the server is the only door that speaks it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLVER = ROOT / "solver"

# Packages below the workload schema, and what they must never import.
BELOW_THE_SCHEMA = ("solver.catalog", "solver.perf", "solver.models", "solver.documents")
ABOVE = ("solver.workload", "solver.compile", "solver.optimize", "solver.plan", "solver.plan_horizon",
         "solver.solve_stage", "solver.output", "solver.export", "solver.review", "solver.sim")


def _modules() -> dict[str, Path]:
    out = {}
    for path in SOLVER.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path) -> set[str]:
    """Every module name an import statement in the file names (top level or in a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _part(module: str) -> str:
    """The part of the package a module belongs to: its subpackage, or itself at the top."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {i for i in _imports(p) if i in mods and i != m} for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_data_below_the_workload_schema_never_imports_what_sits_above_it():
    bad = []
    for module, path in sorted(_modules().items()):
        if not any(_within(module, low) for low in BELOW_THE_SCHEMA):
            continue
        for imported in sorted(_imports(path)):
            if any(_within(imported, high) for high in ABOVE):
                bad.append(f"{module} imports {imported}")
    assert not bad, "\n".join(bad)


def test_no_import_circle_spans_two_parts_of_the_package():
    spanning = [c for c in _cycles(_graph()) if len({_part(m) for m in c}) > 1]
    assert not spanning, spanning


def test_the_cycle_finder_sees_a_circle_across_parts():
    """The check above can fail: a planted circle between two parts is found."""
    graph = _graph()
    graph["solver.catalog.loader"].add("solver.workload.schema")
    graph["solver.workload.schema"].add("solver.catalog.loader")
    assert any({"solver.catalog.loader", "solver.workload.schema"} <= set(c) for c in _cycles(graph))


def test_solver_never_imports_grpc():
    bad = [f"{m} imports {i}" for m, p in sorted(_modules().items()) for i in sorted(_imports(p))
           if _within(i, "grpc") or _within(i, "server")]
    assert not bad, bad

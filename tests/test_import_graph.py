"""The package's imports run one way, down STYLE.md's layers, with no circle between modules or between
subpackages; and every module imports on its own.

Only imports that run when a module loads count: those inside functions (deliberately lazy) and under
`if TYPE_CHECKING:` (never run) are left out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx

import tracevote
from tests.conftest import hang_guard_s

PACKAGE_ROOT = Path(tracevote.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def load_time_imports(tree: ast.Module) -> list[str]:
    """Modules named by the import statements at module level (and in module-level if/try blocks)."""
    found: list[str] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody)
    return found


def module_graph() -> nx.DiGraph:
    files = module_files()
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for name, path in files.items():
        for imported in load_time_imports(ast.parse(path.read_text(), str(path))):
            if imported in files and imported != name:
                graph.add_edge(name, imported)
    return graph


def subpackage(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph(modules: nx.DiGraph) -> nx.DiGraph:
    graph = nx.DiGraph()
    for importer, imported in modules.edges:
        if subpackage(importer) != subpackage(imported) and subpackage(imported) != "tracevote":
            graph.add_edge(subpackage(importer), subpackage(imported), via=f"{importer} -> {imported}")
    return graph


def described_cycles(graph: nx.DiGraph) -> list[str]:
    cycles = []
    for cycle in nx.simple_cycles(graph):
        edges = zip(cycle, cycle[1:] + cycle[:1], strict=True)
        cycles.append("; ".join(graph.edges[a, b].get("via", f"{a} -> {b}") for a, b in edges))
    return sorted(cycles)


def test_no_module_imports_itself_back_through_others() -> None:
    assert described_cycles(module_graph()) == []


def test_subpackages_are_layers_with_no_import_back_up() -> None:
    assert described_cycles(package_graph(module_graph())) == []


def test_the_graph_sees_the_imports_it_should() -> None:
    """Guards the checker itself: known load-time edges are found, and a TYPE_CHECKING import is not."""
    graph = module_graph()
    assert graph.has_edge("tracevote.sim.model", "tracevote.sim.kinds")
    assert graph.has_edge("tracevote.sim.kinds", "tracevote.sim.debate")
    assert not graph.has_edge("tracevote.sim.debate", "tracevote.sim.model")  # TYPE_CHECKING only


def test_every_module_imports_on_its_own(tmp_path: Path) -> None:
    """Each module imported first, in a fresh set of tracevote modules: no module works only when another
    was imported before it."""
    script = tmp_path / "import_each.py"
    script.write_text(
        "import importlib, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'tracevote' or m.startswith('tracevote.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as error:\n"
        "        failed.append(f'{name}: {type(error).__name__}: {error}')\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n")
    names = [name for name in module_files() if not name.endswith("__main__")]
    result = subprocess.run([sys.executable, str(script), *names], capture_output=True, text=True,
                            timeout=hang_guard_s())
    assert result.returncode == 0, result.stdout + result.stderr


# STYLE.md "Layers and doors", from the ground up; a module imports only from its own layer or one listed before it.
# `stages/` (the DVC stage scripts, outside the package) sits with `cli` at the top.
LAYERS: list[set[str]] = [
    {"core"},
    {"answers"},
    {"datasets"},
    {"store"},
    {"deepconf", "debate", "critique"},
    {"report", "sim", "engine"},
    {"sampling"},
    {"grading"},
    {"explorer"},
    {"cli", "__main__"},
]


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # the package's own __init__: only a version string, below everything
        return -1
    for rank, rooms in enumerate(LAYERS):
        if parts[1] in rooms:
            return rank
    raise AssertionError(f"{module} is in no layer: add its subpackage to LAYERS (and to STYLE.md)")


def upward_imports(graph: nx.DiGraph) -> list[str]:
    return sorted(f"{importer} -> {imported}" for importer, imported in graph.edges
                  if layer_of(imported) > layer_of(importer))


def test_every_subpackage_has_a_layer() -> None:
    for name in module_files():
        layer_of(name)


def test_imports_run_one_way_down_the_layers() -> None:
    upward = upward_imports(module_graph())
    assert not upward, "imports up the layers (pass the piece in, or move it down):\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import() -> None:
    """Guards the layer check itself: an edge from a lower room to a higher one is named."""
    graph = nx.DiGraph([("tracevote.core.config", "tracevote.sampling.client"),
                        ("tracevote.sampling.client", "tracevote.core.config"),
                        ("tracevote.sim.kinds", "tracevote.report.tables")])
    assert upward_imports(graph) == ["tracevote.core.config -> tracevote.sampling.client"]

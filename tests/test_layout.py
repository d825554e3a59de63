"""The layout: the test tree itself (pytest imports test modules by their file name, no packages under
tests/, so two modules with one name in different folders stop the whole run at collection), and the
arrows `docs/architecture.md` draws that no other check covers (`toolweave.wire` at the bottom)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parent


def test_no_two_test_modules_share_a_file_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        where[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"rename one of each: {shared}"


SRC = TESTS.parent / "src"
WIRE_MAY_NOT_IMPORT = ("server", "services", "backends", "catalog")
"""`toolweave.wire` is at the bottom of the house (its docstring says why): these sit above it."""


def _module_file(module: str) -> Path | None:
    """The source file of a `toolweave` module (a package's `__init__.py`), None for a name in one."""
    path = SRC.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _toolweave_imports(module: str, path: Path) -> set[str]:
    """Every `toolweave` module `path` imports, at any depth of its code (function bodies,
    `TYPE_CHECKING` blocks): each is an arrow, whenever it runs."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            while name.startswith("toolweave") and _module_file(name) is None:
                name = name.rpartition(".")[0]
            if name.startswith("toolweave.") and name != module:
                found.add(name)
    return found


def _wire_reaches() -> dict[str, list[str]]:
    """Every `toolweave` module `toolweave.wire` reaches, directly or through others, with one chain
    of imports that gets there (the root `toolweave` package is lazy: `__getattr__`)."""
    chains: dict[str, list[str]] = {}
    todo = [
        (".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"), [])
        for p in sorted((SRC / "toolweave" / "wire").rglob("*.py"))
    ]
    while todo:
        module, chain = todo.pop()
        if module in chains:
            continue
        chains[module] = [*chain, module]
        path = _module_file(module)
        assert path is not None, module
        todo.extend((found, chains[module]) for found in sorted(_toolweave_imports(module, path)))
    return chains


def test_the_wire_imports_nothing_above_it() -> None:
    reaches = _wire_reaches()
    assert "toolweave.wire.transport" in reaches and "toolweave.wire.http_caller" in reaches
    wrong = {
        module: " -> ".join(chain)
        for module, chain in reaches.items()
        if module.split(".")[1] in WIRE_MAY_NOT_IMPORT
    }
    assert not wrong, f"toolweave.wire must not import these (invert the dependency): {wrong}"


def test_the_layering_check_sees_a_wrong_way_import(tmp_path: Path) -> None:
    """The parser behind the check finds an import from above in a function body, relative or not."""
    path = tmp_path / "probe.py"
    path.write_text("def later():\n    from ..backends import base\n    import toolweave.server.app\n")
    found = _toolweave_imports("toolweave.wire.probe", path)
    assert found == {"toolweave.backends", "toolweave.backends.base", "toolweave.server.app"}

"""Every third-party package src/ imports at module level comes with the core dependencies.

README command 1 installs only the core dependencies (and the `demo` extra); a package that only
arrives through the `test` extra or another package's requirements passes the suite and breaks
`toolweave serve` on a fresh machine (httpx did, once `mcp` moved to httpx2).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "toolweave"

OPTIONAL = {"toolweave/server/oauth_proxy": {"authlib"}}
"""Packages an optional extra brings, by the folder that may import them at module level."""


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; (]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _installed_with_core() -> set[str]:
    """The core dependencies and what they require in turn (not their extras): what command 1 installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [_name(dep) for dep in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo.extend(_name(need) for need in needs if "extra ==" not in need)
    return seen


def _module_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in tree.body:  # only what runs on import; imports inside functions are lazy on purpose
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_module_level_imports_are_core_dependencies() -> None:
    declared = _installed_with_core()
    distributions = packages_distributions()
    missing: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC.parent).as_posix()
        allowed = set().union(*(extra for folder, extra in OPTIONAL.items() if relative.startswith(folder)))
        for module in _module_level_imports(path):
            if module == "toolweave" or module in sys.stdlib_module_names or module == "__future__":
                continue
            owners = {name.lower().replace("_", "-") for name in distributions.get(module, [module])}
            if not owners & (declared | allowed):
                missing.append(f"{relative}: {module} ({', '.join(sorted(owners))})")
    assert not missing, "imported at module level but not installed by the core dependencies:\n" + "\n".join(
        missing
    )

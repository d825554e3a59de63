"""Virtual servers: a named selection over the one catalog, as a catalog snapshot of its own.

A server's view is a `Catalog` whose entries are the main snapshot's: the selected ones as
they are (or renamed / re-described by the server's `overrides`), every other one as its
hidden twin. So everything that reads a catalog works on a view unchanged: the executor
refuses a client's call of an unselected tool as unknown, while a composite's inner calls
still reach every tool they reference; `tools/list`, search mode (`find_tools` over the
server's own index) and tenancy answer from the view. Views are built when the catalog
changes, never per request: resolving a server on a request is one dict lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import mcp_types as types

from toolweave.catalog.catalog import Catalog, Entry
from toolweave.catalog.search import ToolIndex
from toolweave.config.patterns import PatternSet
from toolweave.config.servers import ServerConfig
from toolweave.problems import Problem, join_path
from toolweave.suggest import did_you_mean


class Selection:
    """A server's selection rules, compiled once per server definition."""

    __slots__ = ("_seen", "backends", "config", "hide", "tags", "tools")

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.tools = PatternSet(config.tools)
        self.hide = PatternSet(config.hide)
        self.backends = frozenset(config.backends)
        self.tags = frozenset(config.tags)
        self._seen: dict[tuple[str, str | None, frozenset[str]], bool] = {}
        """What `selects` answered per (name, backend, tags): a rebuild regexes only names it never saw."""

    def selects(self, entry: Entry) -> bool:
        """Whether a listed catalog entry is served (before overrides rename it)."""
        key = (entry.name, entry.backend.name if entry.backend is not None else None, entry.tags)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = self._selects(*key)
        return found

    def _selects(self, name: str, backend: str | None, tags: frozenset[str]) -> bool:
        chosen = self.tools.matches(name) or backend in self.backends or not self.tags.isdisjoint(tags)
        return chosen and not self.hide.matches(name)

    def forget_beyond(self, size: int) -> None:
        """Bound the memory of `selects` (names come and go with backends' tools)."""
        if len(self._seen) > size:
            self._seen.clear()


def hidden_twins(catalog: Catalog) -> dict[str, Entry]:
    """Every listed entry as a hidden copy, made once per snapshot and shared by all its views."""
    return {name: replace(entry, hidden=True) for name, entry in catalog.entries.items() if not entry.hidden}


def build_view(
    catalog: Catalog, selection: Selection, twins: dict[str, Entry], search: bool
) -> tuple[Catalog, dict[str, str]]:
    """The server's snapshot over `catalog` (see the module docstring), and each name it lists →
    that tool's name in `catalog` (they differ for an alias); `search`: its tool exposure."""
    config = selection.config
    overrides = config.overrides
    view = Catalog(catalog.separator)
    entries: dict[str, Entry] = {}
    renamed: list[tuple[Entry, str]] = []
    for name, entry in catalog.entries.items():
        if entry.hidden or not selection.selects(entry):
            entries[name] = twins.get(name, entry)
            continue
        override = overrides.get(name)
        if override is None:
            entries[name] = entry
            continue
        tool = entry.tool
        update = {}
        if override.description is not None:
            update["description"] = override.description
        if override.name:
            update["name"] = override.name
        changed = replace(entry, tool=tool.model_copy(update=update)) if update else entry
        if override.name:
            entries[name] = twins.get(name, entry)  # the catalog's name still reaches it from composites
            renamed.append((replace(changed, name=override.name), name))
        else:
            entries[name] = changed
    served: dict[str, str] = {}
    for entry, original in renamed:
        if entry.name not in entries or entries[entry.name].hidden:
            entries[entry.name] = entry
            served[entry.name] = original
    view.entries = entries
    view.max_name_length = catalog.max_name_length
    view.by_reference = catalog.by_reference
    view.degraded = catalog.degraded
    view.used_in = catalog.used_in
    view.backends = catalog.backends
    view.disabled = catalog.disabled
    view.federated = catalog.federated
    view.listed = [entry.tool for entry in view.visible()]
    view.pinned = frozenset(config.pinned)
    view.list_composites = catalog.list_composites
    view.list_found = catalog.list_found
    if search:
        view.index = ToolIndex(view.search_documents())
    for tool in view.listed:
        served.setdefault(tool.name, tool.name)
    return view, served


def selection_problems(
    catalog: Catalog, view: Catalog, config: ServerConfig, path: str = ""
) -> list[Problem]:
    """What in a server's definition selects or names nothing in `catalog` now, each with its path
    (asked by validation and the REST API, not on every rebuild)."""
    listed = [entry for entry in catalog.entries.values() if not entry.hidden]
    names = [entry.name for entry in listed]
    problems: list[Problem] = []
    for index, pattern in enumerate(config.tools):
        if not any(PatternSet([pattern]).matches(name) for name in names):
            problems.append(Problem(join_path(path, "tools", index), _nothing(pattern, names)))
    for index, tag in enumerate(config.tags):
        if not any(tag in entry.tags for entry in listed):
            problems.append(Problem(join_path(path, "tags", index), f"no listed tool has the tag {tag!r}"))
    served = {entry.name for entry in view.visible()}
    for name, override in config.overrides.items():
        where = join_path(path, "overrides", name)
        if name not in catalog.entries or catalog.entries[name].hidden:
            problems.append(Problem(where, _nothing(name, names)))
        elif override.name and override.name not in served:
            problems.append(
                Problem(join_path(where, "name"), f"{override.name!r} is already the name of another tool")
            )
        elif not override.name and name not in served:
            problems.append(Problem(where, f"{name!r} is not in this server's selection"))
    for index, name in enumerate(config.pinned):
        if name not in served:
            problems.append(
                Problem(join_path(path, "pinned", index), f"{name!r} is not a tool this server lists")
            )
    return problems


def composites_reaching_out(
    catalog: Catalog, view: Catalog, served_as: Mapping[str, str], path: str = ""
) -> list[Problem]:
    """A composite the server serves, checked against the server's selection: the tools it calls that
    the server does not serve (they run, as on `/mcp`, but its clients reach them only through it)."""
    served = set(served_as.values())
    problems = []
    for entry in view.visible():
        composite = entry.composite
        if composite is None:
            continue
        outside = []
        for reference in sorted(composite.references):
            target = catalog.lookup(reference)
            if (target.name if target is not None else reference) not in served:
                outside.append(reference)
        if outside:
            problems.append(
                Problem(
                    join_path(path, "tools"),
                    f"composite {entry.name!r} calls {', '.join(outside)}, which this server does not serve "
                    "(they run, but its clients reach them only through the composite)",
                )
            )
    return problems


def _nothing(pattern: str, names: Iterable[str]) -> str:
    return f"{pattern!r} matches no listed tool{did_you_mean(pattern, list(names))}"


ToolKey = tuple[str, str | None, str]


def listing_key(tools: Sequence[types.Tool], known: dict[int, ToolKey] | None = None) -> list[ToolKey]:
    """What a client would notice changing in a listing (names, descriptions, input schemas);
    `known`: keys already made for these tool objects (the views of one snapshot share most)."""
    if known is None:
        return [(t.name, t.description, repr(t.input_schema)) for t in tools]
    keys = []
    for tool in tools:
        key = known.get(id(tool))
        if key is None:
            key = known[id(tool)] = (tool.name, tool.description, repr(tool.input_schema))
        keys.append(key)
    return keys

"""The catalog: one immutable snapshot of every tool the gateway serves.

A snapshot is rebuilt whenever a backend's lists change or a definition is
added, and swapped in atomically, so the hot path is a dict lookup with no
locks. It answers every question about names: what exists under which name
(filters, aliases, conflicts), who owns each tool and who may see it
(tenancy), what a client lists (search mode: `find_tools` and `call_tool`
plus the pinned tools), and why a name is unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import mcp_types as types

from toolweave.backends.base import Backend
from toolweave.catalog.search import (
    CALL_TOOL,
    FIND_TOOLS,
    SEARCH_TOOLS,
    BackendText,
    DocumentTerms,
    SearchDocument,
    ToolIndex,
)
from toolweave.composite import kinds
from toolweave.composite.base import Composite, ResolvedTool, ToolResolver
from toolweave.composite.errors import BuildError
from toolweave.composite.kinds import tool_references
from toolweave.composite.workflow.graph import find_composite_cycles, format_cycle
from toolweave.config.models import BackendConfig, Config
from toolweave.config.patterns import PatternSet
from toolweave.export.names import MAX_NAME_LENGTH, shortened
from toolweave.fields import split_tool_ref
from toolweave.problems import Problem
from toolweave.schemas.validate import ArgumentValidator
from toolweave.secrets import secret_fields
from toolweave.suggest import did_you_mean

logger = logging.getLogger("toolweave.catalog")

ToolClass = Literal["read", "serial", "concurrent", "composite"]


@dataclass(slots=True, eq=False)
class Entry:
    """One callable tool under its exposed name."""

    name: str
    tool: types.Tool
    backend: Backend | None = None
    backend_tool: str | None = None
    composite: Composite | None = None
    hidden: bool = False
    """Not listed to clients (a filter, or a lost name conflict); still callable from composites."""
    filtered: bool = False
    """Hidden by the operator's filters (`hide`, `expose`, `read_only_only`, `hide_destructive`): only
    composites of the config file may call it (unless `policy.api_composites_call_hidden`)."""
    tool_class: ToolClass = "serial"
    timeout: float | None = None
    max_concurrency: int | None = None
    secrets: frozenset[str] = frozenset()
    owner: str | None = None
    """The tenant that owns the tool (an API-defined composite, a tenant's backend); None: shared."""
    tags: frozenset[str] = frozenset()
    """Labels virtual servers select it by (`[backends.tools.<tool>] tags`)."""
    _validator: ArgumentValidator | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.composite.kind if self.composite is not None else "backend"

    def visible_to(self, tenant: str | None) -> bool:
        """The one tenancy rule: a shared tool is everyone's; an owned one only its tenant's."""
        owner = self.owner
        return owner is None or owner == tenant

    def listed_to(self, tenant: str | None) -> bool:
        """Listed for `tenant`: not hidden by a filter, and visible to it."""
        return not self.hidden and self.visible_to(tenant)

    @property
    def validator(self) -> ArgumentValidator:
        if self._validator is None:
            self._validator = ArgumentValidator(self.tool.input_schema)
        return self._validator

    def resolved(self) -> ResolvedTool:
        composite = self.composite
        return ResolvedTool(
            name=self.name,
            tool=self.tool,
            backend=self.backend.name if self.backend else None,
            composite_kind=composite.kind if composite else None,
            references=composite.references if composite else frozenset(),
        )


@dataclass(frozen=True, slots=True)
class CatalogIssue:
    """A problem found while building a snapshot: about which tool (`subject`), and the problem,
    whose path is relative to that tool's definition (empty for a conflict)."""

    subject: str
    problem: Problem

    @property
    def path(self) -> str:
        return self.problem.path

    @property
    def message(self) -> str:
        return self.problem.message

    def __str__(self) -> str:
        return f"{self.subject}: {self.problem}"


class Catalog:
    """An immutable snapshot. Build with `Catalog.build(...)`."""

    def __init__(self, separator: str) -> None:
        self.separator = separator
        self.max_name_length = MAX_NAME_LENGTH
        self.entries: dict[str, Entry] = {}
        self.by_reference: dict[str, Entry] = {}
        self.issues: list[CatalogIssue] = []
        self.warnings: list[CatalogIssue] = []
        """What is served but worth a word (a name shortened to fit `gateway.max_name_length`): logged and
        printed by `validate`, never a failure."""
        self.degraded: dict[str, list[Problem]] = {}
        """Composites that could not be built, with their problems (paths relative to the definition)."""
        self.listed: list[types.Tool] = []
        self.index: ToolIndex | None = None
        self.pinned: frozenset[str] = frozenset()
        self.list_composites = True
        """Search mode lists the composites beside `find_tools` and `call_tool` (`[search] list_composites`)."""
        self.list_found = 0
        """How many found tools a session lists beside them (`[search] list_found`; 0: none)."""
        self.used_in: dict[str, list[str]] = {}
        self.backends: dict[str, Backend] = {}
        self.disabled: frozenset[str] = frozenset()
        """Backends the config turns off (their tools are unknown, and the error says why)."""
        self.federated: frozenset[str] = frozenset()
        """Federated namespaces the config declares (their tools exist while a client serves them)."""
        self._cache: CatalogCache | None = None

    # -- lookups -----------------------------------------------------------

    def get(self, name: str) -> Entry | None:
        return self.entries.get(name)

    def resolve(self, reference: str) -> ResolvedTool | None:
        entry = self.lookup(reference)
        return entry.resolved() if entry else None

    def lookup(self, reference: str) -> Entry | None:
        """An exposed name, or a `backend/tool` / `backend.tool` reference (hidden tools included)."""
        return self.entries.get(reference) or self.by_reference.get(reference)

    def visible(self) -> Iterable[Entry]:
        return (entry for entry in self.entries.values() if not entry.hidden)

    def names_like(self, reference: str, seen: Callable[[Entry], bool] | None = None) -> list[str]:
        """The names `reference` may have meant, in its own form (`backend/tool`, `backend.tool` or an
        exposed name), among the entries `seen` accepts (default: every one, as `resolve` finds them)."""
        if "/" in reference:
            candidates = [(ref, e) for ref, e in self.by_reference.items() if "/" in ref]
        else:
            candidates = list(self.entries.items())
            if "." in reference:
                candidates += [(ref, e) for ref, e in self.by_reference.items() if "/" not in ref]
        return [name for name, entry in candidates if seen is None or seen(entry)]

    # -- tenancy -----------------------------------------------------------

    def owner_of(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return entry.owner if entry is not None else None

    def listed_for(self, tenant: str | None) -> list[Entry]:
        """Every entry `tenant` sees listed (not hidden, shared or its own)."""
        return [entry for entry in self.entries.values() if entry.listed_to(tenant)]

    def used_in_for(self, name: str, tenant: str | None) -> list[str]:
        """The composites calling `name` that `tenant` can see (another tenant's are not its business)."""
        return [c for c in self.used_in.get(name, []) if self.entries[c].visible_to(tenant)]

    # -- what a client lists -----------------------------------------------

    def listing(self, tenant: str | None = None) -> list[types.Tool]:
        """tools/list for `tenant`; in search mode `find_tools`, `call_tool`, the composites and the pinned tools."""
        if self.index is None:
            if all(entry.owner is None for entry in self.entries.values()):
                return list(self.listed)
            return [entry.tool for entry in self.listed_for(tenant)]
        kept = [t for t in self.listed if self.kept_in_search_mode(self.entries[t.name], tenant)]
        return [*SEARCH_TOOLS, *kept]

    def kept_in_search_mode(self, entry: Entry, tenant: str | None) -> bool:
        """Whether search mode lists `entry` to `tenant` as itself: a pinned tool or a listed composite."""
        if not entry.visible_to(tenant) or entry.name in (FIND_TOOLS, CALL_TOOL):
            return False
        return entry.name in self.pinned or (self.list_composites and entry.composite is not None)

    def is_search_tool(self, name: str) -> bool:
        """`find_tools` or `call_tool` of search mode (unless a real tool took the name)."""
        return self.index is not None and name in (FIND_TOOLS, CALL_TOOL) and name not in self.entries

    def search(self, query: str, limit: int, tenant: str | None) -> list[types.Tool]:
        """The best `limit` tools for `query` that `tenant` sees (search mode only)."""
        assert self.index is not None
        return self.visible_in_order([position for position, _ in self.index.ranked(query)], limit, tenant)

    def visible_in_order(self, positions: Iterable[int], limit: int, tenant: str | None) -> list[types.Tool]:
        """The first `limit` tools of the search index at `positions` that `tenant` may see."""
        assert self.index is not None
        found: list[types.Tool] = []
        for position in positions:
            tool = self.index.tools[position]
            if self.entries[tool.name].visible_to(tenant):
                found.append(tool)
                if len(found) == limit:
                    break
        return found

    def unavailable(self, name: str) -> str | None:
        """Why the backend a name points at (`backend__tool`, `backend/tool`) has no tools, if it has none."""
        parts = split_tool_ref(name)
        separator = self.separator
        prefix = parts[0] if parts else name.split(separator, 1)[0] if separator in name else None
        if not prefix:
            return None
        backend = self.backends.get(prefix)
        if backend is not None and backend.status != "connected":
            why = f": {backend.last_error}" if backend.last_error else ""
            return f"backend {prefix!r} is not connected ({backend.status}{why})"
        if prefix in self.disabled:
            return f"backend {prefix!r} is disabled in the config"
        if prefix in self.federated and backend is None:
            return f"federated namespace {prefix!r} has no client connected"
        return None

    # -- building ----------------------------------------------------------

    @classmethod
    def build(
        cls,
        config: Config,
        backends: Sequence[Backend],
        definitions: Sequence[Any] = (),
        *,
        owners: Mapping[str, str | None] | None = None,
        cache: CatalogCache | None = None,
    ) -> Catalog:
        """Assemble a snapshot from connected backends and composite definitions.

        `owners` maps a definition's name to the tenant that owns it (API-defined
        composites); definitions not named there are shared. `cache`: what earlier builds derived
        (each backend's entries, each composite built), reused where nothing it depends on changed;
        the snapshot is the same with or without it.
        """
        catalog = cls(config.gateway.separator)
        catalog._cache = cache
        catalog.max_name_length = config.gateway.max_name_length
        catalog.backends = {backend.name: backend for backend in backends}
        catalog.disabled = frozenset(b.name for b in config.backends if not b.enabled)
        catalog.federated = frozenset(n.name for n in config.federation.namespaces)
        for backend in backends:
            catalog._add_backend(backend)
        catalog._add_composites(definitions, owners or {}, config.policy.api_composites_call_hidden)
        catalog._finish(config)
        catalog._cache = None
        return catalog

    def seen_by(self, owner: str | None, *, call_hidden: bool = False) -> ToolResolver:
        """The catalog as the definer of an API composite sees it (see `DefinerView`)."""
        return DefinerView(self, owner, call_hidden)

    def _add_backend(self, backend: Backend) -> None:
        cache = self._cache
        derived = cache.backend_rows(backend, self) if cache is not None else None
        if derived is None:
            derived = self._backend_rows(backend)
            if cache is not None:
                cache.keep_backend_rows(backend, derived)
        self.warnings.extend(derived.warnings)
        for tool_name, entries in derived.rows:
            created: list[Entry] = []
            for entry in entries:
                if self._insert(entry, f"backend {backend.name!r} tool {tool_name!r}"):
                    created.append(entry)
                else:
                    created.append(replace(entry, hidden=True))  # lost a name conflict: not listed
            # `backend/tool` always reaches THIS backend's tool, even when its exposed name lost a conflict
            target = next(
                (e for e in created if self.entries.get(e.name) is e), created[-1] if created else None
            )
            if target is not None:
                for reference in (f"{backend.name}/{tool_name}", f"{backend.name}.{tool_name}"):
                    self.by_reference.setdefault(reference, target)
        config = backend.config
        if backend.status == "connected":  # a per-tool setting for a tool the backend lacks is a typo
            known = [tool.name for tool in backend.tools]
            for name in config.tools:
                if name not in known:
                    hint = did_you_mean(name, known)
                    self.issues.append(
                        CatalogIssue(
                            backend.name, Problem(f"tools.{name}", f"the backend has no tool {name!r}{hint}")
                        )
                    )

    def _backend_rows(self, backend: Backend) -> BackendRows:
        """The entries of each of `backend`'s tools, before any name conflict with other tools: what
        depends on this backend alone (filters, aliases, copies under the exposed names, secrets)."""
        config = backend.config
        expose, hide = PatternSet(config.expose), PatternSet(config.hide)
        rows: list[tuple[str, list[Entry]]] = []
        warnings: list[CatalogIssue] = []
        for tool in backend.tools:
            hidden = _filtered(tool, config, expose, hide)
            override = config.tools.get(tool.name)
            base_name = self._exposed_name(config, tool.name)
            names = [override.name] if override and override.name else []
            if not names or (override and override.keep_original):
                names.append(self._fitted(config, tool.name, base_name, warnings))
            listed_tool = tool
            if override and override.description is not None:
                listed_tool = tool.model_copy(update={"description": override.description})
            secrets = secret_fields(tool.input_schema)
            entries = [
                Entry(
                    name=name,
                    tool=listed_tool.model_copy(update={"name": name}),
                    backend=backend,
                    backend_tool=tool.name,
                    hidden=hidden,
                    filtered=hidden,
                    tool_class=_tool_class(tool, config, override),
                    timeout=override.timeout if override and override.timeout is not None else None,
                    max_concurrency=override.max_concurrency if override else None,
                    secrets=secrets,
                    owner=backend.owner,
                    tags=frozenset(override.tags) if override else frozenset(),
                )
                for name in names
            ]
            rows.append((tool.name, entries))
        return BackendRows(
            backend=backend,
            tools=tuple(backend.tools),
            config=config,
            owner=backend.owner,
            shape=(self.separator, self.max_name_length),
            rows=rows,
            warnings=warnings,
        )

    def _exposed_name(self, config: BackendConfig, tool_name: str) -> str:
        return f"{config.name}{self.separator}{tool_name}" if config.namespace else tool_name

    def _fitted(self, config: BackendConfig, tool_name: str, name: str, warnings: list[CatalogIssue]) -> str:
        """`name` shortened to `gateway.max_name_length`, with a warning: clients forward names to LLM
        APIs that refuse longer ones (OpenAI: 64)."""
        short = shortened(name, self.max_name_length)
        if short != name:
            warnings.append(
                CatalogIssue(
                    config.name,
                    Problem(
                        f"tools.{tool_name}",
                        f"the exposed name {name!r} is {len(name)} characters, more than "
                        f"gateway.max_name_length ({self.max_name_length}), which LLM APIs refuse: it is "
                        f"exposed as {short!r}; choose a name with an alias "
                        f'([backends.tools."{tool_name}"] name = "...")',
                    ),
                )
            )
        return short

    def _insert(self, entry: Entry, origin: str) -> bool:
        existing = self.entries.get(entry.name)
        if existing is not None:
            self.issues.append(
                CatalogIssue(
                    entry.name,
                    Problem(
                        "",
                        f"name conflict: {origin} and {_origin(existing)} are both exposed as {entry.name!r}; "
                        "rename one with an alias, or enable namespacing",
                    ),
                )
            )
            return False
        self.entries[entry.name] = entry
        return True

    def _add_composites(
        self, definitions: Sequence[Any], owners: Mapping[str, str | None], call_hidden: bool
    ) -> None:
        """Composites in dependency order. A name in `owners` is an API definition: it is built
        against what its tenant sees (`seen_by`); the others are the config file's."""
        pending = list(definitions)
        names = {d.name for d in pending}
        progress = True
        while pending and progress:
            progress = False
            for definition in list(pending):
                waits_on = _composite_dependencies(definition) & names
                if any(name not in self.entries for name in waits_on if name != definition.name):
                    continue
                pending.remove(definition)
                progress = True
                if definition.name in owners:
                    owner = owners[definition.name]
                    self._build_one(definition, owner, self.seen_by(owner, call_hidden=call_hidden))
                else:
                    self._build_one(definition, None, self)
        self._degrade_unbuildable(pending, names)

    def _degrade_unbuildable(self, pending: list[Any], names: set[str]) -> None:
        """Composites left unbuilt call each other in a cycle, or call one that failed to build."""
        edges = {d.name: frozenset(_composite_dependencies(d) & names) for d in pending}
        in_cycle: dict[str, str] = {}
        for cycle in find_composite_cycles(edges):
            for name in cycle:
                in_cycle.setdefault(name, format_cycle(cycle))
        for definition in pending:
            if definition.name in in_cycle:
                problem = f"composites call each other in a cycle: {in_cycle[definition.name]}"
            else:
                blocked = sorted(n for n in edges[definition.name] if n not in self.entries)
                problem = f"calls composites that could not be built: {', '.join(blocked)}"
            self._degrade(definition.name, [Problem("", problem)])

    def _build_one(self, definition: Any, owner: str | None, resolver: ToolResolver) -> None:
        cache = self._cache
        inputs = self._build_inputs(definition, owner, resolver) if cache is not None else None
        entry = cache.composite(definition, inputs) if cache is not None and inputs is not None else None
        if entry is None:
            entry = self._built(definition, owner, resolver)
            if entry is None:
                return
            if cache is not None and inputs is not None:
                cache.keep_composite(definition, inputs, entry)
        if self._insert(entry, f"composite tool {entry.name!r}"):
            assert entry.composite is not None
            for reference in entry.composite.references:
                target = self.lookup(reference)
                self.used_in.setdefault(target.name if target else reference, []).append(entry.name)

    def _build_inputs(self, definition: Any, owner: str | None, resolver: ToolResolver) -> tuple[Any, ...]:
        """Everything a composite's build reads from the catalog: whose view (owner, API or config
        file, hidden tools callable) and the entry each tool it calls resolves to now. Entries are
        immutable and reused from build to build, so the same entries mean the same composite."""
        view = (owner, resolver._call_hidden) if isinstance(resolver, DefinerView) else ("config file",)
        return (*view, *(self.lookup(ref.tool) for ref in tool_references(definition)))

    def _built(self, definition: Any, owner: str | None, resolver: ToolResolver) -> Entry | None:
        """The entry of a newly built composite; None when it could not be built (degraded)."""
        hidden = _filtered_references(definition, resolver)
        if hidden:
            self._degrade(definition.name, hidden)
            return None
        try:
            composite = kinds.build_composite(definition, resolver)
        except BuildError as error:
            self._degrade(definition.name, error.issues)
            return None
        except Exception as error:
            logger.exception("building composite %s failed", definition.name)
            self._degrade(definition.name, [Problem("", f"cannot build: {error}")])
            return None
        return Entry(
            name=composite.name,
            tool=composite.tool,
            composite=composite,
            tool_class="composite",
            secrets=secret_fields(composite.tool.input_schema),
            owner=owner,
        )

    def _degrade(self, name: str, problems: list[Problem]) -> None:
        problems = [self._explained(problem) for problem in problems]
        self.degraded[name] = list(problems)
        for problem in problems:
            self.issues.append(CatalogIssue(name, problem))

    def _explained(self, problem: Problem) -> Problem:
        """An unknown tool of a federated namespace no client serves right now says so."""
        for namespace in self.federated:
            if namespace in self.backends:
                continue
            if any(f"'{namespace}{mark}" in problem.message for mark in ("/", ".", self.separator)):
                return Problem(
                    problem.path,
                    f"{problem.message}; federated namespace {namespace!r} has no client connected "
                    "(active again as soon as one registers it)",
                )
        return problem

    def _finish(self, config: Config) -> None:
        self.listed = [entry.tool for entry in self.visible()]
        self.pinned = frozenset(config.gateway.pinned)
        self.list_composites = config.search.list_composites
        self.list_found = config.search.list_found
        if config.gateway.tool_exposure == "search":
            known = self._cache.search_terms if self._cache is not None else None
            self.index = ToolIndex(self.search_documents(), known)

    def search_documents(self) -> list[SearchDocument]:
        """Every listed tool with the text its backend and its config add to what it says itself
        (what `find_tools` ranks; the web UI's search box ranks the same)."""
        texts: dict[str, BackendText] = {}
        documents = []
        for entry in self.visible():
            backend = entry.backend
            if backend is None:
                documents.append(SearchDocument(entry.tool))
                continue
            config = backend.config
            if backend.name not in texts:
                texts[backend.name] = BackendText.of(
                    backend.name, backend.server_info, config.description, config.keywords
                )
            override = config.tools.get(entry.backend_tool or "")
            keywords = tuple(override.keywords) if override else ()
            documents.append(SearchDocument(entry.tool, texts[backend.name], keywords))
        return documents


@dataclass(slots=True, eq=False)
class BackendRows:
    """What `Catalog._backend_rows` derived from one backend: reused while the backend, its tool
    objects, its config and its owner are the same (a backend's tool list is replaced, never
    changed in place, when its tools change)."""

    backend: Backend
    tools: tuple[types.Tool, ...]
    config: BackendConfig
    owner: str | None
    shape: tuple[str, int]
    """The catalog's separator and `max_name_length`, which the exposed names depend on."""
    rows: list[tuple[str, list[Entry]]]
    """(the backend's name for a tool, its entries under each exposed name)."""
    warnings: list[CatalogIssue]

    def fits(self, backend: Backend, catalog: Catalog) -> bool:
        tools = backend.tools
        return (
            self.backend is backend
            and self.config is backend.config
            and self.owner == backend.owner
            and self.shape == (catalog.separator, catalog.max_name_length)
            and len(self.tools) == len(tools)
            and all(a is b for a, b in zip(self.tools, tools, strict=True))
        )


@dataclass(slots=True, eq=False)
class _BuiltComposite:
    definition: Any
    inputs: tuple[Any, ...]
    entry: Entry

    def fits(self, definition: Any, inputs: tuple[Any, ...]) -> bool:
        return (
            self.definition is definition
            and len(self.inputs) == len(inputs)
            and all(
                a is b or (isinstance(a, str | None) and a == b)
                for a, b in zip(self.inputs, inputs, strict=True)
            )
        )


class CatalogCache:
    """What catalog builds derived, for the next build to reuse: one gateway's, across its rebuilds.

    A registration, a disconnect or a stored definition changes one backend or one composite, but
    a full build redoes every backend's entries (copies under exposed names, secret fields) and
    every composite (its plan, its schemas) — a cost growing with every tenant's tools, paid on the
    event loop. With the cache a build replays the unchanged backends' entries and the unchanged
    composites (the same `Entry` objects, so their compiled argument validators are kept too), and
    derives only what changed (search mode's index, too, splits and stems only new tools' texts).
    Name conflicts, references and listings are resolved afresh each
    build, in the same order, so a snapshot is exactly what a build without the cache makes.
    `start`/`finish` around a gateway's own build forget what it no longer used.
    """

    def __init__(self) -> None:
        self._backends: dict[int, BackendRows] = {}
        self._composites: dict[int, _BuiltComposite] = {}
        self._used: set[int] = set()
        self.search_terms: DocumentTerms = {}
        """Each listed tool's terms in search mode's index (the index keeps only the current ones)."""

    def start(self) -> None:
        self._used = set()

    def finish(self) -> None:
        """Forget what the build since `start` did not use (backends gone, definitions removed)."""
        self._backends = {key: rows for key, rows in self._backends.items() if key in self._used}
        self._composites = {key: built for key, built in self._composites.items() if key in self._used}

    def backend_rows(self, backend: Backend, catalog: Catalog) -> BackendRows | None:
        found = self._backends.get(id(backend))
        if found is None or not found.fits(backend, catalog):
            return None
        self._used.add(id(backend))
        return found

    def keep_backend_rows(self, backend: Backend, rows: BackendRows) -> None:
        self._backends[id(backend)] = rows
        self._used.add(id(backend))

    def composite(self, definition: Any, inputs: tuple[Any, ...]) -> Entry | None:
        found = self._composites.get(id(definition))
        if found is None or not found.fits(definition, inputs):
            return None
        self._used.add(id(definition))
        return found.entry

    def keep_composite(self, definition: Any, inputs: tuple[Any, ...], entry: Entry) -> None:
        self._composites[id(definition)] = _BuiltComposite(definition, inputs, entry)
        self._used.add(id(definition))


class DefinerView:
    """The catalog as the definer of an API composite sees it: its tenant's and the shared tools.

    Another tenant's tool resolves to None, so referencing it answers exactly like an unknown
    name (its existence is not revealed). A tool the operator's filters hide resolves to None
    too unless `call_hidden` (the operator's `policy.api_composites_call_hidden`): otherwise a
    tenant could publish it under a name of its own; `filtered_reference` says why instead.
    """

    __slots__ = ("_call_hidden", "_catalog", "_owner")

    def __init__(self, catalog: Catalog, owner: str | None, call_hidden: bool) -> None:
        self._catalog = catalog
        self._owner = owner
        self._call_hidden = call_hidden

    def _visible(self, reference: str) -> Entry | None:
        entry = self._catalog.lookup(reference)
        return entry if entry is not None and entry.visible_to(self._owner) else None

    def resolve(self, reference: str) -> ResolvedTool | None:
        entry = self._visible(reference)
        if entry is None or (entry.filtered and not self._call_hidden):
            return None
        return entry.resolved()

    def names_like(self, reference: str) -> list[str]:
        """Only what this definer may call: another tenant's tools are never suggested."""
        return self._catalog.names_like(
            reference,
            lambda entry: entry.visible_to(self._owner) and (not entry.filtered or self._call_hidden),
        )

    def filtered_reference(self, reference: str) -> bool:
        """Whether `reference` names a tool this definer may see exists but may not call (filtered)."""
        entry = self._visible(reference)
        return entry is not None and entry.filtered and not self._call_hidden


HIDDEN_BY_OPERATOR = (
    "tool {tool!r} is hidden by the operator (hide, expose, read_only_only or hide_destructive): "
    "composites defined through the API cannot call it (the config file's can; the operator may "
    "allow it with policy.api_composites_call_hidden = true)"
)


def _filtered_references(definition: Any, resolver: ToolResolver) -> list[Problem]:
    """One problem per reference to a tool the operator hid, when `resolver` may not call those."""
    if not isinstance(resolver, DefinerView):
        return []
    return [
        Problem(ref.path, HIDDEN_BY_OPERATOR.format(tool=ref.tool))
        for ref in tool_references(definition)
        if resolver.filtered_reference(ref.tool)
    ]


def _filtered(tool: types.Tool, config: BackendConfig, expose: PatternSet, hide: PatternSet) -> bool:
    if expose and not expose.matches(tool.name):
        return True
    if hide and hide.matches(tool.name):
        return True
    annotations = tool.annotations
    read_only = bool(annotations and annotations.read_only_hint)
    if config.read_only_only and not read_only:
        return True
    return bool(config.hide_destructive and is_destructive(tool))


def is_destructive(tool: types.Tool) -> bool:
    """MCP semantics: a tool not marked read-only is destructive unless it says destructiveHint=false."""
    annotations = tool.annotations
    if annotations is None:
        return True
    if annotations.read_only_hint:
        return False
    return annotations.destructive_hint is not False


def _tool_class(tool: types.Tool, config: BackendConfig, override: Any) -> ToolClass:
    if tool.annotations is not None and tool.annotations.read_only_hint:
        return "read"
    promoted = (
        override.concurrent if override is not None and override.concurrent is not None else config.concurrent
    )
    return "concurrent" if promoted else "serial"


def _origin(entry: Entry) -> str:
    if entry.composite is not None:
        return f"composite tool {entry.name!r}"
    return f"backend {entry.backend.name if entry.backend else '?'!r} tool {entry.backend_tool!r}"


def _composite_dependencies(definition: Any) -> set[str]:
    """Exposed names a composite calls (other composites must be built first).

    Workflow steps (and forEach inner steps), fan-out targets and router
    operations all count: a fan-out or router may call a workflow declared
    after it, and a cycle through any of them must be found and named.
    """
    return {ref.tool for ref in tool_references(definition) if split_tool_ref(ref.tool) is None}

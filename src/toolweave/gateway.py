"""`Gateway`: backends + catalog snapshots + the executor's registry, assembled from a config.

The server, the CLI and the Python API all drive this one object. It knows
nothing of HTTP or databases: a run store, a backend resolver (a tenant's own
credentials) and a call observer (metrics) are handed in at construction by
whoever owns them, and extra (API-managed) definitions through
`set_definitions`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolweave.backends import create_backend
from toolweave.backends.base import Backend
from toolweave.backends.federated import Federation
from toolweave.backends.federated.protocol import GOING_AWAY
from toolweave.catalog.catalog import Catalog, CatalogCache
from toolweave.catalog.semantic import SemanticRanker, VectorStore
from toolweave.catalog.servers import listing_key
from toolweave.config.loader import load_config
from toolweave.config.models import BackendConfig, Config
from toolweave.executor import (
    Admission,
    BackendResolver,
    BatchCall,
    CallObserver,
    Limits,
    Policy,
    Registry,
    Session,
    ToolExecutor,
)
from toolweave.executor.call_rates import CallRates, MemoryCallRates
from toolweave.executor.in_flight import CallInFlight
from toolweave.runs import MemoryRunStore, RunStore
from toolweave.servers import VirtualServers, template_backend
from toolweave.tracing import CallTracer

if TYPE_CHECKING:
    from toolweave.credentials.backends import OAuthBackends

logger = logging.getLogger("toolweave.gateway")

REBUILD_SPACING = 4.0
"""After a rebuild, the next scheduled one waits this many times its cost: under any churn of
registrations or backend changes, rebuilding takes at most a fifth of the event loop's time."""
ToolsChanged = Callable[[], None]
FROM_CONFIG: Any = object()
"""`Gateway(tracer=...)`'s default: trace as the config's `[telemetry]` (and `OTEL_*`) say."""


class Gateway:
    """Use as `async with Gateway.from_config("toolweave.toml") as gw:`."""

    def __init__(
        self,
        config: Config,
        *,
        runs: RunStore | None = None,
        backend_resolver: BackendResolver | None = None,
        call_observer: CallObserver | None = None,
        vector_store: VectorStore | None = None,
        errlog: Any = None,
        credentials: OAuthBackends | None = None,
        call_rates: CallRates | None = None,
        tracer: CallTracer | None = FROM_CONFIG,
    ) -> None:
        """`runs`: where run records go (in memory by default); `backend_resolver`: picks the backend
        connection for a caller (a tenant's own credentials); `call_observer`: told of every
        finished call (metrics), in one place; `vector_store`: where search mode's tool vectors
        persist (`[search.embeddings]`; in memory by default); `errlog`: a stream stdio backends
        write their stderr to raw (default: each line becomes a log record of `toolweave.stderr.<backend>`);
        `credentials`: the OAuth grants of `[backends.oauth]` backends (default: those in the config's
        database, `gateway.database`, where `toolweave login` stores them; a step-up opens the browser);
        `call_rates`: who counts calls against `[limits]` call rates (this process by default; the
        server passes the Redis one when the deployment shares Redis); `tracer`: the spans of every
        call (by default the gateway makes its own from `[telemetry]` at `start()` and exports what is
        queued at `stop()`; None: no traces; the server passes the one its HTTP spans share)."""
        self.config = config
        self._trace_from_config = tracer is FROM_CONFIG
        if self._trace_from_config:
            tracer = None  # made at start(): its exporter thread lives between start() and stop()
        self.tracing: Any = None
        """The OpenTelemetry tracing this gateway made from `[telemetry]` (None: off, or given one)."""
        if credentials is None and any(b.oauth is not None for b in config.backends):
            from toolweave.credentials.backends import OAuthBackends  # the SDK's OAuth client, when used
            from toolweave.credentials.stored import StoredGrants

            # the grants `toolweave login` stored in the config's database, as the CLI uses them
            credentials = OAuthBackends(StoredGrants(config.gateway.database), interactive=True)
        self.credentials = credentials
        if credentials is not None:
            backend_resolver = _with_grants(credentials, backend_resolver)
        self.policy = Policy(config.policy)
        self.backends: dict[str, Backend] = {}
        self._errlog = errlog
        self._definitions: dict[str, tuple[str | None, Any]] = {}
        """Extra (API-managed) composite definitions: name → (owner tenant, definition)."""
        self.registry = Registry(
            Catalog.build(config, [], []),
            policy=self.policy,
            runs=runs if runs is not None else MemoryRunStore(),
            limits=Limits(
                max_depth=config.gateway.max_depth, record_direct_calls=config.gateway.record_direct_calls
            ),
            admission=Admission(config.policy.read_width, config.policy.concurrent_width),
            resolve_backend=backend_resolver,
            observe=call_observer,
            tracer=tracer,
            startup_wait=self.wait_for_first_connections,
            call_rates=call_rates if call_rates is not None else MemoryCallRates(config.limits),
            semantic=(
                SemanticRanker(config.search.embeddings, vector_store)
                if config.search.embeddings is not None and config.gateway.tool_exposure == "search"
                else None
            ),
        )
        """What every executor of this gateway reads (its catalog is swapped on each rebuild)."""
        self._listeners: list[ToolsChanged] = []
        self._resources: dict[str, tuple[types.Resource, Backend]] = {}
        self._templates: list[tuple[types.ResourceTemplate, Backend]] = []
        self._prompts: dict[str, tuple[types.Prompt, Backend, str]] = {}
        self.catalog_cache = CatalogCache()
        """What catalog builds derived (each backend's entries, each composite), reused by the next
        build where nothing changed: a registration costs its own namespace, not everyone's tools."""
        self._rebuild_pending = False
        self._rebuild_cost = 0.0
        self._rebuilt_at = 0.0
        self._reported_issues: list[Any] = []
        self._executor: ToolExecutor | None = None
        self._started = False
        self._startup_deadline: float | None = None
        """When waiting for backends' first connection attempts stops (monotonic seconds): start + startup_timeout."""
        self._first_attempts_over = False
        """Once no backend is on its first attempt (or the deadline passed), nothing will be waited for again."""
        self.servers = VirtualServers(self)
        """Virtual servers (`[[servers]]`, and the API's): named selections served at `/servers/{name}/mcp`."""
        self.servers.define([(server, None) for server in config.servers])
        self.federation = Federation(
            config, lookup=lambda name: self.registry.catalog.get(name), changed=self._federation_changed
        )
        """Namespaces registered by federated clients: backends whose tools run in the clients' networks."""

    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> Gateway:
        return cls(load_config(path), **options)

    # -- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, *, wait: bool = True) -> None:
        """Connect every backend concurrently; with `wait`, until each is up or the startup timeout passes."""
        self._startup_deadline = time.monotonic() + self.config.gateway.startup_timeout
        if self._trace_from_config and self.tracing is None:
            self.tracing = _tracing_of(self.config)
            self._set_tracer(self.tracing)
        for backend_config in self.config.backends:
            if not backend_config.enabled:
                continue
            token_auth = (
                await self.credentials.listing_auth(backend_config)
                if backend_config.oauth is not None and self.credentials is not None
                else None
            )
            backend = create_backend(
                backend_config, errlog=self._errlog, base_dir=self.base_dir, token_auth=token_auth
            )
            if self.credentials is not None and backend_config.oauth is not None:
                self.credentials.adopt(backend)
            backend.on_change(lambda _b: self.schedule_rebuild())
            self.backends[backend.name] = backend
        await asyncio.gather(*(backend.start() for backend in self.backends.values()))
        if wait:
            timeout = self.config.gateway.startup_timeout
            await asyncio.gather(*(b.wait_ready(timeout) for b in self.backends.values()))
        self._started = True
        self.rebuild()

    async def put_backend(self, config: BackendConfig) -> None:
        """Start a backend added while serving (the web UI's), or restart one with a new definition:
        the old connection (a stdio child) is stopped first, the catalog is rebuilt as it connects.
        Its first connection is not waited for: its status says how it goes."""
        old = self.backends.pop(config.name, None)
        if old is not None:
            await old.stop()
        backend = create_backend(config, errlog=self._errlog, base_dir=self.base_dir)
        backend.on_change(lambda _b: self.schedule_rebuild())
        self.backends[backend.name] = backend
        await backend.start()
        self.rebuild()

    async def drop_backend(self, name: str) -> bool:
        """Stop and forget a backend added while serving; its tools leave the catalog."""
        backend = self.backends.pop(name, None)
        if backend is None:
            return False
        await backend.stop()
        self.rebuild()
        return True

    def backends_starting(self) -> bool:
        """Whether a backend is still on its first connection attempt: until then, a tool it will
        offer is missing from the catalog without anything being wrong."""
        return any(backend.status == "starting" for backend in self.backends.values())

    def first_connections_pending(self) -> bool:
        """Whether a backend is still on its first connection attempt and gateway.startup_timeout has not
        passed since start: a listing or call now would miss tools that are only late. Cheap: once
        False it stays False (no backend makes a first attempt twice)."""
        if self._first_attempts_over:
            return False
        if self._startup_deadline is None:
            return False  # not started: nothing is connecting
        if self.backends_starting() and time.monotonic() < self._startup_deadline:
            return True
        self._first_attempts_over = True
        return False

    async def wait_for_first_connections(self) -> bool:
        """Wait until every backend still on its first connection attempt has finished it (at most until
        gateway.startup_timeout has passed since start, however many callers ask) and the catalog has
        been rebuilt; True when there was one to wait for."""
        if not self.first_connections_pending() or self._startup_deadline is None:
            return False
        starting = [backend for backend in self.backends.values() if backend.status == "starting"]
        timeout = max(0.0, self._startup_deadline - time.monotonic())
        await asyncio.gather(*(backend.wait_ready(timeout) for backend in starting))
        if self._rebuild_pending:  # their status change scheduled one for the next loop turn: now
            self.rebuild()
        return True

    def calls_in_flight(self) -> list[CallInFlight]:
        """The top-level calls running now: what a stopping gateway waits for."""
        return self.registry.in_flight.calls()

    def stop_calls(self) -> int:
        """Stop every call in flight now (a gateway told to stop at once): each caller gets an error
        saying so, and each run is left `interrupted` (resumable) when the run store closes."""
        return self.registry.in_flight.stop_all()

    async def stop(self) -> None:
        await self.federation.close(GOING_AWAY, "the gateway is shutting down")
        await asyncio.gather(*(backend.stop() for backend in self.backends.values()), return_exceptions=True)
        if self.credentials is not None:
            await self.credentials.close()
        if self.registry.semantic is not None:
            await self.registry.semantic.close()
        if self.tracing is not None:
            tracing, self.tracing = self.tracing, None
            self._set_tracer(None)
            await asyncio.to_thread(tracing.close)  # exports what is queued (bounded by its timeout)
        self._started = False

    def _set_tracer(self, tracer: CallTracer | None) -> None:
        self.registry.tracer = tracer
        for server in self.servers.by_name.values():
            server.registry.tracer = tracer

    @property
    def started(self) -> bool:
        """Between `start()` and `stop()`."""
        return self._started

    @property
    def runs(self) -> RunStore:
        return self.registry.runs

    # -- catalog -----------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        return self.registry.catalog

    def rebuild(self) -> Catalog:
        """Build a new snapshot and swap it in; tell listeners when what clients see changed."""
        started = time.perf_counter()
        try:
            return self._rebuild()
        finally:
            self._rebuilt_at = time.perf_counter()
            self._rebuild_cost = self._rebuilt_at - started

    def _rebuild(self) -> Catalog:
        old = self.registry.catalog
        definitions = [*self.config.composite_tools, *(d for _, d in self._definitions.values())]
        owners = {name: owner for name, (owner, _definition) in self._definitions.items()}
        backends = [*self.backends.values(), *self.federation.backends()]
        self.catalog_cache.start()
        catalog = Catalog.build(self.config, backends, definitions, owners=owners, cache=self.catalog_cache)
        self.catalog_cache.finish()
        self.registry.catalog = catalog
        if self.registry.semantic is not None and catalog.index is not None and self._started:
            self.registry.semantic.refresh(catalog.index)  # tool vectors in the background
        self._index_resources_and_prompts()
        self.servers.rebuild(catalog)
        self._report_issues(catalog)
        if _listing_changed(old.listed, catalog.listed):
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:
                    logger.exception("tools-changed listener failed")
        return catalog

    def _report_issues(self, catalog: Catalog) -> None:
        """Log each new catalog problem once, but not while backends are still connecting for the first
        time: a composite that names a tool of a backend not up yet is not a problem yet."""
        if self.backends_starting():
            return
        found = [*catalog.issues, *catalog.warnings]
        for issue in found:
            if issue not in self._reported_issues:
                logger.warning("catalog: %s", issue)
        self._reported_issues = found

    def _index_resources_and_prompts(self) -> None:
        """Resources keep their URIs (routed by URI); names and prompt names are namespaced like tools."""
        sep = self.config.gateway.separator
        resources: dict[str, tuple[types.Resource, Backend]] = {}
        templates: list[tuple[types.ResourceTemplate, Backend]] = []
        prompts: dict[str, tuple[types.Prompt, Backend, str]] = {}
        for backend in self.backends.values():
            prefix = f"{backend.name}{sep}" if backend.config.namespace else ""
            for resource in backend.resources:
                named = resource.model_copy(update={"name": prefix + resource.name})
                resources.setdefault(str(resource.uri), (named, backend))
            for template in backend.resource_templates:
                templates.append((template.model_copy(update={"name": prefix + template.name}), backend))
            for prompt in backend.prompts:
                name = prefix + prompt.name
                prompts.setdefault(name, (prompt.model_copy(update={"name": name}), backend, prompt.name))
        self._resources, self._templates, self._prompts = resources, templates, prompts

    def resources(self) -> dict[str, tuple[types.Resource, Backend]]:
        return self._resources

    def resource_templates(self) -> list[types.ResourceTemplate]:
        return [template for template, _ in self._templates]

    def resource_template_pairs(self) -> list[tuple[types.ResourceTemplate, Backend]]:
        """Each resource template with the backend that serves it."""
        return list(self._templates)

    def backend_for_template(self, uri: str) -> Backend | None:
        """The backend whose resource template's fixed prefix matches `uri`."""
        return template_backend(self._templates, uri)

    def prompts(self) -> dict[str, tuple[types.Prompt, Backend, str]]:
        return self._prompts

    def schedule_rebuild(self) -> None:
        """Coalesce changes into one rebuild: on the next loop turn, or once the loop has had
        `REBUILD_SPACING` times the last rebuild's cost to itself.

        A rebuild's cost grows with every tenant's tools; without the spacing, one tenant
        registering and dropping namespaces in a loop would keep the event loop rebuilding.
        """
        if not self._started or self._rebuild_pending:
            return
        self._rebuild_pending = True
        wait = self._rebuilt_at + REBUILD_SPACING * self._rebuild_cost - time.perf_counter()
        asyncio.get_running_loop().call_later(max(0.0, wait), self._scheduled_rebuild)

    def _federation_changed(self) -> None:
        if self._started:
            self.schedule_rebuild()
        else:
            self.rebuild()

    def _scheduled_rebuild(self) -> None:
        self._rebuild_pending = False
        self.rebuild()

    def on_tools_changed(self, listener: ToolsChanged) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def set_definitions(self, definitions: Mapping[str, tuple[str | None, Any]]) -> Catalog:
        """Replace the API-managed definitions (name → (owner tenant, definition)) and rebuild."""
        self._definitions = dict(definitions)
        return self.rebuild()

    # -- the Python API ----------------------------------------------------

    def executor(self, session: Session | None = None) -> ToolExecutor:
        """An executor for `session` (the local operator by default); executors of the same
        session share its admission pools."""
        return ToolExecutor(self.registry, session)

    @property
    def default_executor(self) -> ToolExecutor:
        if self._executor is None:
            self._executor = ToolExecutor(self.registry)
        return self._executor

    def list_tools(self, tenant: str | None = None) -> list[types.Tool]:
        """What a client sees in tools/list (search mode: find_tools, call_tool and the pinned tools)."""
        return self.registry.catalog.listing(tenant)

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> types.CallToolResult:
        """Call a tool; every failure (even arguments that are not an object) is an `isError` result."""
        return await self.default_executor.call(name, arguments if arguments is not None else {})

    async def execute_batch(
        self, calls: Sequence[BatchCall | Mapping[str, Any]], *, cancel: asyncio.Event | None = None
    ) -> list[types.CallToolResult]:
        return await self.default_executor.execute_batch(calls, cancel=cancel)

    def export(self, format: str, names: Sequence[str] | None = None) -> Any:
        from toolweave.export import export_tools

        tools = (
            self.list_tools()
            if names is None
            else [entry.tool for n in names if (entry := self.catalog.get(n))]
        )
        return export_tools(tools, format)

    def describe_backends(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """Every backend (`tenant` None: the operator), or those a tenant's caller sees: the configured
        ones, shared federated namespaces and its own. Another tenant's namespace is not listed."""
        every = [*self.backends.values(), *self.federation.backends()]
        return [b.describe() for b in every if tenant is None or b.owner in (None, tenant)]

    @property
    def base_dir(self) -> Path:
        return Path(self.config.source).parent if self.config.source else Path.cwd()


def _listing_changed(old: Sequence[types.Tool], new: Sequence[types.Tool]) -> bool:
    """Whether a client would notice the listing changed. Entries the catalog cache reused hold the
    very same tool objects, so only the tools that are new objects are compared by content."""
    if len(old) != len(new):
        return True
    return any(a is not b and listing_key([a]) != listing_key([b]) for a, b in zip(old, new, strict=True))


def _with_grants(credentials: OAuthBackends, other: BackendResolver | None) -> BackendResolver:
    """The backend resolver: an OAuth backend's connection for the caller's grant, else `other`'s
    (a tenant's connection headers)."""

    async def resolve(backend: Backend, session: Session) -> Backend:
        if backend.config.oauth is not None:
            return await credentials(backend, session)
        return await other(backend, session) if other is not None else backend

    return resolve


def _tracing_of(config: Config) -> Any:
    """`[telemetry]`'s tracing, or None when it is off (then the OpenTelemetry SDK is not imported)."""
    from toolweave.telemetry import Tracing

    return Tracing.from_config(config)

"""Virtual servers as the gateway hosts them: each a catalog view with its own registry, listing,
list-changed listeners, resources and prompts, and who may use it.

The `Gateway` owns one `VirtualServers`; on every catalog rebuild it rebuilds each server's view
(`catalog/servers.py`) and tells only the servers whose listing changed. A `VirtualServer` offers
what the MCP front reads from a gateway (`catalog`, `registry`, `list_tools`, `on_tools_changed`,
`resources`, `prompts`, ...), so `/servers/{name}/mcp` is served by the same front as `/mcp`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types

from toolweave.backends.base import Backend
from toolweave.catalog.catalog import Catalog
from toolweave.catalog.servers import (
    Selection,
    ToolKey,
    build_view,
    composites_reaching_out,
    hidden_twins,
    listing_key,
    selection_problems,
)
from toolweave.config.patterns import PatternSet
from toolweave.config.servers import ServerConfig
from toolweave.executor import Registry, Session
from toolweave.problems import Problem

if TYPE_CHECKING:
    from toolweave.config.models import Config

logger = logging.getLogger("toolweave.servers")
Listener = Callable[[], None]


class ServedGateway(Protocol):
    """What a virtual server reads of the gateway it is a view of: `toolweave.gateway.Gateway`, which
    imports this module (hence a Protocol, not the class)."""

    config: Config
    registry: Registry
    backends: dict[str, Backend]

    @property
    def catalog(self) -> Catalog: ...

    def first_connections_pending(self) -> bool: ...

    async def wait_for_first_connections(self) -> bool: ...

    def resources(self) -> dict[str, tuple[types.Resource, Backend]]: ...

    def resource_template_pairs(self) -> list[tuple[types.ResourceTemplate, Backend]]: ...

    def prompts(self) -> dict[str, tuple[types.Prompt, Backend, str]]: ...


def template_backend(templates: list[tuple[types.ResourceTemplate, Backend]], uri: str) -> Backend | None:
    """The backend whose resource template's fixed prefix (up to its first `{`) starts `uri`: where
    a `resources/read` of a templated URI goes, for the gateway and a virtual server alike."""
    for template, backend in templates:
        prefix = str(template.uri_template).split("{", 1)[0]
        if prefix and uri.startswith(prefix):
            return backend
    return None


class VirtualServer:
    """One virtual server: its definition, its current view and who listens for its changes."""

    def __init__(
        self, config: ServerConfig, gateway: ServedGateway, *, owner: str | None = None, source: str = "file"
    ) -> None:
        self.config = config
        self.name = config.name
        self.owner = owner
        """The tenant that defined it through the API (None: the config file's, or the operator's)."""
        self.source = source
        """`file` (`[[servers]]`, read-only through the API) or `api` (`/api/v1/servers`)."""
        self.gateway = gateway
        self.selection = Selection(config)
        self.search = (config.tool_exposure or gateway.config.gateway.tool_exposure) == "search"
        base = gateway.registry
        self.registry = Registry(
            Catalog(base.catalog.separator),
            policy=base.policy,
            runs=base.runs,
            limits=base.limits,
            admission=base.admission,
            resolve_backend=base.resolve_backend,
            observe=base.observe,
            startup_wait=base.startup_wait,
            call_rates=base.call_rates,
            tracer=base.tracer,
        )
        """The gateway's registry with this server's view as its catalog (pools, runs, policy, call rates
        and tracing shared: a call through a server is charged and traced as one through `/mcp`)."""
        self._key: list[ToolKey] = []
        """The listing key of the current view (what `rebuild` compares the next one with)."""
        self.served: dict[str, str] = {}
        """Each name this server lists → that tool's name in the catalog (they differ for an alias)."""
        self._listeners: list[Listener] = []
        self._resources: dict[str, tuple[types.Resource, Backend]] = {}
        self._templates: list[tuple[types.ResourceTemplate, Backend]] = []
        self._prompts: dict[str, tuple[types.Prompt, Backend, str]] = {}
        self._resource_patterns = PatternSet(config.resources or ())
        self._prompt_patterns = PatternSet(config.prompts or ())

    # -- what the MCP front reads -------------------------------------------

    @property
    def catalog(self) -> Catalog:
        return self.registry.catalog

    @property
    def backends(self) -> Mapping[str, Backend]:
        return self.gateway.backends

    def first_connections_pending(self) -> bool:
        return bool(self.gateway.first_connections_pending())

    async def wait_for_first_connections(self) -> bool:
        """The gateway's wait (its rebuild swaps this server's view too)."""
        return bool(await self.gateway.wait_for_first_connections())

    def list_tools(self, tenant: str | None = None) -> list[types.Tool]:
        return self.registry.catalog.listing(tenant)

    def on_tools_changed(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def resources(self) -> dict[str, tuple[types.Resource, Backend]]:
        return self._resources

    def resource_templates(self) -> list[types.ResourceTemplate]:
        return [template for template, _ in self._templates]

    def backend_for_template(self, uri: str) -> Backend | None:
        return template_backend(self._templates, uri)

    def prompts(self) -> dict[str, tuple[types.Prompt, Backend, str]]:
        return self._prompts

    # -- access -------------------------------------------------------------

    def allows(self, session: Session) -> bool:
        """Whether `session` may use this server: any of `access`'s tenants, scopes or claims admits;
        an empty `access` admits everyone who may use `/mcp`; the local operator (auth off) always."""
        access = self.config.access
        if session.label == "local":
            return True
        if self.owner is not None and session.tenant != self.owner:
            return False  # a tenant's own server, whatever its `access` says
        if access.open:
            return True
        if session.tenant is not None and session.tenant in access.tenants:
            return True
        if not session.scopes.isdisjoint(access.scopes):
            return True
        return _claims_admit(access.claims, session_claims(session))

    def visible_to(self, session: Session) -> bool:
        """Listed to `session` (REST, UI): one it may use."""
        return self.allows(session)

    # -- rebuilding ---------------------------------------------------------

    def rebuild(self, catalog: Catalog, twins: dict[str, Any], keys: dict[int, ToolKey]) -> bool:
        """Swap in the view over a new snapshot; True when what this server lists changed (`keys`:
        listing keys of the snapshot's tools, shared by all views)."""
        self.selection.forget_beyond(4 * len(catalog.entries) + 64)
        view, self.served = build_view(catalog, self.selection, twins, self.search)
        self.registry.catalog = view
        self._filter_resources_and_prompts()
        key = listing_key(view.listed, keys)
        changed = key != self._key
        self._key = key
        return changed

    def changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                logger.exception("server %s: tools-changed listener failed", self.name)

    def problems(self) -> list[Problem]:
        """What in this server's definition selects or names nothing now, then its notes."""
        return [*self.mistakes(), *self.notes()]

    def mistakes(self) -> list[Problem]:
        """What in this server's definition selects or names nothing now (likely a typo)."""
        return selection_problems(self.gateway.catalog, self.catalog, self.config)

    def notes(self) -> list[Problem]:
        """Its composites checked against its selection: the tools they call that it does not serve."""
        return composites_reaching_out(self.gateway.catalog, self.catalog, self.served)

    def _filter_resources_and_prompts(self) -> None:
        backends = self.selection.backends
        gateway = self.gateway

        def served(backend: Backend, key: str, patterns: PatternSet, given: bool) -> bool:
            return patterns.matches(key) if given else backend.name in backends

        resources_given = self.config.resources is not None
        prompts_given = self.config.prompts is not None
        self._resources = {
            uri: found
            for uri, found in gateway.resources().items()
            if served(found[1], uri, self._resource_patterns, resources_given)
        }
        self._templates = [
            (template, backend)
            for template, backend in gateway.resource_template_pairs()
            if served(backend, str(template.uri_template), self._resource_patterns, resources_given)
        ]
        self._prompts = {
            name: found
            for name, found in gateway.prompts().items()
            if served(found[1], name, self._prompt_patterns, prompts_given)
        }


class VirtualServers:
    """The gateway's virtual servers by name, rebuilt together on every catalog rebuild."""

    def __init__(self, gateway: ServedGateway) -> None:
        self._gateway = gateway
        self.by_name: dict[str, VirtualServer] = {}
        self.exposing: dict[str, tuple[str, ...]] = {}
        """Catalog name → the servers that list it ("Used in"), refreshed with the views."""
        self._catalog: Catalog | None = None
        self._twins: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.by_name)

    def get(self, name: str) -> VirtualServer | None:
        return self.by_name.get(name)

    def define(
        self,
        servers: Sequence[tuple[ServerConfig, str | None]],
        api: Sequence[tuple[ServerConfig, str | None]] = (),
    ) -> None:
        """Replace the set of servers: the config file's (`servers`) and the API's (`api`), each with
        its owner tenant; a server whose definition did not change keeps its object (and its MCP
        clients). A name the file defines is never taken by the API's (the service refuses it)."""
        kept: dict[str, VirtualServer] = {}
        for source, defined in (("file", servers), ("api", api)):
            for config, owner in defined:
                if config.name in kept:
                    continue
                current = self.by_name.get(config.name)
                if (
                    current is not None
                    and current.config == config
                    and current.owner == owner
                    and current.source == source
                ):
                    kept[config.name] = current
                else:
                    kept[config.name] = VirtualServer(config, self._gateway, owner=owner, source=source)
        self.by_name = kept
        if self._catalog is not None:
            self.rebuild(self._catalog, force=True)

    def rebuild(self, catalog: Catalog, *, force: bool = False) -> None:
        """New views over `catalog`; each server whose listing changed tells its listeners."""
        if catalog is not self._catalog:
            self._catalog = catalog
            self._twins = hidden_twins(catalog) if self.by_name else {}
        elif not force:
            return
        if self.by_name and not self._twins:
            self._twins = hidden_twins(catalog)
        exposing: dict[str, list[str]] = {}
        keys: dict[int, ToolKey] = {}
        for server in self.by_name.values():
            if server.rebuild(catalog, self._twins, keys):
                server.changed()
            for original in server.served.values():
                exposing.setdefault(original, []).append(server.name)
        self.exposing = {name: tuple(found) for name, found in exposing.items()}

    def used_in(self, name: str, viewer: Session) -> list[str]:
        """The virtual servers that list the catalog tool `name` ("Used in") and `viewer` may use:
        another tenant's, or a config server whose `access` does not admit it, are not its business."""
        found = self.exposing.get(name, ())
        return [s for s in found if self.by_name[s].visible_to(viewer)]

    def visible_to(self, session: Session) -> list[VirtualServer]:
        return [server for server in self.by_name.values() if server.visible_to(session)]


def session_claims(session: Session) -> Mapping[str, Any]:
    """The IdP token claims of a session (empty for an API key or the local operator)."""
    claims = getattr(session, "claims", None)
    if claims is None:
        claims = session.extra.get("claims")
    return claims if isinstance(claims, Mapping) else {}


def _claims_admit(wanted: Mapping[str, Sequence[str]], claims: Mapping[str, Any]) -> bool:
    for claim, values in wanted.items():
        have = claims.get(claim)
        if isinstance(have, str):
            have = have.split() if claim in ("scope", "scp") else [have]
        if isinstance(have, list | tuple) and any(str(v) in values for v in have):
            return True
    return False

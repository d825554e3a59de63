"""Virtual servers defined through the API: validated, stored, served beside the config file's.

As for composite tools (services/definitions.py) the order of a change is the point: validate
FIRST — the definition's own problems (the `[[servers]]` model, sizes), a name the config file
or another server already holds, `backends` naming nothing, a tenant naming other tenants in
its `access`, and what in its selection matches nothing in the catalog the definer sees —
reporting every problem with its path, and only then store it and hand the whole set to the
gateway (`VirtualServers.define`). A rejected change stores nothing; the previous version keeps
serving.

The config file's servers stay the operator's and read-only here. A tenant's server is its
own: only its tenant may use or see it, whatever its `access` says (which may narrow it to
some of the tenant's keys' scopes or claims, never open it to another tenant). The operator's
(no tenant) servers are shared like the file's.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from toolweave.actor import Actor
from toolweave.catalog.servers import hidden_twins, selection_problems
from toolweave.config.servers import ServerConfig
from toolweave.gateway import Gateway
from toolweave.problems import Problem, join_path, problems_from_validation
from toolweave.servers import VirtualServer
from toolweave.services.definitions import merge_patch, size_problems
from toolweave.services.errors import DefinitionError
from toolweave.store import Conflict, ServerRepository, StoredServer
from toolweave.suggest import did_you_mean

logger = logging.getLogger("toolweave.servers")


class ServerService:
    """Owns one gateway's API-defined virtual servers (an in-memory mirror of the store)."""

    def __init__(self, gateway: Gateway, repo: ServerRepository) -> None:
        self.gateway = gateway
        self.repo = repo
        self._known: dict[str, tuple[StoredServer, ServerConfig]] = {}
        """Server id → its current row and parsed definition."""
        self._lock = asyncio.Lock()
        self.on_change: Callable[[StoredServer], None] | None = None
        """Told of every create, update and delete made here (the change feed tells other gateways)."""

    # -- loading -------------------------------------------------------------

    async def load(self) -> None:
        """Read every stored server (all tenants) and serve them beside the file's."""
        async with self._lock:
            self._known = self._parsed(await self.repo.list_all())
            self._apply()
        logger.info("loaded %d virtual server(s) from the database", len(self._known))

    async def reload(self) -> bool:
        """Another gateway on the database changed servers: read them again; True when any changed."""
        async with self._lock:
            rows = await self.repo.list_all()
            before = {row.id: row.version for row, _ in self._known.values()}
            if {row.id: row.version for row in rows} == before:
                return False
            self._known = self._parsed(rows)
            self._apply()
        logger.info("virtual servers changed in the database: now %d from the API", len(self._known))
        return True

    def _parsed(self, rows: list[StoredServer]) -> dict[str, tuple[StoredServer, ServerConfig]]:
        parsed: dict[str, tuple[StoredServer, ServerConfig]] = {}
        for row in rows:
            try:
                parsed[row.id] = (row, ServerConfig.model_validate(row.definition))
            except ValidationError as error:  # stored by a newer or older gateway: skipped, said once
                logger.warning("virtual server %s is not served: %s", row.name, error)
        return parsed

    def _apply(self) -> None:
        ordered = sorted(self._known.values(), key=lambda known: (known[0].created_at, known[0].id))
        file_servers = [(config, None) for config in self.gateway.config.servers]
        self.gateway.servers.define(file_servers, [(config, row.tenant) for row, config in ordered])

    def _changed(self, row: StoredServer) -> None:
        if self.on_change is not None:
            try:
                self.on_change(row)
            except Exception:
                logger.exception("announcing the change of virtual server %s failed", row.name)

    # -- changes ---------------------------------------------------------------

    async def create(
        self, tenant: str | None, definition: Any, note: str | None, *, actor: Actor | None = None
    ) -> StoredServer:
        async with self._lock:
            config = self.validate(definition, tenant, exclude_id=None)
            stored = await self.repo.create(tenant, definition, note, actor=actor)
            self._known[stored.id] = (stored, config)
            self._apply()
        self._changed(stored)
        return stored

    async def update(
        self,
        name: str,
        tenant: str | None,
        patch: Mapping[str, Any],
        note: str | None,
        expected_version: int | None,
        *,
        actor: Actor | None = None,
    ) -> StoredServer:
        """Merge `patch` (RFC 7396) into the current definition; nothing changes unless all is valid."""
        async with self._lock:
            current = await self.repo.get(name, tenant)
            if expected_version is not None and expected_version != current.version:
                raise Conflict(
                    f"virtual server {current.name!r} is at version {current.version}, not {expected_version}: "
                    "reload it and apply the change again"
                )
            definition = merge_patch(current.definition, patch)
            config = self.validate(definition, current.tenant, exclude_id=current.id)
            stored = await self.repo.update(
                current.id, tenant, definition, note, expected_version or current.version, actor=actor
            )
            self._known[stored.id] = (stored, config)
            self._apply()
        self._changed(stored)
        return stored

    async def delete(self, name: str, tenant: str | None, *, actor: Actor | None = None) -> StoredServer:
        async with self._lock:
            gone = await self.repo.delete(name, tenant, actor=actor)
            self._known.pop(gone.id, None)
            self._apply()
        self._changed(gone)
        return gone

    # -- validation ------------------------------------------------------------

    def validate(self, definition: Any, tenant: str | None, *, exclude_id: str | None) -> ServerConfig:
        """The parsed definition, or a `DefinitionError` naming every problem (422) or the clash (409)."""
        too_big = size_problems(definition, self.gateway.config.limits)
        if too_big:
            raise DefinitionError(
                422, "definition_too_large", f"the definition has {len(too_big)} problem(s)", too_big
            )
        try:
            config = ServerConfig.model_validate(definition)
        except ValidationError as error:
            problems = problems_from_validation(error, "definition", ServerConfig)
            raise DefinitionError(
                422, "invalid_definition", f"the definition has {len(problems)} problem(s)", problems
            ) from None
        self.check_name(config.name, tenant, exclude_id=exclude_id)
        problems = [*self._reference_problems(config, tenant), *self._selection_problems(config, tenant)]
        if problems:
            raise DefinitionError(
                422,
                "invalid_definition",
                f"the definition has {len(problems)} problem(s) against this gateway",
                problems,
            )
        return config

    def problems_of(
        self, definition: Any, tenant: str | None, *, exclude_id: str | None = None
    ) -> list[Problem]:
        """Every problem `create` or `update` would refuse `definition` for, saving nothing (the UI's
        builder checks as you type with the same checks)."""
        try:
            self.validate(definition, tenant, exclude_id=exclude_id)
        except DefinitionError as error:
            return error.problems or [Problem("definition.name", error.message)]
        return []

    def check_name(self, name: str, tenant: str | None, *, exclude_id: str | None) -> None:
        """409 when the config file or another API server holds `name` (one URL path for everyone)."""
        if any(server.name == name for server in self.gateway.config.servers):
            raise DefinitionError(
                409,
                "name_conflict",
                f"virtual server {name!r} is defined in {self.gateway.config.source or 'the config file'}; "
                "choose another name",
                [Problem("definition.name", "taken by a server of the config file")],
            )
        for row, _config in self._known.values():
            if row.name == name and row.id != exclude_id:
                theirs = tenant is not None and row.tenant != tenant
                raise DefinitionError(
                    409,
                    "name_conflict",
                    f"a virtual server named {name!r} already exists on this gateway"
                    + (" (names are unique across tenants)" if theirs else "")
                    + "; choose another name",
                    [Problem("definition.name", "already used on this gateway")],
                )

    def _reference_problems(self, config: ServerConfig, tenant: str | None) -> list[Problem]:
        gateway = self.gateway
        known = [b.name for b in gateway.config.backends] + [
            n.name for n in gateway.config.federation.namespaces
        ]
        known += [
            name
            for name, backend in gateway.federation.namespaces.items()
            if tenant is None or backend.tenant in (None, tenant)
        ]
        problems = []
        for index, backend in enumerate(config.backends):
            if backend not in known:
                problems.append(
                    Problem(
                        join_path("definition.backends", index),
                        f"unknown backend or federated namespace {backend!r} "
                        f"(known: {', '.join(sorted(set(known))) or 'none'}){did_you_mean(backend, known)}",
                    )
                )
        others = [t for t in config.access.tenants if t != tenant]
        if tenant is not None and others:
            problems.append(
                Problem(
                    "definition.access.tenants",
                    f"a tenant's server serves only its own tenant ({tenant!r}), not {', '.join(map(repr, others))}",
                )
            )
        return problems

    def _selection_problems(self, config: ServerConfig, tenant: str | None) -> list[Problem]:
        """What in the selection matches nothing in the catalog `tenant` sees (a typo, most likely)."""
        catalog = self.gateway.catalog
        seen = copy.copy(catalog)  # the same snapshot, less what another tenant owns
        seen.entries = {
            name: e for name, e in catalog.entries.items() if tenant is None or e.visible_to(tenant)
        }
        trial = VirtualServer(config, self.gateway, owner=tenant, source="api")
        trial.rebuild(seen, hidden_twins(seen), {})
        return selection_problems(seen, trial.catalog, config, "definition")

    # -- lookups -----------------------------------------------------------------

    def stored(self, name: str) -> StoredServer | None:
        """The current row of the API server `name` (None: the file's, or none)."""
        return next((row for row, _ in self._known.values() if row.name == name), None)

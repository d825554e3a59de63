"""The gateway's federated namespaces: who registered what, and whether they may.

A registration is checked against everything the gateway already serves —
a namespace can never take a configured backend's name, an exposed name
another tool has, a namespace the operator reserved for another tenant, or a
namespace another tenant's clients hold — and every problem is reported at
once. Clients of one namespace must serve the same tools; the namespace
lives while at least one of them is connected. Each change of the set of
namespaces calls `changed` (the gateway rebuilds its catalog and tells MCP
clients `list_changed`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from toolweave.backends.base import Backend
from toolweave.backends.federated.backend import FederatedBackend, Server
from toolweave.backends.federated.manifest import Manifest
from toolweave.backends.federated.peer import FederatedPeer
from toolweave.config.models import Config, FederationConfig
from toolweave.problems import Problem, join_path
from toolweave.rates import TokenBucket

logger = logging.getLogger("toolweave.federation")

FLOOD_PENALTY = 10.0
"""Seconds a key's new connections are refused after one of them was closed for flooding: reconnecting
at once would buy a fresh burst every time."""
REGISTRATION_BURST_SECONDS = 10.0
"""A tenant's new connections may come in bursts of this many seconds' worth of
`[federation] registrations_per_second_per_tenant` (its clients reconnecting after a restart)."""


class Federation:
    """Every federated namespace of one gateway (registered here, or relayed from another gateway)."""

    def __init__(self, config: Config, *, lookup: Callable[[str], Any], changed: Callable[[], None]) -> None:
        """`lookup(name)`: the catalog entry exposed under `name`, if any; `changed()`: the namespaces changed."""
        self.settings: FederationConfig = config.federation
        self.separator = config.gateway.separator
        self._backend_names = frozenset(b.name for b in config.backends)
        self._lookup = lookup
        self._changed = changed
        self.namespaces: dict[str, FederatedBackend] = {}
        self.peers: set[FederatedPeer] = set()
        """Clients connected to this gateway (registered or still registering)."""
        self.local_listeners: list[Callable[[], None]] = []
        """Told when a client connected HERE registers or leaves (the relay announces it to other gateways)."""
        self.namespace_listeners: list[Callable[[str, str, Server], None]] = []
        """Told `("registered" | "dropped", namespace, client)` when a client connected HERE brings a
        namespace into being or its last client here leaves (the audit log records both)."""
        self._numbers = itertools.count(1)
        self._flooded: dict[str | None, float] = {}
        """Key → until when its new connections are refused, after one of them flooded."""
        self._registrations: dict[str, TokenBucket] = {}
        """Tenant → its bucket of new connections (`registrations_per_second_per_tenant`)."""

    def backends(self) -> list[Backend]:
        return list(self.namespaces.values())

    def flooded(self, key_id: str | None) -> None:
        """A connection of `key_id` was closed for flooding: refuse its next ones for `FLOOD_PENALTY` s."""
        now = time.monotonic()
        self._flooded = {key: until for key, until in self._flooded.items() if until > now}
        self._flooded[key_id] = now + FLOOD_PENALTY

    def flood_penalty(self, key_id: str | None) -> str | None:
        """Why a new connection of `key_id` is refused now (it flooded a moment ago), or None."""
        left = self._flooded.get(key_id, 0.0) - time.monotonic()
        if left <= 0:
            return None
        return f"flooding: this key flooded a connection; reconnect after {math.ceil(left)} s"

    def admission(self, key_id: str | None, tenant: str | None) -> str | None:
        """Why a new connection of `key_id` (of `tenant`) is refused now, before anything is read from it;
        None: admitted (and counted against its tenant's registration rate).

        Every connection costs the gateway a manifest to read and check and a catalog change, on the
        event loop every tenant shares: a key may hold only `max_pending_per_key` connections still
        registering, and a tenant may open only `registrations_per_second_per_tenant` a second. The
        local operator (no key: auth is off) is not limited.
        """
        refused = self.flood_penalty(key_id)
        if refused is not None or key_id is None:
            return refused
        settings = self.settings
        pending = sum(1 for peer in self.peers if peer.key_id == key_id and not peer.registered)
        if pending >= settings.max_pending_per_key:
            return f"{pending} connections of this key still registering ([federation] max_pending_per_key)"
        rate = settings.registrations_per_second_per_tenant
        if rate <= 0 or tenant is None:
            return None
        bucket = self._registrations.get(tenant)
        if bucket is None:
            burst = max(1.0, rate * REGISTRATION_BURST_SECONDS)
            bucket = self._registrations[tenant] = TokenBucket(rate, burst)
        if not bucket.take():
            wait = math.ceil(bucket.retry_after())
            return (
                f"registering too fast ([federation] registrations_per_second_per_tenant); retry in {wait} s"
            )
        return None

    def next_number(self) -> int:
        """A number that tells apart the clients of one gateway in errors and logs."""
        return next(self._numbers)

    # -- registration ---------------------------------------------------------------

    def check(self, manifest: Manifest, tenant: str | None) -> list[Problem]:
        """Every reason this tenant may not register this manifest now (empty: it may)."""
        namespace = manifest.namespace
        problems = self._ownership_problems(namespace, tenant)
        existing = self.namespaces.get(namespace)
        if existing is not None and not problems:
            if existing.manifest.fingerprint() != manifest.fingerprint():
                problems.append(
                    Problem(
                        "tools",
                        f"namespace {namespace!r} is already served with other tools (names or input schemas); "
                        "every client of a namespace must serve the same tools",
                    )
                )
            if len(existing.servers) >= self.settings.max_clients:
                problems.append(
                    Problem(
                        "namespace",
                        f"namespace {namespace!r} has the most clients allowed ({self.settings.max_clients})",
                    )
                )
        if existing is None and not problems:
            problems.extend(self._tenant_share_problems(manifest, tenant))
        for index, tool in enumerate(manifest.tools):
            exposed = f"{namespace}{self.separator}{tool.name}"
            entry = self._lookup(exposed)
            if entry is not None and (entry.backend is None or entry.backend.name != namespace):
                problems.append(
                    Problem(
                        join_path("tools", index, "name"),
                        f"would be exposed as {exposed!r}, which is already {_what(entry)}; rename the tool",
                    )
                )
        return problems

    def _tenant_share_problems(self, manifest: Manifest, tenant: str | None) -> list[Problem]:
        """A new namespace past its tenant's share: namespaces and tools one tenant may hold.

        Without these, one tenant could hold tens of thousands of tools that every catalog
        rebuild (everyone's registrations, everyone's composites) pays for.
        """
        if tenant is None:
            return []  # the local operator (no auth): its own gateway
        held = [backend for backend in self.namespaces.values() if backend.tenant == tenant]
        settings = self.settings
        who = f"tenant {tenant!r}"
        if len(held) >= settings.max_namespaces_per_tenant:
            return [
                Problem(
                    "namespace",
                    f"{who} holds {len(held)} federated namespaces already, the most allowed "
                    "([federation] max_namespaces_per_tenant)",
                )
            ]
        tools = sum(len(backend.manifest.tools) for backend in held)
        if tools + len(manifest.tools) > settings.max_tools_per_tenant:
            return [
                Problem(
                    "tools",
                    f"{who} holds {tools} federated tools; {len(manifest.tools)} more is past the limit of "
                    f"{settings.max_tools_per_tenant} ([federation] max_tools_per_tenant)",
                )
            ]
        return []

    def _ownership_problems(self, namespace: str, tenant: str | None) -> list[Problem]:
        if namespace in self._backend_names:
            return [Problem("namespace", f"namespace {namespace!r} is the name of a configured backend")]
        reserved = self.settings.reserved(namespace)
        if (
            reserved is not None
            and reserved.tenant is not None
            and tenant is not None
            and reserved.tenant != tenant
        ):
            return [Problem("namespace", f"namespace {namespace!r} is reserved for another tenant")]
        existing = self.namespaces.get(namespace)
        if existing is not None and existing.tenant != tenant:
            return [Problem("namespace", f"namespace {namespace!r} is registered by another tenant")]
        return []

    def attach(self, server: Server, manifest: Manifest, tenant: str | None) -> list[str]:
        """Serve `manifest` with `server` (checked first with `check`); the exposed names of its tools."""
        namespace = manifest.namespace
        backend = self.namespaces.get(namespace)
        if backend is None:
            reserved = self.settings.reserved(namespace)
            backend = FederatedBackend(
                manifest,
                owner=tenant,
                shared=bool(reserved and reserved.shared),
                timeout=self.settings.call_timeout,
            )
            backend.servers.append(server)
            self.namespaces[namespace] = backend
            logger.info(
                "federation: %s registered namespace %s (%d tools)",
                server.label,
                namespace,
                len(manifest.tools),
            )
            self._changed()
            self._namespace_event("registered", namespace, server)
        else:
            backend.servers.append(server)
            logger.info("federation: %s joined namespace %s", server.label, namespace)
        self._local_changed(server)
        return [f"{namespace}{self.separator}{tool.name}" for tool in manifest.tools]

    def detach(self, server: Server) -> None:
        """`server` serves nothing any more; a namespace left without clients goes away."""
        for namespace, backend in list(self.namespaces.items()):
            if server in backend.servers:
                backend.servers.remove(server)
                if not backend.servers:
                    del self.namespaces[namespace]
                    backend._set_status("stopped", f"its last client ({server.label}) left")
                    logger.info(
                        "federation: namespace %s has no clients left (%s left)", namespace, server.label
                    )
                    self._changed()
                    self._namespace_event("dropped", namespace, server)
                self._local_changed(server)

    def local_servers(self, namespace: str) -> list[Server]:
        """The clients of `namespace` connected to this gateway (not those relayed from others)."""
        backend = self.namespaces.get(namespace)
        return [s for s in backend.servers if not s.relayed] if backend else []

    def _local_changed(self, server: Server) -> None:
        if server.relayed:
            return
        for listener in list(self.local_listeners):
            try:
                listener()
            except Exception:
                logger.exception("federation: a registration listener failed")

    def _namespace_event(self, event: str, namespace: str, server: Server) -> None:
        if server.relayed:
            return
        for listener in list(self.namespace_listeners):
            try:
                listener(event, namespace, server)
            except Exception:
                logger.exception("federation: a namespace listener failed")

    # -- disconnecting --------------------------------------------------------------

    async def disconnect_key(self, key_id: str | None, code: int, reason: str) -> int:
        """Close every client connected with `key_id` (every client when None); how many were closed."""
        doomed = [peer for peer in self.peers if key_id is None or peer.key_id == key_id]
        await asyncio.gather(*(peer.close(code, reason) for peer in doomed))
        return len(doomed)

    async def close(self, code: int, reason: str) -> None:
        await self.disconnect_key(None, code, reason)


def _what(entry: Any) -> str:
    if entry.composite is not None:
        return f"the composite tool {entry.name!r}"
    backend = entry.backend
    if isinstance(backend, FederatedBackend):
        return f"tool {entry.backend_tool!r} of federated namespace {backend.name!r}"
    return f"tool {entry.backend_tool!r} of backend {backend.name if backend else '?'!r}"

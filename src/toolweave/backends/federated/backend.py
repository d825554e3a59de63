"""A federated namespace as a backend: its tools run in the clients that registered them.

The catalog, the executor, composites and metrics see an ordinary backend
named after the namespace. A call goes to the least busy of the namespace's
clients (fewest calls in flight); when a client leaves, the next calls go to
the others, and its calls in flight fail at once with an error naming it.
The backend never holds a client's credentials: it only forwards the call.
"""

from __future__ import annotations

from typing import Any, Protocol

import mcp_types as types
from pydantic import ValidationError

from toolweave.backends.base import Backend
from toolweave.backends.errors import PeerLost
from toolweave.backends.federated.manifest import Manifest, ToolMeta
from toolweave.common_types import ProgressFn
from toolweave.config.models import BackendConfig
from toolweave.results import error_result
from toolweave.schemas.validate import compile_validator
from toolweave.wire.errors import RpcError


class Server(Protocol):
    """Whatever runs a namespace's calls: a client connected here, or one on another gateway (relayed)."""

    label: str
    in_flight: int
    relayed: bool
    """True for a client of another gateway, reached through the relay."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float, progress: ProgressFn | None
    ) -> dict[str, Any]: ...


class FederatedBackend(Backend):
    """One namespace: its tools (from the first client's manifest) and the clients serving them."""

    def __init__(self, manifest: Manifest, *, owner: str | None, shared: bool, timeout: float) -> None:
        super().__init__(
            BackendConfig.model_construct(name=manifest.namespace, timeout=timeout, namespace=True)
        )
        self.owner = None if shared else owner
        self.tenant = owner
        """The tenant whose clients may register this namespace (even when it is shared)."""
        self.manifest = manifest
        self.tools = list(manifest.tools)
        self.servers: list[Server] = []
        self._output_checks: dict[str, Any] = {}
        """Per tool: the validator of its `outputSchema` (None: it declares none), built on first use."""
        self._set_status("connected")
        self._ready.set()

    @property
    def meta(self) -> dict[str, ToolMeta]:
        return self.manifest.meta

    async def start(self) -> None:
        """Nothing to start: the clients connect to the gateway."""

    async def stop(self) -> None:
        self.servers.clear()
        self._set_status("stopped")

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "transport": "federated",
            "clients": [server.label for server in self.servers],
        }

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        return await self.call_on(self.servers, name, arguments, timeout=timeout, progress=progress)

    async def call_on(
        self,
        servers: list[Server],
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        """Call on the least busy of `servers` (a client here before one on another gateway, when tied)."""
        if not servers:
            return error_result(
                f"federated namespace {self.name!r} has no client connected; "
                "the tool runs in its client's network, so try again once it reconnects"
            )
        server = min(servers, key=lambda s: (s.in_flight, s.relayed))
        limit = timeout if timeout is not None else self.config.timeout
        try:
            raw = await server.call_tool(name, arguments, timeout=limit, progress=progress)
        except PeerLost as lost:
            return error_result(
                f"federated client {server.label} disconnected during the call to {name!r} ({lost}); "
                "the call may or may not have run there"
            )
        except TimeoutError:
            return error_result(
                f"tool {name!r} on federated client {server.label} timed out after {limit:g}s "
                "(the client was told to cancel it)"
            )
        except RpcError as error:
            return error_result(f"federated client {server.label} rejected the call to {name!r}: {error}")
        try:
            result = types.CallToolResult.model_validate(raw, by_name=False)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(map(str, first["loc"])) or "result"
            return error_result(
                f"federated client {server.label} returned an invalid result for {name!r}: {where}: {first['msg']}"
            )
        problem = self._output_problem(name, result)
        if problem is not None:
            return error_result(
                f"federated client {server.label} returned a result for {name!r} that does not match "
                f"the tool's outputSchema: {problem}"
            )
        return result

    def _output_problem(self, name: str, result: types.CallToolResult) -> str | None:
        """Why a successful result breaks the tool's declared `outputSchema` (as MCP clients check), if it does."""
        if result.is_error:
            return None
        if name not in self._output_checks:
            tool = next((t for t in self.tools if t.name == name), None)
            schema = tool.output_schema if tool is not None else None
            self._output_checks[name] = compile_validator(schema) if schema else None
        validator = self._output_checks[name]
        if validator is None:
            return None
        if result.structured_content is None:
            return "it has no structuredContent"
        error = next(iter(validator.iter_errors(result.structured_content)), None)
        if error is None:
            return None
        where = ".".join(str(part) for part in error.absolute_path)
        return f"{where or 'structuredContent'}: {error.message[:300]}"

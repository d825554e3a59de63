"""Federated tools: tools that run in a client's own network, registered over one outbound connection.

The gateway side (`Federation`, `FederatedBackend`, `serve_client`) is
transport-agnostic; the server's WebSocket route feeds it frames. The client
side (`client`: `FederatedClient`, `federated_tool`; `bridge`: a stdio MCP
server connected out) is imported on its own, as it needs `websockets`.
"""

from toolweave.backends.federated.backend import FederatedBackend
from toolweave.backends.federated.federation import Federation
from toolweave.backends.federated.manifest import Manifest, ToolMeta
from toolweave.backends.federated.session import serve_client

__all__ = ["FederatedBackend", "Federation", "Manifest", "ToolMeta", "serve_client"]

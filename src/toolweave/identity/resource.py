"""The gateway as an OAuth protected resource (MCP authorization; RFC 9728, RFC 6750, RFC 8707).

`ProtectedResource` knows the resource URL (`public_url` + `/mcp`), the issuers clients may log in
at, and writes the metadata document and the `WWW-Authenticate` challenges: a 401 names the
metadata URL and the scopes to ask for, so an MCP client can discover the issuer and log its user
in by itself; a 403 names the scope a method needs (`insufficient_scope`), so it can step up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

from toolweave.config.auth import TOOLWEAVE_SCOPES

METADATA_PATH = "/.well-known/oauth-protected-resource"
LOGIN_SCOPES = ("tools:read", "tools:call")
"""What a 401 tells a client to ask for: what using the gateway's tools takes."""
_NOT_QUOTABLE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""Characters RFC 6750 does not allow in a quoted `error_description`."""


def public_url_for(configured: str, host: str, port: int) -> str:
    """`gateway.public_url`, else `http://host:port` of the bind address (0.0.0.0 → 127.0.0.1)."""
    if configured:
        return configured.rstrip("/")
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"


MCP_PATH = "/mcp"
VIRTUAL_PATH = re.compile(r"^/servers/[a-z0-9][a-z0-9_-]{0,63}/mcp$")
"""A virtual server's MCP endpoint (`/servers/{name}/mcp`): a resource of this gateway too."""


@dataclass(frozen=True, slots=True)
class ProtectedResource:
    """The gateway's MCP endpoints as OAuth resources: `/mcp` and each `/servers/{name}/mcp`, each
    with its own metadata document (RFC 9728 §3.1 puts it under the resource's own path, and
    clients check that the `resource` it names is the URL they connect to)."""

    public_url: str
    issuers: tuple[str, ...]

    @property
    def resource(self) -> str:
        return f"{self.public_url}{MCP_PATH}"

    def resource_at(self, path: str) -> str:
        """The resource of the MCP endpoint at `path` (`/mcp` for anything else)."""
        return f"{self.public_url}{path if VIRTUAL_PATH.match(path) else MCP_PATH}"

    def metadata_url_at(self, path: str = MCP_PATH) -> str:
        """RFC 9728 §3.1: the well-known path inserted between the host and the resource's path."""
        parts = urlsplit(self.resource_at(path))
        return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path}"

    @property
    def metadata_url(self) -> str:
        return self.metadata_url_at(MCP_PATH)

    def metadata(self, path: str = MCP_PATH) -> bytes:
        from mcp.shared.auth import ProtectedResourceMetadata  # only with issuers: not at start-up

        document = ProtectedResourceMetadata(
            resource=self.resource_at(path),  # type: ignore[arg-type]
            authorization_servers=list(self.issuers),  # type: ignore[arg-type]
            scopes_supported=list(TOOLWEAVE_SCOPES),
            bearer_methods_supported=["header"],
            resource_name="toolweave",
        )
        return orjson.dumps(document.model_dump(mode="json", exclude_none=True))

    def unauthorized(self, description: str | None, path: str = MCP_PATH) -> str:
        """The 401 challenge; `description` None when no credential was sent (RFC 6750 §3.1: no error)."""
        parts = [f'resource_metadata="{self.metadata_url_at(path)}"', f'scope="{" ".join(LOGIN_SCOPES)}"']
        if description is not None:
            parts += ['error="invalid_token"', f'error_description="{quotable(description)}"']
        return "Bearer " + ", ".join(parts)

    def insufficient_scope(self, scope: str, description: str, path: str = MCP_PATH) -> str:
        return (
            f'Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{self.metadata_url_at(path)}", '
            f'error_description="{quotable(description)}"'
        )


def quotable(text: str) -> str:
    """`text` made safe inside a quoted challenge parameter (and kept short)."""
    return _NOT_QUOTABLE.sub("?", text)[:300]

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
from mcp.shared.auth import ProtectedResourceMetadata

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


@dataclass(frozen=True, slots=True)
class ProtectedResource:
    public_url: str
    issuers: tuple[str, ...]

    @property
    def resource(self) -> str:
        return f"{self.public_url}/mcp"

    @property
    def metadata_url(self) -> str:
        """RFC 9728 §3.1: the well-known path inserted between the host and the resource's path."""
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path}"

    def metadata(self) -> bytes:
        document = ProtectedResourceMetadata(
            resource=self.resource,  # type: ignore[arg-type]
            authorization_servers=list(self.issuers),  # type: ignore[arg-type]
            scopes_supported=list(TOOLWEAVE_SCOPES),
            bearer_methods_supported=["header"],
            resource_name="toolweave",
        )
        return orjson.dumps(document.model_dump(mode="json", exclude_none=True))

    def unauthorized(self, description: str | None) -> str:
        """The 401 challenge; `description` None when no credential was sent (RFC 6750 §3.1: no error)."""
        parts = [f'resource_metadata="{self.metadata_url}"', f'scope="{" ".join(LOGIN_SCOPES)}"']
        if description is not None:
            parts += ['error="invalid_token"', f'error_description="{quotable(description)}"']
        return "Bearer " + ", ".join(parts)

    def insufficient_scope(self, scope: str, description: str) -> str:
        return (
            f'Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{self.metadata_url}", '
            f'error_description="{quotable(description)}"'
        )


def quotable(text: str) -> str:
    """`text` made safe inside a quoted challenge parameter (and kept short)."""
    return _NOT_QUOTABLE.sub("?", text)[:300]

"""The headers every UI and docs page carries: a Content-Security-Policy without inline script,
no framing, no MIME sniffing, no referrer leaking tool names."""

from __future__ import annotations

from starlette.responses import Response

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The UI's own pages: every script and style is a file from our origin."""

DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
"""Swagger UI and ReDoc set inline styles (never inline scripts); ReDoc runs its search in a blob worker."""


def secure(response: Response, csp: str = PAGE_CSP) -> Response:
    headers = response.headers
    headers["content-security-policy"] = csp
    headers["x-frame-options"] = "DENY"
    headers["x-content-type-options"] = "nosniff"
    headers["referrer-policy"] = "same-origin"
    headers.setdefault("cache-control", "no-store")
    return response

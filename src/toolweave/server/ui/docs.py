"""`/docs` (Swagger UI) and `/redoc` from files served by the gateway itself: they work offline.

The pages are static HTML with no inline script: each one loads the vendored bundle and
a small starter file from `/static/ui/`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from toolweave.server.ui.security import DOCS_CSP, secure

_SWAGGER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>toolweave API</title>
<link rel="stylesheet" href="/static/ui/vendor/swagger-ui/swagger-ui.css"></head>
<body><div id="swagger-ui" data-spec-url="/openapi.json"></div>
<script src="/static/ui/vendor/swagger-ui/swagger-ui-bundle.js"></script>
<script src="/static/ui/docs-swagger.js"></script></body></html>
"""

_REDOC = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>toolweave API</title></head>
<body><redoc spec-url="/openapi.json"></redoc>
<script src="/static/ui/vendor/redoc/redoc.standalone.js"></script></body></html>
"""


async def swagger(_request: Request) -> Response:
    return secure(HTMLResponse(_SWAGGER), DOCS_CSP)


async def redoc(_request: Request) -> Response:
    return secure(HTMLResponse(_REDOC), DOCS_CSP)


def docs_routes() -> list[Route]:
    return [
        Route("/docs", swagger, methods=["GET"], include_in_schema=False),
        Route("/redoc", redoc, methods=["GET"], include_in_schema=False),
    ]

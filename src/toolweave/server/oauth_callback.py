"""`GET /oauth/callback`: where a backend's authorization server sends a person back after they
authorized toolweave (`[backends.oauth]`, a served gateway). The authorization it completes was
started by a call (its `isError` result or URL elicitation) or by the UI's Connect; the page says how
it went. Not behind API keys: the unguessable `state` is the credential, used once.
"""

from __future__ import annotations

from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

CALLBACK_PATH = "/oauth/callback"


def _page(status: int, title: str, text: str) -> HTMLResponse:
    body = (
        "<!doctype html><html><head><meta charset=utf-8><title>toolweave</title></head>"
        f"<body><h1>{escape(title)}</h1><p>{escape(text)}</p>"
        '<p><a href="/backends">Backends</a></p></body></html>'
    )
    return HTMLResponse(body, status_code=status, headers={"cache-control": "no-store"})


def callback_route(gateway: Any) -> Route:
    async def callback(request: Request) -> HTMLResponse:
        credentials = getattr(gateway, "credentials", None)
        query = request.query_params
        state = query.get("state")
        if credentials is None or not state:
            return _page(400, "Nothing to complete", "This gateway started no authorization with this link.")
        error = query.get("error_description") or query.get("error")
        try:
            backend = await credentials.pending.complete(state, query.get("code"), query.get("iss"), error)
        except LookupError as missing:
            return _page(400, "Link expired", f"{missing}; start again from the tool call or the UI.")
        except Exception as failed:  # noqa: BLE001 - the flow's failure, in words, never a traceback
            return _page(400, "Authorization failed", str(failed) or type(failed).__name__)
        return _page(200, f"Connected to {backend}", "You can close this window and call the tool again.")

    return Route(CALLBACK_PATH, callback, methods=["GET"])

"""A small REST API for the HTTP-backend tests: `python apiserver.py PORT` serves it on loopback.

Its OpenAPI document is `apiserver_openapi.yaml` (served at /openapi.yaml and
/openapi.json). Most routes echo the request exactly as it arrived (raw path,
raw query string, headers, cookies, body), so the tests can check the wire
encoding; others exercise auth, statuses, slowness, wrong content, sizes,
retries and redirects. `GET /stats` reports counters (token fetches, attempts).
"""

from __future__ import annotations

import asyncio
import base64
import sys
from collections import Counter
from pathlib import Path

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

API_KEY = "k-123456789"
BEARER = "b-abcdefgh"
BASIC = ("alice", "s3cret-pw")
CLIENT = ("client-1", "client-secret-1")
TENANT_KEY = "tenant-key-987654"
TOKEN_LIFETIME = 2  # seconds, so the tests see a refresh

DOCUMENT = yaml.safe_load((Path(__file__).with_name("apiserver_openapi.yaml")).read_text())
stats: Counter[str] = Counter()
tokens: dict[str, float] = {}


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse(
        {
            "method": request.method,
            "path": request.scope["raw_path"].decode(),
            "query": request.scope["query_string"].decode(),
            "headers": {
                k: v
                for k, v in request.headers.items()
                if k.startswith("x-") or k in ("accept", "content-type", "authorization", "cookie")
            },
            "body": body.decode("utf-8", "replace"),
            "client_port": request.client.port if request.client else None,
        }
    )


async def openapi_json(_request: Request) -> JSONResponse:
    return JSONResponse(DOCUMENT)


async def openapi_yaml(_request: Request) -> Response:
    return Response(yaml.safe_dump(DOCUMENT, sort_keys=False), media_type="application/yaml")


def _authorized(request: Request) -> str | None:
    kind = request.path_params["kind"]
    headers = request.headers
    if kind == "apikey-header":
        ok = headers.get("x-api-key") in (API_KEY, TENANT_KEY)
    elif kind == "apikey-query":
        ok = request.query_params.get("api_key") in (API_KEY, TENANT_KEY)
    elif kind == "apikey-cookie":
        ok = request.cookies.get("session_key") in (API_KEY, TENANT_KEY)
    elif kind == "bearer":
        ok = headers.get("authorization") in (f"Bearer {BEARER}", f"Bearer {TENANT_KEY}")
    elif kind == "basic":
        expected = "Basic " + base64.b64encode(f"{BASIC[0]}:{BASIC[1]}".encode()).decode()
        ok = headers.get("authorization") == expected
    elif kind == "oauth":
        value = headers.get("authorization", "").removeprefix("Bearer ")
        ok = value in tokens and tokens[value] > asyncio.get_running_loop().time()
    else:
        ok = False
    return None if ok else kind


async def secure(request: Request) -> Response:
    stats[f"secure:{request.path_params['kind']}"] += 1
    refused = _authorized(request)
    if refused is not None:
        # echoes the credential it got, like some APIs do: the gateway must scrub it
        got = request.headers.get("x-api-key") or request.query_params.get("api_key") or ""
        return JSONResponse({"error": "unauthorized", "kind": refused, "got": got}, status_code=401)
    return JSONResponse({"ok": True, "kind": request.path_params["kind"]})


async def token(request: Request) -> Response:
    stats["token"] += 1
    form = await request.form()
    expected = "Basic " + base64.b64encode(f"{CLIENT[0]}:{CLIENT[1]}".encode()).decode()
    if form.get("grant_type") != "client_credentials" or request.headers.get("authorization") != expected:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    value = f"t-{stats['token']}"
    tokens[value] = asyncio.get_running_loop().time() + TOKEN_LIFETIME
    return JSONResponse(
        {
            "access_token": value,
            "token_type": "Bearer",
            "expires_in": TOKEN_LIFETIME,
            "scope": form.get("scope", ""),
        }
    )


async def revoke_tokens(_request: Request) -> Response:
    tokens.clear()
    return Response(status_code=204)


async def status(request: Request) -> Response:
    code = int(request.path_params["code"])
    return JSONResponse(
        {"error": f"status {code} as asked", "key": request.headers.get("x-api-key", "")}, status_code=code
    )


async def slow(request: Request) -> Response:
    await asyncio.sleep(float(request.query_params.get("seconds", "5")))
    return JSONResponse({"slept": True})


async def not_json(_request: Request) -> Response:
    return Response("<html><body>Gateway error page</body></html>", media_type="text/html")


async def broken_json(_request: Request) -> Response:
    return Response('{"id": 1,', media_type="application/json")


async def wrong_shape(_request: Request) -> Response:
    return JSONResponse({"id": "not-a-number", "name": "x"})


async def pet(request: Request) -> Response:
    return JSONResponse({"id": int(request.path_params["id"]), "name": "Rex", "tag": None})


async def pets(request: Request) -> Response:
    return JSONResponse(
        [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}][: int(request.query_params.get("limit", "2"))]
    )


async def binary(_request: Request) -> Response:
    return Response(b"\x89PNG\r\n\x1a\n" + bytes(range(64)), media_type="image/png")


async def pdf(_request: Request) -> Response:
    return Response(b"%PDF-1.4 fake", media_type="application/pdf")


async def text(_request: Request) -> Response:
    return PlainTextResponse("plain words")


async def big(request: Request) -> Response:
    size = int(request.query_params.get("bytes", "100000"))
    return JSONResponse({"data": "x" * size})


async def flaky(request: Request) -> Response:
    key = request.query_params.get("key", "")
    stats[f"flaky:{key}"] += 1
    if stats[f"flaky:{key}"] <= int(request.query_params.get("fail", "1")):
        return JSONResponse({"error": "try again"}, status_code=503)
    return JSONResponse({"attempts": stats[f"flaky:{key}"]})


async def flaky_post(request: Request) -> Response:
    stats[f"flaky-post:{request.query_params.get('key', '')}"] += 1
    return JSONResponse({"error": "try again"}, status_code=503)


async def redirect_same(_request: Request) -> Response:
    return RedirectResponse("/pets/7", status_code=302)


async def redirect_other(request: Request) -> Response:
    port = request.url.port
    return RedirectResponse(f"http://localhost:{port}/pets/8", status_code=302)


async def get_stats(_request: Request) -> Response:
    return JSONResponse(dict(stats))


routes = [
    Route("/openapi.json", openapi_json),
    Route("/openapi.yaml", openapi_yaml),
    Route("/stats", get_stats),
    Route("/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    Route("/secure/{kind}", secure),
    Route("/oauth/token", token, methods=["POST"]),
    Route("/oauth/revoke", revoke_tokens, methods=["POST"]),
    Route("/status/{code:int}", status, methods=["GET", "POST"]),
    Route("/slow", slow),
    Route("/not-json", not_json),
    Route("/broken-json", broken_json),
    Route("/wrong-shape", wrong_shape),
    Route("/pets", pets),
    Route("/pets/{id:int}", pet),
    Route("/binary", binary),
    Route("/pdf", pdf),
    Route("/text", text),
    Route("/big", big),
    Route("/flaky", flaky),
    Route("/flaky-post", flaky_post, methods=["POST"]),
    Route("/redirect-same", redirect_same),
    Route("/redirect-other", redirect_other),
]
app = Starlette(routes=routes)


def main() -> None:
    port = int(sys.argv[1])
    origin = f"http://127.0.0.1:{port}"
    DOCUMENT["servers"] = [{"url": origin}]
    flows = DOCUMENT["components"]["securitySchemes"]["OAuth"]["flows"]
    flows["clientCredentials"]["tokenUrl"] = f"{origin}/oauth/token"
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

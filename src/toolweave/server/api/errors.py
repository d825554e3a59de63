"""One error shape for the whole API, and the mapping of every failure onto it.

`{"error": {"code", "message", "problems": [{"path", "message"}]}}`. Bad
input of any kind is a 4xx listing every problem with its path; a 5xx means
a bug or an unreadable secret key, never bad input, and its message never
carries a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from toolweave.errors import ToolweaveError
from toolweave.problems import Problem, as_problems
from toolweave.results import META_KEY
from toolweave.services.errors import DefinitionError
from toolweave.store import Conflict, Forbidden, NotFound, SecretKeyError, StoreError, TooSoon

logger = logging.getLogger("toolweave.api")


class RateLimited(ToolweaveError):
    """A call refused by a `[limits]` call rate: `429 rate_limited` with `Retry-After`."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def refuse_if_rate_limited(*results: Any) -> None:
    """Raise `RateLimited` when every one of `results` (CallToolResults) was refused by a call rate."""
    refused = [_rate_limited(result) for result in results]
    if refused and all(found is not None for found in refused):
        limited = max(refused, key=lambda found: found[1])  # type: ignore[index]
        raise RateLimited(*limited)  # type: ignore[misc]


def _rate_limited(result: Any) -> tuple[str, int] | None:
    meta = (result.meta or {}).get(META_KEY) if result.is_error else None
    found = meta.get("rate_limited") if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        return None
    text = " ".join(getattr(item, "text", "") for item in result.content)
    return text, int(found.get("retry_after", 1))


class ApiError(ToolweaveError):
    """A refusal with its HTTP status, error code, message and every problem (path + message)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        problems: Sequence[Problem | tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.problems = as_problems(problems or ())


def error_body(code: str, message: str, problems: Sequence[Problem] = ()) -> dict[str, Any]:
    wire = [{"path": problem.path, "message": problem.message} for problem in problems]
    return {"error": {"code": code, "message": message, "problems": wire}}


def _response(status: int, code: str, message: str, problems: Sequence[Problem] = ()) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="toolweave"'} if status == 401 else None
    return JSONResponse(error_body(code, message, problems), status_code=status, headers=headers)


def _location(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        where, rest = parts[0], parts[1:]
        path = ""
        for part in rest:
            path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
        return f"{where}.{path}" if path else where
    return ".".join(parts)


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return _response(error.status, error.code, error.message, error.problems)

    @app.exception_handler(DefinitionError)
    async def _definition_error(_request: Request, error: DefinitionError) -> JSONResponse:
        return _response(error.status, error.code, error.message, error.problems)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = [
            Problem(_location(item.get("loc", ())), str(item.get("msg", "invalid value")))
            for item in error.errors()
        ]
        return _response(422, "invalid_request", f"the request has {len(problems)} problem(s)", problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = error.detail if isinstance(error.detail, str) else "request failed"
        return _response(error.status_code, _CODES.get(error.status_code, "error"), message)

    @app.exception_handler(NotFound)
    async def _not_found(_request: Request, error: NotFound) -> JSONResponse:
        return _response(404, "not_found", str(error))

    @app.exception_handler(Conflict)
    async def _conflict(_request: Request, error: Conflict) -> JSONResponse:
        return _response(409, "conflict", str(error))

    @app.exception_handler(Forbidden)
    async def _forbidden(_request: Request, error: Forbidden) -> JSONResponse:
        return _response(403, "forbidden", str(error))

    @app.exception_handler(RateLimited)
    async def _rate_limited_call(_request: Request, error: RateLimited) -> JSONResponse:
        answer = _response(429, "rate_limited", str(error))
        answer.headers["Retry-After"] = str(error.retry_after)
        return answer

    @app.exception_handler(TooSoon)
    async def _too_soon(_request: Request, error: TooSoon) -> JSONResponse:
        answer = _response(429, "too_soon", str(error))
        answer.headers["Retry-After"] = str(error.retry_after)
        return answer

    @app.exception_handler(ValueError)
    async def _value(_request: Request, error: ValueError) -> JSONResponse:
        return _response(422, "invalid_request", str(error))

    @app.exception_handler(SecretKeyError)
    async def _secret_key(_request: Request, error: SecretKeyError) -> JSONResponse:
        logger.error("secret key problem: %s", error)
        return _response(500, "secret_key", str(error))

    @app.exception_handler(StoreError)
    async def _store(_request: Request, error: StoreError) -> JSONResponse:
        logger.error("store error: %s", error)
        return _response(500, "store_error", str(error))

    @app.exception_handler(Exception)
    async def _bug(_request: Request, error: Exception) -> JSONResponse:
        logger.exception("unhandled error in the API")
        return _response(
            500, "internal_error", f"internal error ({type(error).__name__}); see the gateway's log"
        )

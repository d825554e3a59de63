"""OAuth error answers of the proxy's endpoints: Authlib's error types (RFC 6749 §5.2, RFC 7591 §3.2.2,
RFC 7009 §2.2.1, RFC 8707 `invalid_target`) as JSON with `Cache-Control: no-store`."""

from __future__ import annotations

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import errors
from authlib.oauth2.rfc7591 import errors as registration_errors
from starlette.requests import Request
from starlette.responses import JSONResponse

from toolweave.actor import Actor, Via
from toolweave.errors import ToolweaveError
from toolweave.identity import quotable

InvalidRequest = errors.InvalidRequestError
InvalidClient = errors.InvalidClientError
InvalidGrant = errors.InvalidGrantError
UnauthorizedClient = errors.UnauthorizedClientError
UnsupportedGrantType = errors.UnsupportedGrantTypeError
UnsupportedResponseType = errors.UnsupportedResponseTypeError
InvalidScope = errors.InvalidScopeError
AccessDenied = errors.AccessDeniedError
InvalidRedirectUri = registration_errors.InvalidRedirectURIError
InvalidClientMetadata = registration_errors.InvalidClientMetadataError


class InvalidTarget(OAuth2Error, ToolweaveError):
    """RFC 8707 §2: the `resource` is not one this authorization server issues tokens for."""

    error = "invalid_target"


class TemporarilyUnavailable(OAuth2Error, ToolweaveError):
    """Registrations over their rate or count (the client may retry later)."""

    error = "temporarily_unavailable"
    status_code = 429


NO_STORE = {"cache-control": "no-store", "pragma": "no-cache"}


def error_response(error: OAuth2Error) -> JSONResponse:
    body = {"error": error.error}
    if error.description:
        body["error_description"] = quotable(error.description)
    status = error.status_code or 400
    headers = dict(NO_STORE)
    if isinstance(error, InvalidClient) and status == 401:
        headers["www-authenticate"] = 'Basic realm="toolweave"'
    if isinstance(error, TemporarilyUnavailable):
        headers["retry-after"] = "60"
    return JSONResponse(body, status_code=status, headers=headers)


def fail(kind: type[OAuth2Error], description: str, status: int | None = None) -> OAuth2Error:
    """An error of `kind` saying why (`quotable` keeps RFC 6749's allowed characters only)."""
    error = kind.__new__(kind)  # some of Authlib's types take other arguments first; the base's will do
    OAuth2Error.__init__(error, description=quotable(description), status_code=status)
    return error


def request_actor(request: Request, who: str, tenant: str | None, via: Via = "rest") -> Actor:
    """The audit record's author of a proxy request (no `Session`: these endpoints are public)."""
    agent = request.headers.get("user-agent", "")[:200]
    address = request.client.host if request.client is not None else None
    source = f"{address} ({agent})" if address and agent else address or (agent or None)
    return Actor(tenant=tenant, who=who, via=via, source=source)


class Redirected(ToolweaveError):
    """An error to send to the client's (verified) redirect URI."""

    def __init__(self, error: OAuth2Error, redirect_uri: str, state: str | None) -> None:
        super().__init__(error.error)
        self.error, self.redirect_uri, self.state = error, redirect_uri, state

"""Config models of HTTP API backends: credentials (`auth`) and declared actions (`actions`).

A backend is an HTTP API when it has `openapi = "PATH_OR_URL"` (every operation
of the document becomes a tool) or `http = "BASE_URL"` with `[[backends.actions]]`
(each action one tool: a method, a URL template and an input schema). Both share
`auth`, `headers`, `timeout`, `retries` and the response bounds.

Credential values are `SecretStr`: printing, logging or dumping the config shows
`**********`, never the value.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from toolweave.fields import EXPOSED_NAME_RE, StrictModel
from toolweave.schemas.read import properties_of

HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE")
CREDENTIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "api_key": ("value",),
    "bearer": ("token",),
    "basic": ("username", "password"),
    "oauth2": ("client_id", "client_secret"),
}
"""Per auth type, the credential fields; a tenant's connection may give any of them by the same name."""
_OTHER_FIELDS: dict[str, tuple[str, ...]] = {
    "api_key": ("name", "in"),
    "bearer": (),
    "basic": (),
    "oauth2": ("token_url", "scopes", "audience", "client_auth"),
}
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
"""`{name}` in an action's URL or header template: the argument `name`, percent-encoded."""
FILTER_KINDS = ("id:", "tag:", "path:")


class HttpAuth(StrictModel):
    """How the gateway authenticates to the API; values from `${VAR}` or a tenant's connection."""

    type: Literal["api_key", "bearer", "basic", "oauth2"]
    scheme: str | None = None
    """The name of a `securitySchemes` entry of the OpenAPI document to take `name`/`in`/`token_url` from."""
    name: str | None = None
    """api_key: the header, query parameter or cookie name."""
    in_: Literal["header", "query", "cookie"] | None = Field(default=None, alias="in")
    value: SecretStr | None = None
    token: SecretStr | None = None
    username: SecretStr | None = None
    password: SecretStr | None = None
    token_url: str | None = None
    client_id: SecretStr | None = None
    client_secret: SecretStr | None = None
    scopes: list[str] = Field(default_factory=list)
    audience: str | None = None
    client_auth: Literal["basic", "body"] = "basic"
    """oauth2: send the client credentials as HTTP basic auth (RFC 6749 default) or in the form body."""

    @model_validator(mode="after")
    def _fields_fit_the_type(self) -> HttpAuth:
        given = {"in" if key == "in_" else key for key in self.model_fields_set} - {"type", "scheme"}
        allowed = {*CREDENTIAL_FIELDS[self.type], *_OTHER_FIELDS[self.type]}
        wrong = sorted(given - allowed)
        if wrong:
            raise ValueError(f"auth type {self.type!r} does not use {', '.join(wrong)}")
        if self.token_url is not None and not self.token_url.startswith(("http://", "https://")):
            raise ValueError("token_url must start with http:// or https://")
        return self

    def credential(self, field: str) -> str | None:
        """The configured value of a credential field (None or "" when the config leaves it to tenants)."""
        value = getattr(self, field, None)
        return value.get_secret_value() if isinstance(value, SecretStr) else None


class HttpAction(StrictModel):
    """One declared HTTP call as a tool: `GET /v1/forecast?lat={lat}` and an input schema."""

    name: str
    description: str = ""
    method: str = "GET"
    url: str
    """A path (joined to the backend's `http` base URL) or an absolute URL under it; `{arg}` placeholders."""
    input_schema: dict[str, Any] | None = None
    """JSON Schema of the arguments (an object); default: every placeholder a required string."""
    query: list[str] | None = None
    """Arguments sent as query parameters; default: the rest for GET/HEAD/DELETE/OPTIONS, none otherwise."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra headers; values may hold `{arg}` placeholders."""
    body: Literal["json", "form", "none"] | None = None
    """Where the remaining arguments go; default `json` for POST/PUT/PATCH, `none` otherwise."""
    output_schema: dict[str, Any] | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None

    @field_validator("name")
    @classmethod
    def _name_is_a_tool_name(cls, value: str) -> str:
        if not EXPOSED_NAME_RE.match(value):
            raise ValueError(f"action name {value!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        return value

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        method = value.upper()
        if method not in HTTP_METHODS:
            raise ValueError(f"method {value!r} must be one of {', '.join(HTTP_METHODS)}")
        return method

    @field_validator("url")
    @classmethod
    def _url_template(cls, value: str) -> str:
        if not value.startswith(("/", "http://", "https://")):
            raise ValueError("url must be a path starting with '/' or an absolute http(s) URL")
        stripped = PLACEHOLDER_RE.sub("", value)
        if "{" in stripped or "}" in stripped:
            raise ValueError("url has an unbalanced or invalid '{...}' placeholder (use {name})")
        return value

    @model_validator(mode="after")
    def _placeholders_are_arguments(self) -> HttpAction:
        schema = self.input_schema
        if schema is None:
            return self
        if schema.get("type", "object") != "object":
            raise ValueError("input_schema must be an object schema (type: object)")
        properties = properties_of(schema)
        used = PLACEHOLDER_RE.findall(self.url) + [
            name for template in self.headers.values() for name in PLACEHOLDER_RE.findall(template)
        ]
        missing = sorted({name for name in used if name not in properties})
        if missing:
            raise ValueError(f"placeholder(s) {', '.join(missing)} are not properties of input_schema")
        unknown = sorted(name for name in self.query or [] if name not in properties)
        if unknown:
            raise ValueError(f"query names {', '.join(unknown)} that are not properties of input_schema")
        return self


def check_filter(value: str) -> str:
    """`include`/`exclude` entries: an operationId glob (or `id:GLOB`), `tag:GLOB` or `path:GLOB`."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "a filter must be a non-empty string: an operationId glob, 'tag:GLOB' or 'path:GLOB'"
        )
    head, colon, rest = value.partition(":")
    if colon and f"{head}:" not in FILTER_KINDS and head.isalpha() and head.islower():
        raise ValueError(
            f"unknown filter kind {head!r}: use an operationId glob, 'id:GLOB', 'tag:GLOB' or 'path:GLOB'"
        )
    if colon and f"{head}:" in FILTER_KINDS and not rest:
        raise ValueError(f"{head}: needs a glob after the colon")
    return value

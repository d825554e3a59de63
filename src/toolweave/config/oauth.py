"""`[backends.oauth]`: the gateway as an OAuth client of a backend (MCP authorization, docs/backends-oauth.md).

Present = the backend is called with a token; every key is optional. Which token: the caller's own
(`per_user = true`, the default: each person authorizes once, with `toolweave login`, the UI's Connect
or the URL an agent is given) or one the operator authorized for everybody (`per_user = false`).
Machines use `grant = "client_credentials"` (a secret or a signed key, no person involved); an
enterprise IdP vouches with `grant = "token_exchange"` (SEP-990: the IdP's ID token is exchanged for
an ID-JAG, which the backend's authorization server turns into an access token).

On an HTTP API (`openapi`/`http`), the authorization code flow only: the endpoints and scopes come from
the OpenAPI document's `oauth2`/`openIdConnect` security scheme, or from `issuer`'s metadata.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from toolweave.fields import StrictModel

Grant = Literal["authorization_code", "client_credentials", "token_exchange"]


class BackendOAuth(StrictModel):
    client_id: str | None = Field(default=None, min_length=1, max_length=2000)
    """A pre-registered client; else a Client ID Metadata Document when the server offers it, else
    dynamic client registration (RFC 7591)."""
    client_secret: SecretStr | None = None
    client_metadata_url: str | None = None
    """The https URL of a Client ID Metadata Document you publish (used where the server supports CIMD)."""
    scopes: list[str] | None = None
    """Requested instead of what the server asks for (a step-up adds what it asks for)."""
    grant: Grant = "authorization_code"
    private_key: SecretStr | None = None
    """PEM: client_credentials authenticates with private_key_jwt signed by this key."""
    private_key_alg: Literal["ES256", "RS256"] = "RS256"
    per_user: bool = True
    """Each caller authorizes with their own account (authorization_code); false: the operator's one grant."""
    issuer: str | None = None
    """The backend's authorization server; required for token_exchange, checked for client_credentials."""
    idp_token_endpoint: str | None = None
    """token_exchange: the enterprise IdP's token endpoint (RFC 8693)."""
    idp_client_id: str | None = None
    idp_client_secret: SecretStr | None = None
    subject_token: SecretStr | None = None
    """token_exchange: the IdP ID token to exchange when the caller brings none (the CLI, one user)."""
    scheme: str | None = Field(default=None, min_length=1, max_length=200)
    """HTTP APIs: the document's `securitySchemes` entry (`oauth2` with an authorizationCode flow, or
    `openIdConnect`) to take the endpoints and scopes from, when it has several."""
    redirect_port: int = Field(default=0, ge=0, le=65535)
    """`toolweave login`: the loopback port the redirect comes back to (0: any free port)."""

    @field_validator("client_metadata_url", "issuer", "idp_token_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _keys_fit_the_grant(self) -> BackendOAuth:
        if self.grant == "client_credentials":
            if not self.client_id:
                raise ValueError("grant 'client_credentials' needs client_id")
            if (self.client_secret is None) == (self.private_key is None):
                raise ValueError(
                    "grant 'client_credentials' needs exactly one of client_secret or private_key"
                )
        elif self.private_key is not None:
            raise ValueError("private_key (private_key_jwt) is used with grant 'client_credentials' only")
        if self.grant == "token_exchange":
            missing = [
                key
                for key in ("client_id", "client_secret", "issuer", "idp_token_endpoint", "idp_client_id")
                if getattr(self, key) is None
            ]
            if missing:
                raise ValueError(f"grant 'token_exchange' needs {', '.join(missing)}")
        return self

    @property
    def shared(self) -> bool:
        """One grant for every caller: machine grants, or an operator-authorized backend."""
        return self.grant == "client_credentials" or not self.per_user

"""Typed models of `toolweave.toml`: gateway, backends, policy, auth, and the root.

Composite tool definitions have their own modules (`fanout`, `router`,
`workflow`); the root keeps them as a list of already-validated models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from toolweave.config.auth import AuthConfig
from toolweave.config.http_api import HttpAction, HttpAuth, check_filter
from toolweave.config.oauth import BackendOAuth
from toolweave.config.patterns import pattern_problem
from toolweave.config.servers import ServerConfig, Tag
from toolweave.fields import BACKEND_NAME_RE, EXPOSED_NAME_RE, Duration, StrictModel


def _check_pattern(value: str) -> str:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Pattern = Annotated[str, AfterValidator(_check_pattern)]
"""A name pattern (shell glob, or `re:` + RE2 regex), checked when the config is loaded."""

SearchKeyword = Annotated[str, Field(min_length=1, max_length=100)]
"""A word or short phrase that search mode's `find_tools` matches a tool by."""


class EmbeddingsConfig(StrictModel):
    """`[search.embeddings]`: meaning-based ranking from any OpenAI-compatible `/v1/embeddings`."""

    url: str
    """The API base (`http://127.0.0.1:11434/v1`) or the full `.../embeddings` URL."""
    model: str = Field(min_length=1, max_length=200)
    api_key: str | None = None
    """Sent as `Authorization: Bearer ...` (use `${VAR}`); secret, never logged."""
    timeout: Duration = 2.0
    """How long embedding one query may take before `find_tools` answers from the lexical ranking."""
    query_fields: dict[str, Any] = Field(default_factory=dict)
    """Extra request fields for a query (`{input_type = "query"}` for servers that want one)."""
    document_fields: dict[str, Any] = Field(default_factory=dict)
    """Extra request fields for tool texts (`{input_type = "passage"}`)."""
    batch_size: int = Field(default=32, ge=1, le=2048)
    max_response_bytes: int = Field(default=16 << 20, ge=1024, le=1 << 30)
    """Largest answer read from the endpoint; a larger one fails that batch (the lexical ranking serves)."""
    weight: float = Field(default=0.75, ge=0.0, le=10.0)
    """How much the meaning-based ranking counts beside the lexical one in the fusion (1: equal; 0.75,
    the default, puts more right tools in the top 5 and first than 0.5 or 1 on the bench's
    development set)."""

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"url {value!r} must start with http:// or https://")
        value = value.rstrip("/")
        return value if value.endswith("/embeddings") else value + "/embeddings"


class SearchConfig(StrictModel):
    """`[search]`: how search mode (`gateway.tool_exposure = "search"`) lists and finds tools."""

    embeddings: EmbeddingsConfig | None = None
    """Fuse a meaning-based ranking with the lexical one; None: lexical only (offline)."""

    list_composites: bool = True
    """List the composite tools beside `find_tools` and `call_tool`: they are few, and the reason to
    have a gateway; `false` lists only the search tools and the pinned ones."""

    list_found: int = Field(default=0, ge=0, le=64)
    """Opt-in: each session's `tools/list` also lists up to this many of the tools `find_tools`
    returned to it, least recently used dropped, announced with `notifications/tools/list_changed`,
    so the model calls them directly with their own schemas; 0 (the default): off. Sessions are
    handshake-era MCP connections (2025-11-25 and older, HTTP or stdio): a 2026-07-28 request has
    no session to list them to."""


class GatewayConfig(StrictModel):
    separator: str = "__"
    database: str = "sqlite:///toolweave.db"
    tool_exposure: Literal["all", "search"] = "all"
    pinned: list[str] = Field(default_factory=list)
    """Exposed tool names that stay listed in search mode."""
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    allowed_hosts: list[str] = Field(default_factory=list)
    """`Host` header values served (`name`, `name:port`, `name:*`); empty: the loopback names on a
    loopback bind, any host otherwise (see docs/security.md)."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins (`https://name[:port|:*]`) accepted besides the gateway's own; empty: the
    loopback origins on a loopback bind, none otherwise."""
    record_direct_calls: bool = False
    """Write a run record for direct (non-composite) calls too."""
    max_depth: int = Field(default=8, ge=1, le=64)
    """How deep composites may nest (a workflow calling a workflow...)."""
    max_name_length: int = Field(default=64, ge=16, le=1024)
    """An exposed backend tool name longer than this is shortened (cut, plus a hash of the whole name) and
    warned about: OpenAI and other LLM APIs refuse tool names over 64 characters."""
    startup_timeout: Duration = 10.0
    """How long `serve` waits for backends before it starts serving anyway."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    """`json`: one JSON object per log line (for log shippers); same as `serve --log-json`."""
    redis_url: str = ""
    """Redis for the change feed between gateways sharing a database (`""`: LISTEN/NOTIFY or polling)."""
    sync_interval: Duration = 5.0
    """How often a gateway sharing its database polls it for changes it missed (0: never)."""
    instance: str = Field(default="", max_length=128)
    """This replica's name: the `instance` label of its `/metrics` series, in `/healthz` and
    `/readyz` (`""`: `hostname:pid`; see docs/deployment.md)."""
    public_url: str = ""
    """How clients reach the gateway (`https://tools.example.com`, behind a proxy): the OAuth resource is
    this + `/mcp`. Empty: derived from the bind address (`http://host:port`)."""

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and (not value.startswith(("http://", "https://")) or "?" in value or "#" in value):
            raise ValueError(
                f"public_url is the gateway's base URL (`https://tools.example.com`), not {value!r}"
            )
        return value

    @field_validator("separator")
    @classmethod
    def _separator_is_name_safe(cls, value: str) -> str:
        if not value or not EXPOSED_NAME_RE.match(value) or len(value) > 4:
            raise ValueError("the separator must be 1-4 characters of [a-zA-Z0-9_-] (default '__')")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        bad = [host for host in value if not host or any(c in host for c in "/ ,") or "://" in host]
        if bad:
            raise ValueError(
                f"allowed_hosts entries are host names with an optional port (`name`, `name:8080`, "
                f"`name:*`), not URLs: {', '.join(map(repr, bad))}"
            )
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        bad = [
            origin
            for origin in value
            if not origin.startswith(("http://", "https://"))
            or "/" in origin.split("://", 1)[1]
            or " " in origin
        ]
        if bad:
            raise ValueError(
                "allowed_origins entries are `http(s)://name[:port|:*]` with no path: "
                + ", ".join(map(repr, bad))
            )
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url_scheme(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "redis_url must start with redis://, rediss:// or unix:// (or be empty: no Redis)"
            )
        return value


class ToolOverride(StrictModel):
    """Per-tool settings of a backend: alias, description, admission."""

    name: str | None = None
    """Expose the tool under this name instead of `backend{sep}tool` (an alias)."""
    keep_original: bool = False
    """With an alias, keep the original name listed too."""
    description: str | None = None
    keywords: list[SearchKeyword] = Field(default_factory=list, max_length=64)
    """Extra words `find_tools` finds this tool by (search mode), for tasks phrased unlike its text."""
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    """Labels a virtual server selects tools by (`[[servers]] tags`)."""
    concurrent: bool | None = None
    """Promote a mutating tool to the concurrent-mutation pool."""
    max_concurrency: int | None = Field(default=None, ge=1)
    timeout: Duration | None = None

    @field_validator("name")
    @classmethod
    def _alias_is_a_valid_name(cls, value: str | None) -> str | None:
        if value is not None and not EXPOSED_NAME_RE.match(value):
            raise ValueError(f"alias {value!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        return value


class BackendConfig(StrictModel):
    name: str
    # exactly one transport:
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_passthrough: list[str] = Field(default_factory=list, max_length=256)
    """stdio: more of the gateway's environment variables the child gets (glob patterns, `AWS_*`), beside
    the safe set every child gets (`backends.environment.INHERITED`)."""
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: BackendOAuth | None = None
    """`[backends.oauth]`: call this backend with an OAuth token (config/oauth.py)."""
    python: str | None = None
    openapi: str | None = None
    """An HTTP API described by an OpenAPI 3.x / Swagger 2.0 document (a path or an http(s) URL)."""
    http: str | None = None
    """An HTTP API given by declared `actions`: their base URL."""
    # HTTP APIs (openapi / http) only; see config/http_api.py:
    base_url: str | None = None
    """openapi: where to send calls (default: the document's first server)."""
    include: list[str] = Field(default_factory=list)
    """openapi: only these operations (operationId glob, `tag:GLOB`, `path:GLOB`)."""
    exclude: list[str] = Field(default_factory=list)
    actions: list[HttpAction] = Field(default_factory=list)
    auth: HttpAuth | None = None
    retries: int = Field(default=2, ge=0, le=10)
    """Retries of idempotent calls after a connection error, a timeout or a 502/503/504."""
    max_response_bytes: int = Field(default=8 << 20, ge=1024)
    """A larger response is refused (an error result) instead of being read whole."""
    output_schema: bool = True
    """Advertise (and check responses against) the JSON object schema of each operation's 2xx response."""
    # behaviour:
    enabled: bool = True
    namespace: bool = True
    timeout: Duration = 30.0
    connect_timeout: Duration = 10.0
    max_concurrency: int | None = Field(default=None, ge=1)
    concurrent: bool = False
    """Promote every mutating tool of this backend to the concurrent-mutation pool."""
    expose: list[Pattern] = Field(default_factory=list)
    hide: list[Pattern] = Field(default_factory=list)
    read_only_only: bool = False
    hide_destructive: bool = False
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    description: str | None = Field(default=None, max_length=2000)
    """What this backend is for, in a user's words: searched with each of its tools (search mode)."""
    keywords: list[SearchKeyword] = Field(default_factory=list, max_length=64)
    """Words every tool of this backend is found by (`["Azure", "ADO"]` for a backend named `azdo`)."""

    @field_validator("name")
    @classmethod
    def _name_pattern(cls, value: str) -> str:
        if not BACKEND_NAME_RE.match(value):
            raise ValueError(f"backend name {value!r} must match ^[a-z0-9][a-z0-9_-]{{0,31}}$")
        return value

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"url {value!r} must start with http:// or https://")
        return value

    @field_validator("http", "base_url")
    @classmethod
    def _base_is_http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must start with http:// or https://")
        return value.rstrip("/") if value is not None else None

    @field_validator("include", "exclude")
    @classmethod
    def _filters(cls, value: list[str]) -> list[str]:
        return [check_filter(item) for item in value]

    @model_validator(mode="after")
    def _exactly_one_transport(self) -> BackendConfig:
        given = [key for key in ("command", "url", "python", "openapi", "http") if getattr(self, key)]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(
                f"a backend needs exactly one of 'command' (stdio), 'url' (HTTP MCP), 'python' (in-process), "
                f"'openapi' (an OpenAPI document) or 'http' (declared HTTP actions); found {found}"
            )
        return self._http_api_keys_fit()

    def _http_api_keys_fit(self) -> BackendConfig:
        if self.env_passthrough and not self.command:
            raise ValueError("'env_passthrough' needs 'command': it sets a stdio child's environment")
        if self.oauth is not None:
            self._oauth_fits()
        owners = {"base_url": "openapi", "include": "openapi", "exclude": "openapi", "actions": "http"}
        problems = [
            f"'{key}' needs '{owner}'"
            for key, owner in owners.items()
            if getattr(self, key) and not getattr(self, owner)
        ]
        if self.auth is not None and not self.is_http_api:
            problems.append("'auth' needs 'openapi' or 'http'")
        if problems:
            raise ValueError("; ".join(problems) + " (these keys belong to HTTP API backends)")
        if self.http and not self.actions:
            raise ValueError("an 'http' backend needs at least one [[backends.actions]] entry")
        names = [action.name for action in self.actions]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate action name(s): {', '.join(duplicates)}")
        return self

    def _oauth_fits(self) -> None:
        """`[backends.oauth]` on an MCP server over HTTP, or (authorization code) on an HTTP API."""
        oauth = self.oauth
        assert oauth is not None
        if not (self.url or self.is_http_api):
            raise ValueError(
                "'oauth' needs 'url' (an MCP server over HTTP), 'openapi' or 'http' (an HTTP API)"
            )
        if self.url:
            if oauth.scheme is not None:
                raise ValueError("[backends.oauth] 'scheme' names an OpenAPI security scheme: HTTP APIs only")
            return
        if self.auth is not None:
            raise ValueError("an HTTP API backend takes 'auth' or [backends.oauth], not both")
        if oauth.grant != "authorization_code":
            raise ValueError(
                f"[backends.oauth] grant {oauth.grant!r} is for MCP servers; an HTTP API's machine "
                'credentials go in [backends.auth] type = "oauth2" (client credentials)'
            )
        if oauth.client_metadata_url is not None:
            raise ValueError(
                "[backends.oauth] 'client_metadata_url' is for MCP servers (CIMD), not HTTP APIs"
            )
        if self.http and oauth.issuer is None:
            raise ValueError(
                "[backends.oauth] on an 'http' backend needs 'issuer' (its authorization server, "
                "whose metadata names the endpoints): there is no OpenAPI document to take them from"
            )

    @property
    def transport(self) -> Literal["stdio", "http", "python", "openapi", "http-actions"]:
        if self.command:
            return "stdio"
        if self.url:
            return "http"
        if self.openapi:
            return "openapi"
        return "http-actions" if self.http else "python"

    @property
    def is_http_api(self) -> bool:
        """An HTTP API (OpenAPI document or declared actions) rather than an MCP server or Python module."""
        return bool(self.openapi or self.http)


class PolicyRule(StrictModel):
    """Allow/deny patterns (glob or `re:`) for a tenant or an API key scope."""

    tenant: str | None = None
    scope: str | None = None
    allow: list[Pattern] = Field(default_factory=list)
    deny: list[Pattern] = Field(default_factory=list)


class PolicyConfig(StrictModel):
    allow: list[Pattern] = Field(default_factory=list)
    """When non-empty, only matching tools may be called."""
    deny: list[Pattern] = Field(default_factory=list)
    rules: list[PolicyRule] = Field(default_factory=list)
    approval: list[Pattern] = Field(default_factory=list)
    """Tools that need the user's yes (asked by elicitation) before they run."""
    approve_destructive: bool = False
    api_composites_call_hidden: bool = False
    """Let composites defined through the API call tools the backend filters hide (the config
    file's composites always may)."""
    concurrent_width: int = Field(default=10, ge=1)
    read_width: int = Field(default=64, ge=1)


class UiConfig(StrictModel):
    """The web UI served at `/` on the gateway's port (docs/ui.md)."""

    enabled: bool = True
    session_idle: Duration = 8 * 3600.0
    """A browser session unused this long must log in again (with auth on)."""


class LimitsConfig(StrictModel):
    """What one caller may hold at once, so that it cannot exhaust what every caller shares."""

    mcp_sessions_per_key: int = Field(default=16, ge=1, le=10_000)
    """Open handshake-era MCP sessions (2025-11-25 and older) one API key may hold."""
    mcp_sessions_per_tenant: int = Field(default=64, ge=1, le=10_000)
    """Open handshake-era MCP sessions all API keys of one tenant may hold together."""
    mcp_sessions_total: int = Field(default=10_000, ge=1, le=1_000_000)
    """Open handshake-era MCP sessions of the whole gateway (the operator's included)."""
    mcp_session_idle: Duration = 600.0
    """A session with no request for this long is closed (its client must initialize again)."""
    calls_per_second_per_key: float = Field(default=100.0, ge=0, le=1_000_000)
    """Tool calls a second one API key may start (bursts of two seconds' worth); 0: unlimited."""
    calls_per_second_per_tenant: float = Field(default=200.0, ge=0, le=1_000_000)
    """Tool calls a second all API keys of one tenant may start together; 0: unlimited."""
    event_streams_per_key: int = Field(default=4, ge=1, le=100)
    """Open `GET /api/v1/events` streams one API key may hold (the gateway holds 100 in all)."""
    event_streams_per_tenant: int = Field(default=16, ge=1, le=100)
    """Open event streams all API keys of one tenant may hold together."""
    max_body_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30)
    """Largest request body on any route (REST and MCP); larger ones get `413`."""
    max_definition_bytes: int = Field(default=256 << 10, ge=1024, le=64 << 20)
    """Largest composite definition (as JSON) the API stores."""
    max_description_chars: int = Field(default=16_384, ge=64, le=1 << 20)
    """Longest `description` anywhere in a composite definition the API stores."""
    max_definition_items: int = Field(default=256, ge=1, le=100_000)
    """Most steps, operations, targets or rules in one composite definition the API stores."""

    @field_validator("mcp_session_idle")
    @classmethod
    def _idle_positive(cls, value: float) -> float:
        if not 0 < value <= 86_400:
            raise ValueError("mcp_session_idle must be more than 0 and at most 24h")
        return value


class FederatedNamespace(StrictModel):
    """A namespace the operator reserves for federated clients: whose it is, and who sees it."""

    name: str
    tenant: str | None = None
    """Only clients with a key of this tenant (or the local operator, without auth) may register it
    (None: clients of any tenant, first come)."""
    shared: bool = False
    """Every tenant sees (and may call) its tools, not only the tenant that registered them. Needs
    `tenant`: every tenant's calls (secret arguments included) go to whoever serves it, so the
    operator names who may; first come would let any `tools:federate` key take them."""

    @field_validator("name")
    @classmethod
    def _name_pattern(cls, value: str) -> str:
        if not BACKEND_NAME_RE.match(value):
            raise ValueError(f"namespace {value!r} must match ^[a-z0-9][a-z0-9_-]{{0,31}}$")
        return value

    @model_validator(mode="after")
    def _shared_names_its_server(self) -> FederatedNamespace:
        if self.shared and self.tenant is None:
            raise ValueError(
                f"shared namespace {self.name!r} needs 'tenant': the tenant whose keys may serve it "
                "(every tenant's calls of it go to that tenant's clients)"
            )
        return self


class FederationConfig(StrictModel):
    """Federated tools: clients connect out to `/api/v1/federation` and serve tools from their own network."""

    enabled: bool = True
    max_frame_bytes: int = Field(default=1 << 20, ge=4096, le=64 << 20)
    """A larger WebSocket message closes the connection (1009); bounds what one client costs the gateway."""
    max_frames_per_second: int = Field(default=200, ge=1, le=1_000_000)
    """Frames one connection may send a second (bursts of two seconds' worth); a flood is closed (4429)."""
    max_bytes_per_second: int = Field(default=8 << 20, ge=4096, le=1 << 30)
    """Characters one connection may send a second (bursts of two seconds' worth, and at least two
    `max_frame_bytes` frames); more closes the connection (4429)."""
    max_tools: int = Field(default=256, ge=1, le=4096)
    """Tools one namespace may register."""
    max_namespaces_per_tenant: int = Field(default=8, ge=1, le=10_000)
    """Federated namespaces the clients of one tenant may hold at once (on every gateway together)."""
    max_tools_per_tenant: int = Field(default=1024, ge=1, le=1_000_000)
    """Federated tools the namespaces of one tenant may hold together."""
    max_clients: int = Field(default=16, ge=1, le=1024)
    """Clients one namespace may have connected at once (on this gateway)."""
    max_pending_per_key: int = Field(default=4, ge=1, le=1024)
    """Connections of one API key still registering (connected, manifest not yet accepted) at once, on
    this gateway; one more is closed at once (4429). Without it, one key could hold thousands of
    sockets that never register, each costing the gateway until `register_timeout`."""
    registrations_per_second_per_tenant: float = Field(default=1.0, ge=0, le=10_000)
    """New connections (each one a manifest to read and check, and a catalog change) the keys of one
    tenant may open a second on this gateway, in bursts of `REGISTRATION_BURST_SECONDS`' worth; more
    are closed at once (4429), before anything is read; 0: unlimited."""
    call_timeout: Duration = 30.0
    """How long a call to a federated tool may take unless the tool's caller gives less."""
    register_timeout: Duration = 10.0
    """How long a new client has to answer `initialize` and `tools/list`."""
    heartbeat_interval: Duration = 2.0
    """How often the gateway pings a silent client."""
    heartbeat_timeout: Duration = 5.0
    """A client that answers nothing for this long is disconnected (and its calls fail)."""
    namespaces: list[FederatedNamespace] = Field(default_factory=list)

    def reserved(self, name: str) -> FederatedNamespace | None:
        return next((n for n in self.namespaces if n.name == name), None)


class AuditConfig(StrictModel):
    """`[audit]`: the audit log of every change (docs/observability.md)."""

    retention: Duration = Field(default=365 * 86400.0, ge=0)
    """Records older than this are deleted (checked at start and hourly); 0 keeps them forever."""


class TelemetryConfig(StrictModel):
    """`[telemetry]`: OpenTelemetry traces over OTLP (docs/observability.md); setting `otlp_endpoint`
    turns them on. The standard `OTEL_*` variables fill what is not set here."""

    otlp_endpoint: str = ""
    """The collector's base URL, as in OTEL_EXPORTER_OTLP_ENDPOINT: OTLP/HTTP posts to `{url}/v1/traces`."""
    otlp_protocol: Literal["http/protobuf", "grpc"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every export (a collector's API key)."""
    sampling_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    """Share of traces kept (a client's sampled flag wins); default 1, or OTEL_TRACES_SAMPLER_ARG."""
    service_name: str = ""
    """`service.name` of the spans; default OTEL_SERVICE_NAME, else `toolweave`."""
    trace_url: str = ""
    """A trace viewer's URL with `{trace_id}` (`http://localhost:16686/trace/{trace_id}`): the run page links to it."""


class Config(StrictModel):
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    federation: FederationConfig = Field(default_factory=FederationConfig)
    backends: list[BackendConfig] = Field(default_factory=list)
    composite_tools: list[Any] = Field(default_factory=list)
    """Validated composite definitions (FanoutDef, RouterDef, WorkflowDef)."""
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    ui: UiConfig = Field(default_factory=UiConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    servers: list[ServerConfig] = Field(default_factory=list, max_length=1024)
    """Virtual servers (`[[servers]]`), each served at `/servers/{name}/mcp`."""
    audit: AuditConfig = Field(default_factory=AuditConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    source: str | None = Field(default=None, exclude=True)
    """The file this config was read from, for relative paths."""

    def backend(self, name: str) -> BackendConfig | None:
        return next((b for b in self.backends if b.name == name), None)

"""Request and response bodies: precise, so the OpenAPI document says exactly what the API takes.

Request bodies forbid unknown fields (a typo is a 422 naming it, not a
silently ignored setting). Composite definitions stay free-form objects
here: they have the same shape as a `composite_tools` entry of the config
file and are validated by the same code, which reports every problem with
its path.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

UserStatus = Literal["draft", "active", "disabled"]
Status = Literal["draft", "active", "disabled", "degraded"]
MAX_BATCH = 100


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    path: str = Field(description="Where the problem is, e.g. `definition.rules[0].condition.type`")
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="Machine-readable: invalid_request, not_found, name_conflict, read_only, ..."
    )
    message: str
    problems: list[Problem] = Field(default_factory=list)


class ErrorResponse(BaseModel):
    error: ErrorDetail


# -- tools ---------------------------------------------------------------------


class AiTool(BaseModel):
    name: str
    type: Literal["simple", "composite"] = Field(
        description="simple: a backend tool; composite: fanout/router/workflow"
    )
    kind: Literal["backend", "fanout", "router", "workflow"]
    source: Literal["backend", "file", "api"]
    status: Status = "active"
    id: str | None = Field(default=None, description="The composite tool's id (API-defined tools only)")
    title: str | None = None
    description: str = ""
    backend: str | None = None
    inputSchema: dict[str, Any] | None = None
    usedIn: list[str] = Field(default_factory=list, description="Composite tools that call this tool")
    servers: list[str] = Field(default_factory=list, description="Virtual servers that expose this tool")
    validationErrors: list[str] = Field(default_factory=list)


class AiToolList(BaseModel):
    tools: list[AiTool]


class ToolList(BaseModel):
    """What an MCP client sees in `tools/list`, each tool in its wire form (camelCase)."""

    tools: list[dict[str, Any]]


class ExportList(BaseModel):
    format: str
    tools: list[dict[str, Any]]


class CallResult(BaseModel):
    """An MCP `CallToolResult` in its wire form (camelCase)."""

    model_config = ConfigDict(extra="allow")
    content: list[dict[str, Any]]
    structuredContent: Any = None
    isError: bool = False
    """In the SDK's order, so `toolweave call` prints the same through a gateway as in its own process."""


class BatchCallIn(RequestBody):
    id: str | None = Field(default=None, max_length=200, description="Echoed back; the index when absent")
    name: str = Field(max_length=500)
    arguments: dict[str, Any] = Field(default_factory=dict)


class BatchRequest(RequestBody):
    calls: list[BatchCallIn] = Field(max_length=MAX_BATCH)


class BatchResultItem(BaseModel):
    id: str
    name: str
    result: CallResult


class BatchResponse(BaseModel):
    results: list[BatchResultItem]


# -- composite tools -------------------------------------------------------------


class CompositeCreate(RequestBody):
    definition: dict[str, Any] = Field(
        description="A composite definition, as in the config file's composite_tools"
    )
    status: UserStatus = "active"
    note: str | None = Field(default=None, max_length=2000, description="Kept with this version")


class CompositeUpdate(RequestBody):
    definition: dict[str, Any] | None = Field(
        default=None,
        description="A JSON merge patch (RFC 7396) applied to the current definition: objects merge, "
        "lists and values replace, null removes a key",
    )
    status: UserStatus | None = None
    note: str | None = Field(default=None, max_length=2000)
    expectedVersion: int | None = Field(
        default=None, ge=1, description="Refuse (409) unless still at this version"
    )


class OperationCreate(RequestBody):
    operation: dict[str, Any] = Field(
        description="{slug, tool, display_name?, description?, parameter_mapping?, arguments?}"
    )
    rules: list[dict[str, Any]] = Field(default_factory=list, description="Routing rules to add for it")
    default: bool = Field(default=False, description="Make it the default operation")
    note: str | None = Field(default=None, max_length=2000)
    expectedVersion: int | None = Field(default=None, ge=1)


class CompositeDetail(BaseModel):
    id: str = Field(description="A UUID for API-defined tools; the name for file-defined ones")
    name: str
    kind: str
    status: Status
    source: Literal["api", "file"]
    readOnly: bool
    tenant: str | None = None
    version: int | None = None
    served: bool = Field(description="Listed and callable right now")
    definition: dict[str, Any]
    validationErrors: list[str] = Field(default_factory=list)
    tool: dict[str, Any] | None = Field(
        default=None, description="The tool as MCP clients see it (when served)"
    )
    usedTools: list[str] = Field(default_factory=list, description="The tools it calls (exposed names)")
    servers: list[str] = Field(default_factory=list, description="Virtual servers that expose it")
    createdAt: datetime | None = None
    updatedAt: datetime | None = None


class CompositeList(BaseModel):
    compositeTools: list[CompositeDetail]


class VersionOut(BaseModel):
    version: int
    definition: dict[str, Any]
    note: str | None = None
    createdAt: datetime


class VersionList(BaseModel):
    versions: list[VersionOut]


class RegenerateRequest(RequestBody):
    save: bool = Field(default=True, description="Store the new description as a new version")
    useLlm: bool = Field(default=True, description="Use the configured LLM endpoint when there is one")


class RegenerateResponse(BaseModel):
    description: str
    source: Literal["generated", "llm"]
    saved: bool
    version: int | None = None
    warning: str | None = Field(default=None, description="Set when the LLM endpoint failed and was not used")


class InvokeRequest(RequestBody):
    tool: str = Field(max_length=200, description="The composite tool's name or id")
    params: dict[str, Any] = Field(default_factory=dict)


class InvokeMeta(BaseModel):
    compositeTool: str
    kind: str
    selectedOperation: str | None = Field(
        default=None, description="The backend tool that ran (routers): backend/tool"
    )
    operation: str | None = Field(default=None, description="The chosen operation's slug (routers)")
    routingReason: str | None = None
    integration: str | None = Field(default=None, description="The backend of the selected operation")
    requestId: str
    runId: str | None = None
    latencyMs: float
    steps: list[dict[str, Any]] | None = None
    targets: list[dict[str, Any]] | None = None


class InvokeResponse(BaseModel):
    success: bool
    message: str
    data: Any = None
    meta: InvokeMeta


# -- runs, backends, connections -----------------------------------------------------


class StepOut(BaseModel):
    id: str
    status: str
    attempts: int = 0
    latencyMs: float = 0.0
    startMs: float | None = Field(
        default=None, description="When the step started, in ms after the run started"
    )
    error: str | None = None


class RunOut(BaseModel):
    id: str
    tool: str
    kind: str
    tenant: str | None = None
    status: str
    subject: str | None = Field(
        default=None, description="Who called: an IdP token's `sub`, an API key's label `key:tw_...`, `local`"
    )
    arguments: dict[str, Any] = Field(default_factory=dict, description="Secret fields are redacted")
    operation: str | None = None
    reason: str | None = None
    steps: list[StepOut] = Field(default_factory=list)
    error: str | None = None
    latencyMs: float = 0.0
    startedAt: datetime
    """ISO 8601 in UTC, like every other time the API gives (records keep epoch seconds)."""
    finishedAt: datetime | None = None
    events: list[dict[str, Any]] = Field(
        default_factory=list,
        description="A `tool_result` event per call the run made: tool, status, duration_ms, source "
        "(backend | python | federated | composite), handler, toolkit, error, trace_id",
    )
    traceId: str | None = Field(
        default=None, description="The OpenTelemetry trace of the call, when tracing was on ([telemetry])"
    )


class RunList(BaseModel):
    runs: list[RunOut]


class ResumeRequest(RequestBody):
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="The secret arguments (writeOnly / format: password) the run record does not keep; "
        "the others come from the record",
    )


class KeyOut(BaseModel):
    """An API key without the key itself (only its hash is stored)."""

    id: str
    tenant: str
    name: str | None = None
    prefix: str = Field(description="`tw_` and the key's first 8 random characters, to tell keys apart")
    scopes: list[str]
    createdAt: datetime
    lastUsedAt: datetime | None = None
    revokedAt: datetime | None = None


class KeyList(BaseModel):
    keys: list[KeyOut]


class KeyCreate(RequestBody):
    tenant: str | None = Field(
        default=None,
        max_length=200,
        description="The tenant the key acts for; a tenant's own key may only create keys for its tenant "
        "(the default)",
    )
    scopes: list[str] = Field(
        default_factory=lambda: ["tools:read", "tools:call"],
        max_length=8,
        description="tools:read, tools:call, tools:admin, tools:federate; at most the caller's own",
    )
    name: str | None = Field(default=None, max_length=200, description="A label to tell keys apart")


class KeyCreated(BaseModel):
    key: KeyOut
    secret: str = Field(description="The key itself: shown this once, only its hash is stored")


class BackendOut(BaseModel):
    name: str
    transport: str
    status: str
    tools: int
    resources: int = 0
    prompts: int = 0
    lastError: str | None = None
    lastErrorAt: datetime | None = Field(default=None, description="When the last error happened")
    connection: bool = Field(
        default=False, description="The caller's tenant has a connection (credentials) for it"
    )


class BackendList(BaseModel):
    backends: list[BackendOut]


class ConnectionPut(RequestBody):
    headers: dict[str, str] = Field(description="HTTP headers sent to the backend for this tenant's calls")


class ConnectionOut(BaseModel):
    backend: str
    keys: list[str] = Field(description="Header names only: values are never returned")
    updatedAt: datetime


class ConnectionList(BaseModel):
    connections: list[ConnectionOut]


class AuditRecordOut(BaseModel):
    """One change of state: when, who, from where, what, which object, its version before and after."""

    id: int = Field(description="Increasing; page on with `before=<the last id>`")
    at: datetime
    tenant: str | None = Field(description="The changed object's tenant (null: shared or gateway-wide)")
    actor: str = Field(description="The caller's subject, its key (`key:tw_AbCd1234`), `local` or `cli:USER`")
    via: Literal["rest", "ui", "cli", "mcp", "federation"]
    source: str | None = Field(description="The client's address and user agent")
    action: str = Field(
        description="`composite.created`, `key.revoked`, `connection.stored`, `run.resumed`, ..."
    )
    objectType: str
    objectId: str
    objectName: str | None = None
    versionBefore: int | None = None
    versionAfter: int | None = None
    detail: dict[str, Any] | None = Field(
        default=None, description="Names and statuses, never a secret value"
    )


class AuditList(BaseModel):
    records: list[AuditRecordOut] = Field(description="Newest first")
    next: int | None = Field(description="Pass as `before` for the next (older) page; null on the last page")


class StatsPoint(BaseModel):
    at: datetime = Field(description="The bucket's start")
    calls: int
    errors: int
    p95Ms: float | None = None


class ToolHealth(BaseModel):
    tool: str
    backend: str = Field(description="The backend it runs on; `(composite)` for composite tools")
    calls: int
    errors: int
    errorRate: float = Field(description="errors / calls (0 without calls)")
    p50Ms: float | None = Field(description="Median latency, within ±12% (rolled-up histogram)")
    p95Ms: float | None
    series: list[StatsPoint] = Field(
        description="Per minute (hour window) or per hour (day window), oldest first"
    )


class BackendHealth(BaseModel):
    backend: str
    calls: int
    errors: int
    errorRate: float
    p50Ms: float | None
    p95Ms: float | None


class StatsOut(BaseModel):
    window: Literal["hour", "day"]
    start: datetime = Field(alias="from")
    to: datetime
    bucketSeconds: int
    tools: list[ToolHealth] = Field(description="Busiest first")
    backends: list[BackendHealth]

    model_config = ConfigDict(populate_by_name=True)

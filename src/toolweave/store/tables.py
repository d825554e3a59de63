"""The schema as SQLAlchemy Core tables.

The migrations in `migrations/versions/` create exactly this schema (a test
compares them); repositories query through these objects so column names live
in one place. Core rather than the ORM: every repository returns frozen value
objects, so an identity map and lazy loading would only add ways to go wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so later migrations can drop or alter them on both dialects."""

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both dialects.

    SQLite has no timezone type and hands back naive values; normalising here
    means callers always compare aware datetimes, whatever the database.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


JsonType = JSON().with_variant(JSONB(), "postgresql")
"""JSONB on PostgreSQL (indexable, compact), JSON text on SQLite."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def _tenant_fk(nullable: bool) -> Column[Any]:
    return Column(
        "tenant", String(128), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=nullable, index=True
    )


tenants = Table(
    "tenants",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    _tenant_fk(nullable=False),
    Column("name", String(200), nullable=True),
    Column("prefix", String(16), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("scopes", JsonType, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_used_at", UTCDateTime(), nullable=True),
    Column("revoked_at", UTCDateTime(), nullable=True),
)

composite_tools = Table(
    "composite_tools",
    metadata,
    Column("id", String(36), primary_key=True),
    _tenant_fk(nullable=True),
    Column("name", String(64), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("validation_errors", JsonType, nullable=True),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("deleted_at", UTCDateTime(), nullable=True),
)
Index(
    "uq_composite_tools_scope_name",
    func.coalesce(composite_tools.c.tenant, ""),
    composite_tools.c.name,
    unique=True,
    sqlite_where=text("deleted_at IS NULL"),
    postgresql_where=text("deleted_at IS NULL"),
)
Index("ix_composite_tools_name", composite_tools.c.name)

composite_tool_versions = Table(
    "composite_tool_versions",
    metadata,
    Column("tool_id", String(36), ForeignKey("composite_tools.id", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("definition", JsonType, nullable=False),
    Column("note", Text, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

virtual_servers = Table(
    "virtual_servers",
    metadata,
    Column("id", String(36), primary_key=True),
    _tenant_fk(nullable=True),
    Column("name", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("deleted_at", UTCDateTime(), nullable=True),
)
"""Virtual servers defined through the API (store/servers.py); a name is one URL path segment
(`/servers/{name}/mcp`), so it is unique across tenants."""
Index(
    "uq_virtual_servers_name",
    virtual_servers.c.name,
    unique=True,
    sqlite_where=text("deleted_at IS NULL"),
    postgresql_where=text("deleted_at IS NULL"),
)

virtual_server_versions = Table(
    "virtual_server_versions",
    metadata,
    Column("server_id", String(36), ForeignKey("virtual_servers.id", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("definition", JsonType, nullable=False),
    Column("note", Text, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

connections = Table(
    "connections",
    metadata,
    Column("id", String(32), primary_key=True),
    _tenant_fk(nullable=True),
    Column("backend", String(64), nullable=False),
    Column("key_names", JsonType, nullable=False),
    Column("secret", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)
Index(
    "uq_connections_scope_backend",
    func.coalesce(connections.c.tenant, ""),
    connections.c.backend,
    unique=True,
)

oauth_tokens = Table(
    "oauth_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    _tenant_fk(nullable=True),
    Column("subject", String(255), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("secret", LargeBinary, nullable=False),
    Column("authorized", Boolean, nullable=False),
    Column("scope", Text, nullable=True),
    Column("expires_at", UTCDateTime(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)
"""OAuth grants to backends per (tenant, user, backend): tokens and client registration encrypted in
`secret`; whether it holds tokens yet (a registration alone does not), the granted scope and the expiry
in clear, for status pages (none is a credential)."""
Index(
    "uq_oauth_tokens_owner",
    func.coalesce(oauth_tokens.c.tenant, ""),
    oauth_tokens.c.subject,
    oauth_tokens.c.backend,
    unique=True,
)

oauth_pending = Table(
    "oauth_pending",
    metadata,
    Column("state_hash", String(64), primary_key=True),
    Column("backend", String(64), nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("redirect", LargeBinary, nullable=True),
    Column("ok", Boolean, nullable=True),
    Column("outcome", Text, nullable=True),
)
"""OAuth authorizations started and not finished (store/oauth_pending.py): the SHA-256 of `state`,
the redirect a callback claimed (encrypted), the outcome; any gateway on the database takes the callback."""

gateway_instances = Table(
    "gateway_instances",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
)

ui_sessions = Table(
    "ui_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("key_id", String(32), nullable=False, index=True),
    Column("created_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False, index=True),
    Column("identity", JsonType, nullable=True),
)
"""The web UI's logged-in browser sessions: the SHA-256 of the cookie and the API key it acts
with (its id, never the key), so any gateway sharing the database serves any browser."""

mcp_sessions = Table(
    "mcp_sessions",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("path", String(512), nullable=False),
    Column("tenant", String(128), nullable=False, index=True),
    Column("label", String(256), nullable=False),
    Column("version", String(32), nullable=True),
    Column("client", Text, nullable=True),
    Column("state", Text, nullable=True),
    Column("expires_at", Float, nullable=False, index=True),
)
"""Handshake-era MCP sessions shared by the gateways on one PostgreSQL without Redis (the record
`server/mcp/shared_db.py` adopts a session from: endpoint, the key that opened it, protocol version,
client params, what the client set)."""

ui_live_calls = Table(
    "ui_live_calls",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("snapshot", Text, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)
"""Try-it calls as the gateway running each last wrote them (JSON), so a page's poll served by another
gateway on one PostgreSQL without Redis shows it (`services/live_share.py`)."""

mcp_events = Table(
    "mcp_events",
    metadata,
    Column("session_id", String(128), primary_key=True),
    Column("replica", String(16), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("stream_id", Text, nullable=False),
    Column("data", Text, nullable=False),
    Column("size", Integer, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)
"""SSE events of handshake-era MCP sessions shared through PostgreSQL without Redis, so a stream resumes
with `Last-Event-ID` on any gateway: per session and replica, that replica's events by its sequence
number (`server/mcp/events_db.py`), bounded like the Redis store."""

channel_messages = Table(
    "channel_messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("payload", Text, nullable=False),
    Column("created_at", Float, nullable=False, index=True),
)
"""Messages between gateways too large for a NOTIFY payload: the notification carries the row's id
(`services/pg_channel.py`); kept a minute."""

tool_vectors = Table(
    "tool_vectors",
    metadata,
    Column("model", String(200), primary_key=True),
    Column("text_key", String(64), primary_key=True),
    Column("vector", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""Search mode's tool vectors, by embeddings model and a hash of the tool text they embed."""

# Run columns the core fills from names it did not validate are unbounded Text: a long
# name must never make recording a run fail on PostgreSQL (which enforces lengths).
runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tool", Text, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("tenant", String(128), nullable=True, index=True),
    Column("subject", Text, nullable=True),
    Column("status", String(32), nullable=False),
    Column("arguments", JsonType, nullable=False),
    Column("operation", Text, nullable=True),
    Column("reason", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("latency_ms", Float, nullable=False),
    Column("started_at", Float, nullable=False, index=True),
    Column("finished_at", Float, nullable=True),
    Column("state", JsonType, nullable=False),
    Column("owner", String(32), nullable=True),
    Column("events", JsonType, nullable=True),
)
Index("ix_runs_status_owner", runs.c.status, runs.c.owner)

run_steps = Table(
    "run_steps",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("step_id", Text, primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("status", String(32), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("latency_ms", Float, nullable=False),
    Column("output", JsonType, nullable=True),
    Column("error", Text, nullable=True),
    Column("start_ms", Float, nullable=True),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("tenant", String(128), nullable=True),
    Column("actor", Text, nullable=False),
    Column("via", String(16), nullable=False),
    Column("source", Text, nullable=True),
    Column("action", String(64), nullable=False),
    Column("object_type", String(32), nullable=False),
    Column("object_id", Text, nullable=False),
    Column("object_name", Text, nullable=True),
    Column("version_before", Integer, nullable=True),
    Column("version_after", Integer, nullable=True),
    Column("detail", JsonType, nullable=True),
)
"""One append-only row per change of state (`toolweave.store.audit`). `tenant` is the changed object's
tenant (None: shared or gateway-wide), with no foreign key: records outlive a deleted tenant."""
Index("ix_audit_log_tenant_id", audit_log.c.tenant, audit_log.c.id)
Index("ix_audit_log_at", audit_log.c.at)

tool_stats = Table(
    "tool_stats",
    metadata,
    Column("span", Integer, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("tool", Text, primary_key=True),
    Column("backend", Text, primary_key=True),
    Column("tenant", String(128), primary_key=True),
    Column("calls", Integer, nullable=False),
    Column("errors", Integer, nullable=False),
    Column("total_ms", Float, nullable=False),
    Column("histogram", JsonType, nullable=False),
)
"""Per-tool health, rolled up (`toolweave.store.stats`): calls, errors and a latency histogram per
tool, backend and tenant (`""`: the operator) per minute (`span` 60) and per hour (`span` 3600),
`bucket` the epoch second it starts. Reading an hour or a day reads at most 60 or 24 rows a series."""

oauth_proxy_clients = Table(
    "oauth_proxy_clients",
    metadata,
    Column("client_id", String(512), primary_key=True),
    Column("secret_hash", String(64), nullable=True),
    Column("client", JsonType, nullable=False),
    Column("source", String(16), nullable=False),
    Column("created_at", Float, nullable=False, index=True),
    Column("expires_at", Float, nullable=True),
)
"""MCP clients of the OAuth proxy (`[auth.proxy]`): registered (RFC 7591, `source` "dcr", the
secret's SHA-256 for a confidential one) or fetched from a client ID metadata document ("cimd",
until `expires_at`). `client` is the validated client metadata."""

oauth_proxy_grants = Table(
    "oauth_proxy_grants",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("client_id", String(512), nullable=False, index=True),
    Column("tenant", String(128), nullable=False, index=True),
    Column("subject", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("revoked_at", Float, nullable=True),
)
"""One person's consent to one client, as the gateway's tokens carry it (their `gid`): revoking it
(RFC 7009, a reused code or refresh token, the tenant's deletion) ends every token of it."""

oauth_proxy_tokens = Table(
    "oauth_proxy_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("grant_id", String(32), nullable=True, index=True),
    Column("client_id", String(512), nullable=False),
    Column("data", JsonType, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("used_at", Float, nullable=True),
)
"""The proxy's one-time secrets by SHA-256 (never the secret): a login in progress ("login"), an
authorization code ("code"), a refresh token ("refresh"); `used_at` makes each usable once."""

oauth_proxy_keys = Table(
    "oauth_proxy_keys",
    metadata,
    Column("kid", String(64), primary_key=True),
    Column("secret", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("retired_at", Float, nullable=True),
)
"""The gateway's token signing keys (private JWKs, encrypted like connection secrets); one current,
retired ones are no longer trusted."""

managed_backends = Table(
    "managed_backends",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("transport", String(16), nullable=False),
    Column("entry", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)
"""Backends added in the web UI by the operator: the `[[backends]]` entry, encrypted whole (its
environment, headers and auth hold secrets), started beside the config file's at every start."""

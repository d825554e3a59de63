"""Persistence: the database, its migrations, and repositories for keys,
composite tools, connections and runs.

The gateway core never imports this package; the server and CLI build a
`Database`, `await db.start()` it, and hand the repositories (and
`SqlRunStore`, the core's `RunStore` on a database) to whoever needs them.
"""

from toolweave.store._sql import check_tenant
from toolweave.store.audit import ALL_TENANTS, AuditFilter, AuditRecord, AuditRepository
from toolweave.store.composites import (
    COMPOSITE_KINDS,
    COMPOSITE_STATUSES,
    CompositeRepository,
    StoredComposite,
    VersionInfo,
)
from toolweave.store.connections import ConnectionRepository, ConnectionSummary
from toolweave.store.crypto import (
    DEFAULT_KEY_FILE,
    SECRET_KEY_ENV,
    SECRET_KEY_FILE_ENV,
    SecretBox,
    SecretDict,
)
from toolweave.store.database import Database, alembic_config
from toolweave.store.errors import Conflict, Forbidden, NotFound, SecretKeyError, StoreError, TooSoon
from toolweave.store.keys import VALID_SCOPES, ApiKeyInfo, KeyRepository, key_digest
from toolweave.store.oauth_pending import PendingAuthorizations
from toolweave.store.oauth_tokens import GrantSummary, OAuthTokenRepository
from toolweave.store.runs import SqlRunStore
from toolweave.store.servers import ServerRepository, ServerVersion, StoredServer
from toolweave.store.tenants import TenantInfo, TenantRepository
from toolweave.store.tool_vectors import SqlVectorStore

__all__ = [
    "ALL_TENANTS",
    "COMPOSITE_KINDS",
    "COMPOSITE_STATUSES",
    "DEFAULT_KEY_FILE",
    "SECRET_KEY_ENV",
    "SECRET_KEY_FILE_ENV",
    "VALID_SCOPES",
    "ApiKeyInfo",
    "AuditFilter",
    "AuditRecord",
    "AuditRepository",
    "CompositeRepository",
    "Conflict",
    "ConnectionRepository",
    "ConnectionSummary",
    "Database",
    "Forbidden",
    "GrantSummary",
    "KeyRepository",
    "NotFound",
    "OAuthTokenRepository",
    "PendingAuthorizations",
    "SecretBox",
    "SecretDict",
    "SecretKeyError",
    "ServerRepository",
    "ServerVersion",
    "SqlRunStore",
    "SqlVectorStore",
    "StoreError",
    "StoredComposite",
    "StoredServer",
    "TenantInfo",
    "TenantRepository",
    "TooSoon",
    "VersionInfo",
    "alembic_config",
    "check_tenant",
    "key_digest",
]

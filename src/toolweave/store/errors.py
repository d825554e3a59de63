"""Errors the store raises, so the server can map them to HTTP statuses without
inspecting database exceptions (404 / 409 / 403 / 500)."""

from __future__ import annotations

from toolweave.errors import ToolweaveError


class StoreError(ToolweaveError):
    """Base of every error the store raises on purpose."""


class NotFound(StoreError):
    """The id or name does not exist, is deleted, or is not visible to the tenant."""


class Conflict(StoreError):
    """The change clashes with the current state: a duplicate name or a stale `expected_version`."""


class Forbidden(StoreError):
    """The object exists and is visible, but the caller may not change it (a shared tool for a tenant)."""


class TooSoon(StoreError):
    """The action was taken too recently to take it again yet (a tenant reconnecting a shared backend)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SecretKeyError(StoreError):
    """Connection secrets cannot be decrypted or the secret key cannot be loaded.

    Messages name the tenant, backend or key source, never a secret value.
    """


class GatewayLockError(StoreError):
    """Another gateway already serves this SQLite file without a change feed."""

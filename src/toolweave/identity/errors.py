"""What checking an identity raises: a bearer token that makes no caller, an issuer whose documents
cannot be had (its tokens then fail closed). `server/auth.py` turns them into 401 challenges."""

from __future__ import annotations

from toolweave.errors import ToolweaveError


class TokenRejected(ToolweaveError):
    """A bearer token that does not make a caller; `str(error)` is the reason given to the client
    (the challenge's `error_description`) and logged. It never contains the token."""


class IssuerUnavailable(ToolweaveError):
    """An issuer's document could not be had (unreachable, slow, huge, not JSON): its tokens fail closed."""

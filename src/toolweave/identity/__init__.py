"""Who is calling, from an access token of a configured issuer: verification, claims → identity,
and the gateway's face as an OAuth protected resource (docs/auth.md)."""

from toolweave.identity.claims import Identity
from toolweave.identity.errors import IssuerUnavailable, TokenRejected
from toolweave.identity.issuer import Issuer
from toolweave.identity.resource import ProtectedResource, public_url_for, quotable
from toolweave.identity.tokens import TokenVerifier

__all__ = [
    "Identity",
    "Issuer",
    "IssuerUnavailable",
    "ProtectedResource",
    "TokenRejected",
    "TokenVerifier",
    "public_url_for",
    "quotable",
]

"""Who is calling, from an access token of a configured issuer: verification, claims → identity,
and the gateway's face as an OAuth protected resource (docs/auth.md)."""

from toolweave.identity.claims import Identity, TokenRejected
from toolweave.identity.fetch import IssuerUnavailable
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

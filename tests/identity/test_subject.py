"""The caller's subject: one field of `Session`, set at the edge, kept through every call."""

from __future__ import annotations

from datetime import UTC, datetime

from toolweave.executor.session import Session
from toolweave.server.auth import local_session, session_for
from toolweave.store import ApiKeyInfo


def test_an_api_key_acts_as_its_label_and_the_operator_as_local() -> None:
    info = ApiKeyInfo("id1", "acme", None, "tw_abcd1234", ("tools:read",), datetime.now(UTC), None, None)
    session = session_for(info)
    assert (session.tenant, session.subject, session.caller) == ("acme", "key:tw_abcd1234", "key:tw_abcd1234")
    assert local_session().caller == "local"


def test_the_subject_survives_the_per_call_copy() -> None:
    session = Session(tenant="acme", label="oidc:x", subject="alice@example.com")
    assert session.asking_with(None).subject == "alice@example.com"
    assert Session(label="cli").caller == "cli"

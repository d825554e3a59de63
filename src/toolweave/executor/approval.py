"""The approval stage: tools the policy names (or, optionally, every destructive tool) run only
after the user says yes, asked through the caller's elicitation channel.

`may_elicit` is the one answer to "may this call ask the user anything?" (for
approval, or a composite's own elicitation steps): fronts use it to decide
whether a call needs a channel back to the client.
"""

from __future__ import annotations

import logging
from typing import Any

from toolweave.catalog.catalog import Entry, is_destructive
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor.policy import Policy
from toolweave.executor.session import Session
from toolweave.results import json_text
from toolweave.secrets import redact_arguments

approval_log = logging.getLogger("toolweave.approval")
APPROVAL_SECONDS = 300.0
APPROVAL_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Approve"}}}


def may_elicit(policy: Policy, entry: Entry | None) -> bool:
    """Whether a call of `entry` may ask the user: a composite (elicitation steps, or approvals of its
    inner calls), or any call while the policy asks for approvals at all."""
    if entry is None:
        return False
    return entry.composite is not None or bool(policy.approval) or policy.approve_destructive


def needs_approval(policy: Policy, entry: Entry) -> bool:
    if policy.approval.matches(entry.name):
        return True
    return bool(policy.approve_destructive and entry.composite is None and is_destructive(entry.tool))


async def refusal(entry: Entry, arguments: dict[str, Any], session: Session) -> str | None:
    """Ask the user; None when approved, else why the call was not made."""
    elicit = session.elicit
    name = entry.name
    if elicit is None:
        approval_log.info("approval for %s denied: the client cannot be asked", name)
        return (
            f"calling {name!r} needs the user's approval, but this client cannot be asked "
            "(no elicitation support); the call was not made"
        )
    shown = json_text(redact_arguments(arguments, entry.secrets))
    message = f"toolweave wants to call {name} with {shown}. Allow it?"
    try:
        outcome = await elicit(message, APPROVAL_SCHEMA, APPROVAL_SECONDS)
    except ElicitUnavailable as error:
        approval_log.info("approval for %s denied: %s", name, error)
        return (
            f"calling {name!r} needs the user's approval, but the client cannot be asked ({error}); "
            "the call was not made"
        )
    except TimeoutError:
        approval_log.info("approval for %s denied: no answer in time", name)
        return f"the user did not approve the call to {name!r} in time; it was not made"
    except Exception as error:  # noqa: BLE001 - a broken back channel is a refusal, not a crash
        approval_log.info("approval for %s denied: asking failed: %s", name, error)
        return f"calling {name!r} needs the user's approval, but asking failed ({error}); it was not made"
    approved = outcome.action == "accept" and bool((outcome.content or {}).get("approve", True))
    approval_log.info("approval for %s: %s", name, "granted" if approved else f"refused ({outcome.action})")
    if not approved:
        how = "answered no" if outcome.action == "accept" else outcome.action
        return f"the user refused the call to {name!r} ({how}); it was not made"
    return None

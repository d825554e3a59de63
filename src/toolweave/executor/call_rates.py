"""The call-rate stage: how many calls a second one API key, and one tenant, may start.

Charged once per top-level call (each call of a batch counts; a composite's inner calls are part
of the call that started it, so a workflow never fails half-way for its own steps). A call past a
limit is not run: it is an `isError` result naming the setting and when to retry, and its
`_meta["toolweave"]["rate_limited"]` carries `{limit, retry_after}` so the REST API answers `429`
with `Retry-After`. The local operator (no tenant) is not limited.

`MemoryCallRates` counts in this process; with Redis, `services.call_rates.RedisCallRates`
counts for every gateway of the deployment with the same arithmetic (`rates.TokenBucket`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Protocol

import mcp_types as types

from toolweave.config.models import LimitsConfig
from toolweave.executor.session import Session
from toolweave.rates import TokenBucket
from toolweave.results import error_result

BURST_SECONDS: Final = 2.0
"""A bucket holds two seconds' worth of calls: bursts pass, a sustained excess is refused."""
MAX_TRACKED: Final = 100_000


@dataclass(frozen=True, slots=True)
class RateRefusal:
    limit: str
    """The setting that refused the call (`limits.calls_per_second_per_key`)."""
    rate: float
    retry_after: float

    def result(self) -> types.CallToolResult:
        seconds = max(1, math.ceil(self.retry_after))
        message = f"rate limited: more than {self.rate:g} calls a second ({self.limit}); retry in {seconds} s"
        return error_result(message, meta={"rate_limited": {"limit": self.limit, "retry_after": seconds}})


class CallRates(Protocol):
    async def charge(self, session: Session) -> RateRefusal | None:
        """Count one call of `session`'s caller; a refusal when it is past a limit (nothing counted)."""
        ...


def subjects(session: Session, limits: LimitsConfig) -> list[tuple[str, str, float]]:
    """(bucket name, setting, rate) the call is charged to: its key's, then its tenant's."""
    tenant = session.tenant
    if tenant is None:
        return []
    found = []
    if limits.calls_per_second_per_key > 0:
        found.append(
            (
                f"key:{tenant}:{session.label}",
                "limits.calls_per_second_per_key",
                limits.calls_per_second_per_key,
            )
        )
    if limits.calls_per_second_per_tenant > 0:
        found.append(
            (f"tenant:{tenant}", "limits.calls_per_second_per_tenant", limits.calls_per_second_per_tenant)
        )
    return found


class MemoryCallRates:
    """Token buckets in this process (one gateway, or no Redis)."""

    def __init__(self, limits: LimitsConfig) -> None:
        self.limits = limits
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    async def charge(self, session: Session) -> RateRefusal | None:
        charged = subjects(session, self.limits)
        buckets = [(self._bucket(name, rate), setting, rate) for name, setting, rate in charged]
        for bucket, setting, rate in buckets:
            wait = bucket.retry_after()
            if wait > 0:
                return RateRefusal(setting, rate, wait)
        for bucket, _setting, _rate in buckets:
            bucket.take()
        return None

    def _bucket(self, name: str, rate: float) -> TokenBucket:
        bucket = self._buckets.pop(name, None) or TokenBucket(rate, rate * BURST_SECONDS)
        self._buckets[name] = bucket
        while len(self._buckets) > MAX_TRACKED:
            self._buckets.popitem(last=False)
        return bucket

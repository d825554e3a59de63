"""Call rates counted in Redis: the `[limits]` call rates hold for the whole deployment.

With `gateway.redis_url` set, several gateways serve one deployment and a caller's calls spread
over them; a per-process bucket would let a key make N times its rate behind N replicas. Here
each bucket is a Redis hash (`tokens`, `stamp`), and one Lua script refills, checks and charges a
call's key and tenant buckets atomically on Redis's own clock — the same arithmetic as
`rates.TokenBucket`. If Redis cannot be reached, the call is counted in this process instead
(`MemoryCallRates`): an outage of the broker never refuses or stalls calls.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from toolweave.config.models import LimitsConfig
from toolweave.executor.call_rates import BURST_SECONDS, MemoryCallRates, RateRefusal, subjects
from toolweave.executor.session import Session

logger = logging.getLogger("toolweave.limits")

_CHARGE = """
local now = redis.call('TIME')
local clock = tonumber(now[1]) + tonumber(now[2]) / 1000000
local burst = tonumber(ARGV[1])
local left = {}
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[i + 1])
  local held = redis.call('HMGET', key, 'tokens', 'stamp')
  local tokens = tonumber(held[1]) or rate * burst
  local stamp = tonumber(held[2]) or clock
  tokens = math.min(rate * burst, tokens + math.max(0, clock - stamp) * rate)
  if tokens < 1 then
    return {i, tostring((1 - tokens) / rate)}
  end
  left[i] = tokens - 1
end
for i, key in ipairs(KEYS) do
  redis.call('HSET', key, 'tokens', tostring(left[i]), 'stamp', tostring(clock))
  redis.call('PEXPIRE', key, math.ceil(burst * 2000))
end
return {0, '0'}
"""


class RedisCallRates:
    """Token buckets in Redis, shared by every gateway of the deployment."""

    def __init__(self, url: str, prefix: str, limits: LimitsConfig) -> None:
        self.limits = limits
        self.prefix = prefix
        self._url = url
        self._redis: Any = None
        self._script: Any = None
        self._fallback = MemoryCallRates(limits)

    def _charge_script(self) -> Any:
        """The client is made on the first call, not at construction: a missing `redis` package is
        reported once, clearly, by the change feed when the runtime starts (`import_redis`)."""
        if self._script is None:
            from toolweave.services.change_feed import import_redis

            self._redis = import_redis().from_url(self._url, socket_connect_timeout=2, socket_timeout=2)
            self._script = self._redis.register_script(_CHARGE)
        return self._script

    async def charge(self, session: Session) -> RateRefusal | None:
        charged = subjects(session, self.limits)
        if not charged:
            return None
        keys = [f"{self.prefix}{name}" for name, _setting, _rate in charged]
        script = self._charge_script()
        try:
            index, wait = await script(keys=keys, args=[BURST_SECONDS, *(r for _, _, r in charged)])
        except Exception as error:  # noqa: BLE001 - a broker outage must never refuse or stall a call
            logger.debug("call rates: Redis unreachable (%s); counting in this process", type(error).__name__)
            return await self._fallback.charge(session)
        if int(index) == 0:
            return None
        _name, setting, rate = charged[int(index) - 1]
        return RateRefusal(setting, rate, max(float(wait), 1 / rate if rate > 0 else math.inf))

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

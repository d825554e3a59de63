"""Token buckets: how much of something one caller may spend per second, with a bounded burst.

One home for the arithmetic behind every rate limit of the gateway: a federated connection's
frames and bytes, a key's and a tenant's calls. A bucket holds at most `capacity` tokens and
gains `rate` a second; spending more than it holds is refused, and `retry_after` says when it
would be allowed. In memory and per process: the cluster-wide variant (Redis) lives in
`services/rate_limits.py` and uses the same arithmetic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class TokenBucket:
    """`rate` tokens a second, at most `capacity` saved up; starts full."""

    rate: float
    capacity: float
    clock: Callable[[], float] = time.monotonic
    tokens: float = field(default=-1.0)
    stamp: float = field(default=0.0)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.capacity
        self.stamp = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, amount: float = 1.0) -> bool:
        """Spend `amount` if the bucket holds it (True); otherwise spend nothing (False)."""
        self._refill()
        if self.tokens >= amount:
            self.tokens -= amount
            return True
        return False

    def retry_after(self, amount: float = 1.0) -> float:
        """Seconds until `amount` could be spent (0 when it can be now)."""
        self._refill()
        missing = amount - self.tokens
        return 0.0 if missing <= 0 else missing / self.rate

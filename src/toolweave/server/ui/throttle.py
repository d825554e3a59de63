"""Login throttling: wrong API keys cost a client (and a key prefix) tokens it gets back slowly.

Without it a script tried 300 wrong keys at 243 a second against `POST /login`, never refused.
Each client address and each key prefix (the `tw_` and 8 characters shown in key lists, so guesses
spread over many addresses at one key still meet a limit) has a bucket of `BURST` wrong keys that
refills at `PER_MINUTE` a minute. An empty bucket refuses the login before the key is even looked
at (`429` with `Retry-After`); a right key costs nothing. Buckets live in this process; a full bucket
is forgotten, and at most `MAX_TRACKED` are kept (the oldest dropped), so the memory is bounded too.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Final

from toolweave.rates import TokenBucket

BURST: Final = 10
"""Wrong keys a client may send in a row before it must wait."""
PER_MINUTE: Final = 6.0
"""Wrong keys a minute a client may keep sending after its burst."""
MAX_TRACKED: Final = 10_000
PREFIX_CHARS: Final = 11
"""`tw_` and the 8 characters every key shows: what a guesser at one key cannot change."""


class LoginThrottle:
    def __init__(self, burst: int = BURST, per_minute: float = PER_MINUTE) -> None:
        self.burst = burst
        self.rate = per_minute / 60.0
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def _subjects(self, client: str, key: str) -> list[str]:
        return [f"client:{client}", *([f"prefix:{key[:PREFIX_CHARS]}"] if len(key) >= PREFIX_CHARS else [])]

    def wait(self, client: str, key: str) -> int:
        """Whole seconds until this client may try this key (0: now)."""
        waits = [
            bucket.retry_after() for s in self._subjects(client, key) if (bucket := self._buckets.get(s))
        ]
        return math.ceil(max(waits, default=0.0))

    def failed(self, client: str, key: str) -> None:
        """A wrong key: one token from the client's and the prefix's buckets."""
        for subject in self._subjects(client, key):
            bucket = self._buckets.pop(subject, None) or TokenBucket(self.rate, self.burst)
            bucket.take()
            self._buckets[subject] = bucket  # most recent last
            while len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)

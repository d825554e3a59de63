"""An error relayed from a backend names it once."""

from __future__ import annotations

from toolweave.backends.base import naming_backend


def test_an_error_that_names_its_backend_is_not_prefixed_again() -> None:
    already = ConnectionError("backend 'everything' is unavailable (reconnecting)")
    assert naming_backend("everything", already) == "backend 'everything' is unavailable (reconnecting)"
    bare = TimeoutError("no answer within 30s")
    assert naming_backend("everything", bare) == "backend 'everything': no answer within 30s"
    other = ConnectionError("backend 'other' is unavailable (failed)")  # another backend's name: say whose
    assert naming_backend("everything", other).startswith("backend 'everything': backend 'other'")

"""HTTP APIs as backends: the calls an OpenAPI document or declared actions describe, auth, results."""

from toolweave.backends.http.backend import HttpApiBackend

__all__ = ["HttpApiBackend"]

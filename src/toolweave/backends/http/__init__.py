"""HTTP APIs as backends: the calls an OpenAPI document or declared actions describe, auth, results.

`backend.py` is the backend (`HttpApiBackend`); `validate --offline` reads `check.py` alone, so
the package re-exports nothing.
"""

"""The REST API (docs/api.md): `rest.build_api` assembles the FastAPI app from the routers here.

Empty on purpose: the CLI's `keys` and `runs` import `present` (the API's JSON shapes) without
FastAPI and every router (0.6 s CPU a process).
"""

"""Router composites: one tool in front of several operations, picked by rules or by the agent.

`config.py` is the definition and its own checks, `conditions.py` and `schema.py` compile rules
and the unified input schema, `build.py` builds it against a catalog, `run.py` runs a call.
Import names from their modules (reading a config needs only `config.py`).
"""

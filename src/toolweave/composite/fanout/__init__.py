"""Fan-out composites: one call, the same arguments sent to many tools, results aggregated.

`config.py` is the definition, `build.py` builds it against a catalog, `run.py` runs a call.
Import names from their modules (reading a config needs only `config.py`).
"""

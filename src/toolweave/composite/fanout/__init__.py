"""Fan-out composites: one call, the same arguments sent to many tools, results aggregated.

`config.py` is the definition, `build.py` builds it against a catalog, `run.py` runs a call.
"""

from toolweave.composite.fanout.build import build_fanout
from toolweave.composite.fanout.run import KIND, OUTPUT_SCHEMA, FanoutComposite

__all__ = ["KIND", "OUTPUT_SCHEMA", "FanoutComposite", "build_fanout"]

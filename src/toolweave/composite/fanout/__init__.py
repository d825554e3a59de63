"""Fan-out composites: one call, the same arguments sent to many tools, results aggregated."""

from toolweave.composite.fanout.build import KIND, OUTPUT_SCHEMA, FanoutComposite, build_fanout

__all__ = ["KIND", "OUTPUT_SCHEMA", "FanoutComposite", "build_fanout"]

"""Composite kinds: fan-out, router, workflow.

`kinds.py` is the table of kinds (`parse_composite`, `build_composite`), `base.py` what every
kind shares (`Composite`, `RunContext`, `ToolResolver`), `errors.py` their errors
(`BuildError`). Import names from their modules: the package re-exports nothing, so reading a
config (which needs only the definition models) never loads a builder or an engine.
"""

"""Workflow composites: a DAG of steps with templated arguments (ToolHive's composer format too).

`config.py` is the definition, `validation.py` its own checks, `build.py` compiles it against the
catalog once (`build_workflow`), `engine.py` runs a call; `graph.py` finds composites that call each
other in a loop, `toolhive.py` translates ToolHive's format. Import names from their modules:
reading a config (which needs only `config.py`) does not load the engine and the MCP types, so
`toolweave --help` and `validate --offline` stay fast.
"""

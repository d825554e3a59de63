"""Router composites: one tool in front of several operations, picked by rules or by the agent."""

from toolweave.composite.router.build import KIND, RouterComposite, build_router

__all__ = ["KIND", "RouterComposite", "build_router"]

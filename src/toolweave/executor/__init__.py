"""The executor: one admission-controlled path for every call (policy, approval, pools, batch)."""

from toolweave.executor.admission import Pools
from toolweave.executor.executor import BatchCall, Session, ToolExecutor
from toolweave.executor.policy import Policy

__all__ = ["BatchCall", "Policy", "Pools", "Session", "ToolExecutor"]

"""The executor: one admission-controlled path for every call (policy, validation, approval,
admission pools per session, run records, batches)."""

from toolweave.executor.admission import Admission, Pools
from toolweave.executor.executor import ToolExecutor
from toolweave.executor.policy import Policy
from toolweave.executor.registry import BackendResolver, CallObserver, Limits, Registry
from toolweave.executor.session import BatchCall, Session

__all__ = [
    "Admission",
    "BackendResolver",
    "BatchCall",
    "CallObserver",
    "Limits",
    "Policy",
    "Pools",
    "Registry",
    "Session",
    "ToolExecutor",
]

"""The task store: every read and write of mcpq's state in Redis, and nothing else does either.

Public API (import from ``shared.store``): :class:`TaskStore` (synchronous: workers, the sweeper,
``mcpq status``, built by :func:`open_store`); the web tier's faces, one per concern on one
client, bundled in a :class:`WebStore` by :func:`open_web_store` (or :func:`web_store` around
a task store of one's own): :class:`AsyncTaskStore` (tasks), :class:`SessionStore` (2025-era
sessions), :class:`TaskListing` (``tasks/list``), :class:`ApiKeyLookup`,
:class:`DeploymentStats` and :class:`ResourceEvents` (resource subscriptions and updates, list
changes); the typed states and replies; the records they return; :func:`task_ref`. Inside:
the key schema (``keyspace``), one Lua script per transition
(``lua/``, loaded by ``scripts``), the KEYS/ARGV contract and reply parsing of each (``calls``,
written by concern: ``create_calls``, ``client_calls``, ``run_calls``...), the steps of the
operations that take more than one, written once for both stores (``plans``, ``task_plans``),
the drivers that run them on each flavour of client (``sync_driver``, ``async_driver``), Redis
error translation (``errors``) and the client factory (``clients``). Operators (``mcpq tasks``)
get :func:`open_admin`: tasks listed by ref (unfinished ones from their index, oldest first;
finished ones by a walk of the records, ``admin_scan``), one task shown, cancels (``admin``).

The names whose modules load redis-py (the stores, their faces and factories) are imported on
first use: a module that needs only the records and states (``mcpq.shared.wire``) loads no client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcpq.shared.store.admin_views import AdminError, Page, TaskDetail, TaskFilter, TaskSummary
from mcpq.shared.store.client_calls import Answered, Cancelled
from mcpq.shared.store.create_calls import Admission, NewTask, Refused
from mcpq.shared.store.keyspace import Keys, task_ref
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.store.run_calls import Claim, Due, InputPoll, Renewal, StepStart
from mcpq.shared.store.sessions import Outgoing, Session, SessionStore
from mcpq.shared.store.states import TERMINAL, Reply, TaskStatus
from mcpq.shared.store.stats import OUTCOMES, DeploymentStats, StatsSnapshot

if TYPE_CHECKING:
    from mcpq.shared.store.admin import TaskAdmin, open_admin
    from mcpq.shared.store.aio import AsyncTaskStore
    from mcpq.shared.store.api_keys import ApiKeyLookup
    from mcpq.shared.store.async_wakeups import AsyncWatch as Watch
    from mcpq.shared.store.clients import open_store, open_web_store
    from mcpq.shared.store.listing import Listed, Position, TaskListing
    from mcpq.shared.store.resource_events import ResourceEvents
    from mcpq.shared.store.sync import TaskStore
    from mcpq.shared.store.web import WebStore, web_store

#: The names imported on first use, by the module they live in.
_ON_FIRST_USE = {
    "mcpq.shared.store.admin": ("TaskAdmin", "open_admin"),
    "mcpq.shared.store.aio": ("AsyncTaskStore",),
    "mcpq.shared.store.api_keys": ("ApiKeyLookup",),
    "mcpq.shared.store.async_wakeups": ("AsyncWatch",),
    "mcpq.shared.store.clients": ("open_store", "open_web_store"),
    "mcpq.shared.store.listing": ("Listed", "Position", "TaskListing"),
    "mcpq.shared.store.resource_events": ("ResourceEvents",),
    "mcpq.shared.store.sync": ("TaskStore",),
    "mcpq.shared.store.web": ("WebStore", "web_store"),
}
_HOME = {name: module for module, names in _ON_FIRST_USE.items() for name in names}
_HOME["Watch"] = _HOME.pop("AsyncWatch")  # (exported as Watch)

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of :data:`_ON_FIRST_USE`, imported now (PEP 562)."""
        if name not in _HOME:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module = importlib.import_module(_HOME[name])
        value = getattr(module, "AsyncWatch" if name == "Watch" else name)
        globals()[name] = value  # found directly from now on
        return value


__all__ = [
    "OUTCOMES",
    "TERMINAL",
    "AdminError",
    "Admission",
    "Answered",
    "ApiKeyLookup",
    "AsyncTaskStore",
    "Cancelled",
    "Claim",
    "DeploymentStats",
    "Due",
    "InputPoll",
    "Keys",
    "Listed",
    "NewTask",
    "Outgoing",
    "Page",
    "Position",
    "Refused",
    "Renewal",
    "Reply",
    "ResourceEvents",
    "Session",
    "SessionStore",
    "StatsSnapshot",
    "StepStart",
    "TaskAdmin",
    "TaskDetail",
    "TaskFilter",
    "TaskListing",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TaskSummary",
    "Watch",
    "WebStore",
    "open_admin",
    "open_store",
    "open_web_store",
    "task_ref",
    "web_store",
]

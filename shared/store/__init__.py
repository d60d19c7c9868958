"""The task store: every read and write of mcpq's state in Redis, and nothing else does either.

Public API (import from ``shared.store``): :class:`TaskStore` (synchronous: workers, the sweeper,
``mcpq status``) and :class:`AsyncTaskStore` (asyncio: the web tier), built by
:func:`open_store` / :func:`open_async_store`; the typed states and replies; the records they
return; :func:`task_ref`. Inside: the key schema (``keys``), one Lua script per transition
(``lua/``, loaded by ``scripts``), the KEYS/ARGV contract and reply parsing of each
(``calls``), plain reads (``stats``), Redis error translation (``errors``), the client factory
(``clients``) and the rule for blocking timeouts (``blocking``). Operators (``mcpq tasks``) get
:func:`open_admin`: tasks listed by ref (unfinished ones from their index, oldest first;
finished ones by a walk of the records, ``admin_scan``), one task shown, cancels (``admin``).
"""

from shared.store.admin import (
    AdminError,
    Page,
    TaskAdmin,
    TaskDetail,
    TaskFilter,
    TaskSummary,
    open_admin,
)
from shared.store.aio import AsyncTaskStore
from shared.store.calls import (
    Admission,
    Answered,
    Cancelled,
    Claim,
    Due,
    InputPoll,
    NewTask,
    Refused,
    Renewal,
)
from shared.store.clients import open_async_store, open_store
from shared.store.keys import Keys, task_ref
from shared.store.listing import Listed, Position
from shared.store.records import TaskRecord
from shared.store.sessions import Outgoing, Session
from shared.store.states import TERMINAL, Reply, TaskStatus
from shared.store.stats import OUTCOMES, StatsSnapshot
from shared.store.sync import TaskStore
from shared.store.wakeups import AsyncWatch as Watch

__all__ = [
    "OUTCOMES",
    "TERMINAL",
    "AdminError",
    "Admission",
    "Answered",
    "AsyncTaskStore",
    "Cancelled",
    "Claim",
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
    "Session",
    "StatsSnapshot",
    "TaskAdmin",
    "TaskDetail",
    "TaskFilter",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TaskSummary",
    "Watch",
    "open_admin",
    "open_async_store",
    "open_store",
    "task_ref",
]

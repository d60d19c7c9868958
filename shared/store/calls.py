"""The task store's operations as data: which script, which KEYS and ARGV, how to read the reply.

Both stores (the synchronous one of the workers, the asyncio one of the web tier) execute these
(``plans``: each store's driver runs them), so the KEYS/ARGV contract of every script is written
once, beside the parser of its reply: the one edge where Lua's strings become typed values
(:class:`~mcpq.shared.store.states.Reply`, records). They are written by concern: a task's creation
(``create_calls``), a client's calls on its task (``client_calls``), a run's and its recovery
(``run_calls``); this module names them all in one place. (Sessions, ``tasks/list``, the stats
and key rotation keep theirs beside their face: ``sessions``, ``listing``, ``stats``,
``rotation``.)
"""

from mcpq.shared.store.call_types import Arg, PipelineCall, Queue, ScriptCall
from mcpq.shared.store.client_calls import Answered, Cancelled, answer, cancel, mark_watched, read
from mcpq.shared.store.create_calls import (
    ADMIT_GRACE_MS,
    Admission,
    Full,
    NewTask,
    Refused,
    admit,
    create,
    ended_members,
    mark_enqueued,
    statuses,
)
from mcpq.shared.store.run_calls import (
    Claim,
    Due,
    InputPoll,
    Renewal,
    StepStart,
    begin_step,
    claim,
    finish,
    park,
    release,
    renew,
    report,
    request_input,
    save_step,
    sweep,
    unlock,
)

__all__ = [
    "ADMIT_GRACE_MS",
    "Admission",
    "Answered",
    "Arg",
    "Cancelled",
    "Claim",
    "Due",
    "Full",
    "InputPoll",
    "NewTask",
    "PipelineCall",
    "Queue",
    "Refused",
    "Renewal",
    "ScriptCall",
    "StepStart",
    "admit",
    "answer",
    "begin_step",
    "cancel",
    "claim",
    "create",
    "ended_members",
    "finish",
    "mark_enqueued",
    "mark_watched",
    "park",
    "read",
    "release",
    "renew",
    "report",
    "request_input",
    "save_step",
    "statuses",
    "sweep",
    "unlock",
]

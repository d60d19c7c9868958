"""The dependencies of the method handlers, built once by ``create_app`` (the composition root)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from mcpq.frontend.auth import Authenticator
from mcpq.frontend.http_messages import ClientGone
from mcpq.frontend.task_service import TaskService
from mcpq.frontend.user_code import UserCode
from mcpq.shared.registry import Registry
from mcpq.shared.request_state import RequestStateSigner
from mcpq.shared.settings import Settings
from mcpq.shared.store import ResourceEvents, SessionStore

#: The id of the MCP request being served; it travels with the Celery message to the worker.
REQUEST_ID: ContextVar[str] = ContextVar("mcpq_request_id", default="")
#: Set once the client of the request being served has gone away (if the server tells us).
DISCONNECTED: ContextVar[ClientGone | None] = ContextVar("mcpq_disconnected", default=None)


@dataclass
class Services:
    settings: Settings
    tasks: TaskService
    registry: Registry
    signer: RequestStateSigner
    #: 2025-era sessions (open, touch, end; what is in flight on them: ``tasks``).
    sessions: SessionStore
    #: Resource subscriptions and updates, list changes (``subscriptions/listen``, the
    #: 2025-era ``resources/subscribe`` and GET stream).
    events: ResourceEvents
    server_info: dict[str, str] = field(default_factory=dict)
    #: ``MCPQ_AUTH``'s authenticator; by default none (every caller is ``anonymous``).
    auth: Authenticator = field(default_factory=lambda: Authenticator(()))
    #: Where resource reads, prompt renders and completions run (``mcpq.frontend.user_code``).
    user_code: UserCode = field(init=False)

    def __post_init__(self) -> None:
        self.user_code = UserCode(self.settings)
        if not self.server_info:
            name = self.settings.server_name
            if name == _DEFAULT_NAME and self.registry.server_name:
                name = self.registry.server_name  # the App's, unless MCPQ_SERVER_NAME is set
            self.server_info = {"name": name, "version": _server_version()}


_DEFAULT_NAME = Settings.__dataclass_fields__["server_name"].default


def _server_version() -> str:
    try:
        return version("mcpq-server")  # the distribution (mcpq on PyPI is another project)
    except PackageNotFoundError:
        return "0.0.0"

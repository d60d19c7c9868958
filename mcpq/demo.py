"""Demo tools: what real long-running tools look like on mcpq.

- ``build_report``: a multi-step job that reports progress and memoizes its side effects;
- ``approve_deployment``: a human approval through a typed elicitation form;
- ``summarize``: asks the client's model to write something (sampling);

and what a client reads beside them:

- ``demo://deployments/policy``: the deployment policy (a resource: markdown text);
- ``demo://deployments/{service}``: a service's current deployment (a template: its variable is
  typed, so an unknown service is ``-32602`` before any code runs, and it completes);
- ``deployment_request``: a prompt that drafts the request ``approve_deployment`` asks about.

The module holds plain ``@tool``, ``@resource`` and ``@prompt`` functions, not an ``App``: it
is served beside other modules (the default ``MCPQ_TOOLS`` is
``mcpq.conformance_fixtures,mcpq.demo``, and a project may list it with its own), and an app
here would give its name and instructions to any server that lists this module first. A module
that is a server of its own holds one (``app = App("shop")``, ``@app.tool``).
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, Field

from mcpq import Context, EmbeddedResource, Message, ToolError, prompt, resource, tool


@tool(task="optional", queue="bulk")
def build_report(
    topic: Annotated[str, Field(max_length=200)],
    ctx: Context,
    steps: Annotated[int, Field(ge=1, le=100)] = 5,
    step_seconds: Annotated[float, Field(ge=0, le=60)] = 1.0,
) -> dict[str, Any]:
    """Builds a report in several steps, reporting progress (runs on the bulk pool)."""
    sections = []
    for i in range(1, steps + 1):
        message = f"step {i}/{steps}: writing section {i} about {topic}"
        ctx.report_progress(i, steps, message)
        ctx.sleep(step_seconds)  # a cancel wakes this at once; a plain time.sleep would not
        # Memoized per task: a replay after a worker crash reuses the sections already written.
        digest = ctx.step(f"section-{i}", partial(_checksum, topic, i))
        sections.append({"section": i, "checksum": digest})
    return {"topic": topic, "sections": sections}


def _checksum(topic: str, section: int) -> str:
    return hashlib.sha256(f"{topic}:{section}".encode()).hexdigest()[:12]


class Approval(BaseModel):
    """The approval form: the client shows its fields (title and description) to the user."""

    approve: bool = Field(description="Deploy it now?")
    reason: str = Field(default="", max_length=500, description="Why")


@tool(task="required")
def approve_deployment(
    service: Annotated[str, Field(max_length=100)],
    version: Annotated[str, Field(max_length=100)],
    ctx: Context,
) -> str:
    """Asks a human to approve a deployment before running it."""
    # Parks the task (freeing the worker) if nobody answers within the hold; a replay gets the
    # stored answer without asking again. `data` is a validated Approval, or None when the user
    # declined or cancelled.
    answer = ctx.elicit(f"Approve deploying {service} {version} to production?", schema=Approval)
    if answer.data is None or not answer.data.approve:
        return f"Deployment of {service} {version} was not approved."
    ctx.report(f"deploying {service} {version}")
    # The side effect lives in a step: it runs once per task, however often the body replays.
    ctx.step("deploy", lambda: {"service": service, "version": version})
    ctx.sleep(1.0)
    return f"Deployed {service} {version}."


@tool(task="optional")
def summarize(
    text: str, ctx: Context, max_tokens: Annotated[int, Field(ge=1, le=4096)] = 200
) -> str:
    """Asks the client's model to summarize a text."""
    messages = [{"role": "user", "content": {"type": "text", "text": f"Summarize:\n\n{text}"}}]
    answer = ctx.sample(messages, max_tokens)
    content = answer.get("content") or {}
    if isinstance(content, dict) and content.get("type") == "text":
        return str(content.get("text", ""))
    raise ToolError("the client's model did not answer with text")


# -- what a client reads: a resource, a template, a prompt ------------------------------------
POLICY_URI = "demo://deployments/policy"
POLICY = """# Deployment policy

1. Every production deployment names its service, its version and why it ships now.
2. A human approves it before it starts (`approve_deployment` asks them).
3. No deployments on Fridays after 15:00 UTC, nor during an open incident.
4. A deployment that raises the error rate above 1% for 5 minutes is rolled back.
"""

#: The services the demo knows: a template variable of this type matches only these.
Service = Literal["api", "billing", "search", "web"]
SERVICES: tuple[str, ...] = get_args(Service)
_CURRENT = {
    "api": ("1.4.2", "2026-07-20T09:12:00Z"),
    "billing": ("3.0.1", "2026-07-14T13:40:00Z"),
    "search": ("0.9.8", "2026-07-22T08:05:00Z"),
    "web": ("2.11.0", "2026-07-21T16:30:00Z"),
}


@resource(POLICY_URI, mime_type="text/markdown", title="Deployment policy")
def deployment_policy() -> str:
    """The rules every production deployment follows."""
    return POLICY


@resource(
    "demo://deployments/{service}",
    mime_type="application/json",
    title="Current deployment",
    complete={"service": SERVICES},
)
def current_deployment(service: Service) -> dict[str, str]:
    """What a service runs in production now: its version and when it was deployed."""
    version, deployed_at = _CURRENT[service]
    return {"service": service, "version": version, "deployed_at": deployed_at}


@prompt(title="Draft a deployment request", complete={"service": SERVICES})
def deployment_request(
    service: Annotated[Service, Field(description="The service to deploy")],
    version: Annotated[str, Field(max_length=100, description="The version to ship")],
    reason: Annotated[str, Field(max_length=500, description="Why it ships now")] = "",
) -> list[Message]:
    """Drafts the request a human approves before `approve_deployment` deploys a service."""
    version_now, _ = _CURRENT[service]
    why = f" The reason given: {reason.rstrip('.')}." if reason else " Ask me why it ships now."
    return [
        Message(EmbeddedResource(POLICY_URI, text=POLICY, mime_type="text/markdown")),
        Message(
            f"Draft a deployment request for {service} {version} (production runs "
            f"{version_now}), following the policy above.{why} Then call approve_deployment "
            f'with service "{service}" and version "{version}".'
        ),
    ]

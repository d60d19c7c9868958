"""Demo tools: what real long-running tools look like on mcpq.

- ``build_report``: a multi-step job that reports progress and memoizes its side effects;
- ``approve_deployment``: a human approval through a typed elicitation form;
- ``summarize``: asks the client's model to write something (sampling).

The module holds plain ``@tool`` functions, not an ``App``: it is served beside other modules
(the default ``MCPQ_TOOLS`` is ``mcpq.conformance_fixtures,mcpq.demo``, and a project may list it
with its own), and an app here would give its name and instructions to any server that lists
this module first. A module that is a server of its own holds one (``app = App("shop")``,
``@app.tool``).
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Annotated, Any

from pydantic import BaseModel, Field

from mcpq import Context, ToolError, tool


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

"""Demo tools: what real long-running tools look like on mcpq.

- ``build_report``: a multi-step job that reports progress and memoizes its side effects;
- ``approve_deployment``: a human approval through an elicitation form;
- ``summarize``: asks the client's model to write something (sampling).
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Annotated, Any

from pydantic import Field

from mcpq import ToolContext, ToolError, tool


@tool(
    task="optional",
    queue="bulk",
    description="Builds a report in several steps, reporting progress (runs on the bulk pool).",
)
def build_report(
    ctx: ToolContext,
    topic: Annotated[str, Field(max_length=200)],
    steps: Annotated[int, Field(ge=1, le=100)] = 5,
    step_seconds: Annotated[float, Field(ge=0, le=60)] = 1.0,
) -> dict[str, Any]:
    sections = []
    for i in range(1, steps + 1):
        ctx.report(f"step {i}/{steps}: writing section {i} about {topic}")
        ctx.sleep(step_seconds)  # a cancel wakes this at once; a plain time.sleep would not
        # Memoized per task: a replay after a worker crash reuses the sections already written.
        digest = ctx.step(f"section-{i}", partial(_checksum, topic, i))
        sections.append({"section": i, "checksum": digest})
    return {"topic": topic, "sections": sections}


def _checksum(topic: str, section: int) -> str:
    return hashlib.sha256(f"{topic}:{section}".encode()).hexdigest()[:12]


@tool(task="required", description="Asks a human to approve a deployment before running it.")
def approve_deployment(
    ctx: ToolContext,
    service: Annotated[str, Field(max_length=100)],
    version: Annotated[str, Field(max_length=100)],
) -> str:
    schema = {
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "description": f"Deploy {service} {version}?"},
            "reason": {"type": "string", "description": "Why (optional)"},
        },
        "required": ["approve"],
    }
    # Parks the task (freeing the worker) if nobody answers within the hold; a replay gets the
    # stored answer without asking again.
    answer = ctx.elicit(f"Approve deploying {service} {version} to production?", schema)
    content = answer.get("content") or {}
    if answer.get("action") != "accept" or not content.get("approve"):
        return f"Deployment of {service} {version} was not approved."
    ctx.report(f"deploying {service} {version}")
    # The side effect lives in a step: it runs once per task, however often the body replays.
    ctx.step("deploy", lambda: {"service": service, "version": version})
    ctx.sleep(1.0)
    return f"Deployed {service} {version}."


@tool(task="optional", description="Asks the client's model to summarize a text.")
def summarize(
    ctx: ToolContext, text: str, max_tokens: Annotated[int, Field(ge=1, le=4096)] = 200
) -> str:
    messages = [{"role": "user", "content": {"type": "text", "text": f"Summarize:\n\n{text}"}}]
    answer = ctx.sample(messages, max_tokens)
    content = answer.get("content") or {}
    if isinstance(content, dict) and content.get("type") == "text":
        return str(content.get("text", ""))
    raise ToolError("the client's model did not answer with text")

"""Test-only tools for the real-client tests (``tests/clients``): progress, long calls, input
during a synchronous call, log messages at each level, and a run that records how it ended.
(The resources and prompts the clients read are ``tests.clients.resources_fixture``'s.)"""

from __future__ import annotations

from pathlib import Path

from mcpq import TaskCancelled, ToolContext, tool


@tool(task="optional", description="Test-only: reports `steps` progress messages, then returns.")
def count_up(ctx: ToolContext, steps: int = 3, delay: float = 0.3) -> str:
    for i in range(1, steps + 1):
        ctx.report(f"step {i} of {steps}")
        ctx.sleep(delay)
    return f"counted to {steps}"


@tool(
    task="optional",
    description="Test-only: logs one message at debug, info, warning and error, then returns.",
)
def log_levels(ctx: ToolContext, label: str = "run") -> str:
    ctx.debug(f"{label}: debug")
    ctx.info(f"{label}: info", logger_name="clients.fixture")
    ctx.warning({"label": label, "level": "warning"})
    ctx.error(f"{label}: error", logger_name="clients.fixture")
    return f"logged 4 messages ({label})"


@tool(task="optional", description="Test-only: waits `seconds`, reporting every `every` seconds.")
def long_call(ctx: ToolContext, seconds: float = 40.0, every: float = 10.0) -> str:
    waited = 0.0
    while waited < seconds:
        step = min(every, seconds - waited)
        ctx.sleep(step)
        waited += step
        ctx.report(f"waited {waited:g} of {seconds:g} s")
    return f"waited {seconds:g} s"


@tool(task="optional", description="Test-only: asks the user for a colour (elicitation).")
def ask_color(ctx: ToolContext) -> str:
    schema = {
        "type": "object",
        "properties": {"color": {"type": "string"}},
        "required": ["color"],
    }
    answer = ctx.elicit("Which colour?", schema)
    if answer.get("action") != "accept":
        return f"no colour ({answer.get('action')})"
    return f"colour: {answer.get('content', {}).get('color')}"


@tool(task="optional", description="Test-only: asks the client's model (sampling).")
def ask_model(ctx: ToolContext, prompt: str = "Say hello") -> str:
    reply = ctx.sample([{"role": "user", "content": {"type": "text", "text": prompt}}], 50)
    content = reply.get("content", {})
    text = content.get("text") if isinstance(content, dict) else None
    return f"model said: {text}"


@tool(
    task="optional",
    description="Test-only: writes 'started' to `path`, waits, and appends how the run ended.",
)
def marked_wait(ctx: ToolContext, path: str, seconds: float = 60.0) -> str:
    marker = Path(path)
    with marker.open("a") as f:
        f.write("started\n")
    try:
        ctx.sleep(seconds)
    except TaskCancelled:
        with marker.open("a") as f:
            f.write("cancelled\n")
        raise
    with marker.open("a") as f:
        f.write("finished\n")
    return "finished"

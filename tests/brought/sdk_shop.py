"""An MCP SDK (``mcp`` 2.3) ``MCPServer``, written as the SDK's documentation shows (nothing of
mcpq in it)."""

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

mcp = MCPServer("Bookings", instructions="Table bookings of a restaurant.")


class BookingPreferences(BaseModel):
    """Schema for collecting user preferences."""

    checkAlternative: bool = Field(description="Would you like to check another date?")  # noqa: N815
    alternativeDate: str = Field(  # noqa: N815
        default="2024-12-26", description="Alternative date (YYYY-MM-DD)"
    )


@mcp.tool()
async def book_table(date: str, time: str, party_size: int, ctx: Context) -> str:
    """Book a table with date availability check."""
    if date == "2024-12-25":
        result = await ctx.elicit(
            message=f"No tables available for {party_size} on {date}. Try another date?",
            schema=BookingPreferences,
        )
        if result.action == "accept" and result.data:
            if result.data.checkAlternative:
                return f"[SUCCESS] Booked for {result.data.alternativeDate} at {time}"
            return "[CANCELLED] No booking made"
        return "[CANCELLED] Booking cancelled"
    return f"[SUCCESS] Booked for {date} at {time}"


@mcp.tool()
async def long_running_task(task_name: str, ctx: Context, steps: int = 5) -> str:
    """Execute a task with progress updates."""
    await ctx.info(f"Starting: {task_name}")
    for i in range(steps):
        await ctx.report_progress(
            progress=(i + 1) / steps, total=1.0, message=f"Step {i + 1}/{steps}"
        )
        await ctx.debug(f"Completed step {i + 1}")
    return f"Task '{task_name}' completed"


@mcp.resource("config://settings")
def get_settings() -> str:
    """Get application settings."""
    return '{"theme": "dark", "language": "en"}'


@mcp.resource("menu://dishes/{name}")
def dish(name: str) -> str:
    """A dish of the menu, by its name."""
    return f"{name}: a house speciality"


@mcp.prompt(title="Code Review")
def review_code(code: str) -> str:
    """Review code."""
    return f"Please review this code:\n\n{code}"

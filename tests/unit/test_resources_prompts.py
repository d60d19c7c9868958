"""Resources, templates, prompts and completion on both wires (``mcpq.frontend.methods``):
declared on an ``App``, served by the web tier on its own threads, with the bad inputs the issue
names refused as JSON-RPC errors (never a 500, never a traceback), and a read that hangs cut at
``MCPQ_READ_TIMEOUT_S`` while the web serves other requests."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import falcon.testing
import orjson
import pytest

from mcpq import App, EmbeddedResource, Image, Message, ToolError
from mcpq.shared.registry import Registry
from tests.unit.fakes import Mcp, meta
from tests.unit.test_legacy import Session

FILES = {"notes.txt": "remember the milk", "todo.txt": "ship it"}
RELEASE = threading.Event()  # what the hanging resource waits for (set by the test's end)

app = App("library")


@app.resource("library://policy", mime_type="text/markdown", title="Policy")
def policy() -> str:
    """The lending policy."""
    return "# Lending\nTwo weeks."


@app.resource("library://logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG-bytes"


@app.resource("library://books/{book_id}", complete={"book_id": ["101", "102", "205"]})
def book(book_id: int) -> dict[str, Any]:
    """A book by its number."""
    return {"id": book_id, "title": f"Book {book_id}"}


def _folder() -> Path:
    return Path(__file__).resolve().parent


@app.resource("library://files/{name}", mime_type="text/plain")
def file(name: str) -> str:
    """A file of the library's folder: by its name, never a path."""
    if name not in FILES:
        raise ToolError(f"no file {name}")
    return FILES[name]


@app.resource("library://slow")
def slow() -> str:
    RELEASE.wait(30)
    return "late"


@app.resource("library://broken")
def broken() -> str:
    raise RuntimeError("secret internals: password=hunter2")


@app.resource("library://huge")
def huge() -> str:
    return "x" * 5000


@app.resource("library://staff", scopes=("staff",))
def staff() -> str:
    return "for staff"


def _languages(value: str, chosen: dict[str, str]) -> list[str]:
    return [lang for lang in ("python", "perl", "go") if lang.startswith(value)]


@app.prompt(complete={"language": _languages})
def review(code: str, language: str = "python") -> str:
    """Review a piece of code."""
    return f"Review this {language} code:\n\n{code}"


@app.prompt
def show(count: int) -> list[Any]:
    return [
        Message(f"Here are {count} things", role="assistant"),
        Image(b"\x89PNG", mime_type="image/png"),
        EmbeddedResource("library://policy", text="Two weeks.", mime_type="text/markdown"),
    ]


def served() -> Registry:
    registry = Registry()
    registry._add_app(app)
    return registry


@pytest.fixture
def library(make_mcp: Callable[..., Mcp]) -> Mcp:
    return make_mcp(tools=served(), read_timeout_s=0.5, read_threads=4, max_result_bytes=2000)


@pytest.fixture(autouse=True)
def release_hanging_reads() -> Any:
    RELEASE.clear()
    yield
    RELEASE.set()


def read(mcp: Mcp, uri: str, **kw: Any) -> Any:
    return mcp.post("resources/read", {"uri": uri}, opt_in=False, **kw)


# -- lists -----------------------------------------------------------------------------------------
def test_lists_carry_every_declaration_and_caching_hints(library: Mcp) -> None:
    resources = library.post("resources/list", {}, opt_in=False).result
    uris = [r["uri"] for r in resources["resources"]]
    assert uris[:2] == ["library://policy", "library://logo"] and "library://staff" in uris
    assert resources["resources"][0] == {
        "uri": "library://policy",
        "name": "policy",
        "title": "Policy",
        "description": "The lending policy.",
        "mimeType": "text/markdown",
    }
    assert (resources["ttlMs"], resources["cacheScope"]) == (0, "private")
    templates = library.post("resources/templates/list", {}, opt_in=False).result
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
        "library://books/{book_id}",
        "library://files/{name}",
    ]
    prompts = library.post("prompts/list", {}, opt_in=False).result["prompts"]
    assert prompts[0] == {
        "name": "review",
        "description": "Review a piece of code.",
        "arguments": [
            {"name": "code", "required": True},
            {"name": "language", "required": False},
        ],
    }


def test_a_list_pages_with_an_opaque_cursor(make_mcp: Callable[..., Mcp]) -> None:
    many = App("many")

    def numbered(n: int) -> Callable[[], str]:
        def one() -> str:
            return str(n)

        return one

    for n in range(150):
        many.resource(f"many://r/{n}", name=f"r{n}")(numbered(n))
    registry = Registry()
    registry._add_app(many)
    mcp = make_mcp(tools=registry)
    first = mcp.post("resources/list", {}, opt_in=False).result
    assert len(first["resources"]) == 100 and first["nextCursor"]
    second = mcp.post("resources/list", {"cursor": first["nextCursor"]}, opt_in=False).result
    assert len(second["resources"]) == 50 and "nextCursor" not in second
    bad = mcp.post("resources/list", {"cursor": "not-ours"}, opt_in=False)
    assert bad.code() == (400, -32602)


# -- reads ---------------------------------------------------------------------------------------
def test_text_binary_and_template_reads(library: Mcp) -> None:
    text = read(library, "library://policy").result["contents"]
    assert text == [
        {"uri": "library://policy", "mimeType": "text/markdown", "text": "# Lending\nTwo weeks."}
    ]
    blob = read(library, "library://logo").result["contents"][0]
    assert base64.b64decode(blob["blob"]) == b"\x89PNG-bytes" and blob["mimeType"] == "image/png"
    book = read(library, "library://books/101").result["contents"][0]
    assert book == {
        "uri": "library://books/101",
        "mimeType": "application/json",
        "text": '{"id":101,"title":"Book 101"}',
    }


def test_an_unknown_uri_is_32602_naming_it(library: Mcp) -> None:
    reply = read(library, "library://nothing")
    assert reply.code() == (400, -32602)
    assert reply.error["data"] == {"uri": "library://nothing"}


def test_a_template_variable_that_fails_its_type_is_32602_before_any_code_runs(
    library: Mcp,
) -> None:
    reply = read(library, "library://books/abc")
    assert reply.code() == (400, -32602)
    assert "book_id" in reply.error["message"]


@pytest.mark.parametrize(
    "uri",
    [
        "library://files/../../etc/passwd",
        "library://files/..",
        "library://files/%2e%2e%2fsecret",
        "library://files/..%2F..%2Fetc%2Fpasswd",
        "library://files/%2Fetc%2Fpasswd",
    ],
)
def test_traversal_in_a_template_value_matches_nothing(library: Mcp, uri: str) -> None:
    reply = read(library, uri)
    assert reply.code() == (400, -32602), reply.content
    assert reply.error["data"] == {"uri": uri}


def test_a_tool_error_is_the_apps_words_and_a_crash_only_an_error_id(
    library: Mcp, caplog: pytest.LogCaptureFixture
) -> None:
    missing = read(library, "library://files/missing.txt")
    assert missing.code()[1] == -32603 and missing.error["message"] == "no file missing.txt"
    crashed = read(library, "library://broken")
    assert crashed.code()[1] == -32603
    assert "hunter2" not in crashed.content.decode() and "Traceback" not in crashed.content.decode()
    assert "error id" in crashed.error["message"]
    assert any("resource broken failed" in r.getMessage() for r in caplog.records)


def test_a_read_over_the_size_bound_is_refused_naming_the_setting(library: Mcp) -> None:
    reply = read(library, "library://huge")
    assert reply.code()[1] == -32603 and "MCPQ_MAX_RESULT_BYTES" in reply.error["message"]


def test_a_hanging_read_is_cut_at_its_bound_while_other_requests_are_served(
    library: Mcp,
) -> None:
    # Both requests on the app's one event loop (as uvicorn serves them), the hanging one first.
    def body(uri: str) -> bytes:
        return orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/read",
                "params": {"uri": uri, "_meta": meta(opt_in=False)},
            }
        )

    async def both() -> tuple[Any, Any, float]:
        async with falcon.testing.ASGIConductor(library.shim) as conductor:

            async def post(uri: str) -> Any:
                headers = library.headers("resources/read", {"uri": uri})
                return await conductor.simulate_post("/mcp", body=body(uri), headers=headers)

            started = asyncio.get_running_loop().time()
            hanging = asyncio.ensure_future(post("library://slow"))
            await asyncio.sleep(0.05)
            quick = await post("library://policy")
            quick_at = asyncio.get_running_loop().time() - started
            return await hanging, quick, quick_at

    slow, quick, quick_at = asyncio.run(both())
    assert quick.json["result"]["contents"][0]["text"].startswith("# Lending")
    assert quick_at < 0.4, "served while the other read hung"
    assert slow.json["error"]["code"] == -32603
    assert "MCPQ_READ_TIMEOUT_S" in slow.json["error"]["message"]


def test_one_principal_holds_at_most_half_the_read_threads(library: Mcp) -> None:
    # 4 threads: a caller's third read at once is 429, with when to retry.
    async def three() -> list[Any]:
        async with falcon.testing.ASGIConductor(library.shim) as conductor:

            async def post(uri: str) -> Any:
                body = orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "resources/read",
                        "params": {"uri": uri, "_meta": meta(opt_in=False)},
                    }
                )
                headers = library.headers("resources/read", {"uri": uri})
                return await conductor.simulate_post("/mcp", body=body, headers=headers)

            hanging = [asyncio.ensure_future(post("library://slow")) for _ in range(2)]
            await asyncio.sleep(0.1)
            third = await post("library://policy")
            return [third, *(await asyncio.gather(*hanging))]

    third, *slow = asyncio.run(three())
    assert third.status_code == 429 and third.headers["retry-after"] == "1"
    assert third.json["error"]["data"]["setting"] == "MCPQ_READ_THREADS"
    assert all(s.json["error"]["code"] == -32603 for s in slow)


def test_a_resource_with_scopes_needs_them(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(tools=served(), auth=("apikey",))
    mcp.token = mcp.api_key("reader")
    reply = read(mcp, "library://staff")
    assert reply.status == 403 and reply.error["data"] == {"requiredScopes": ["staff"]}
    mcp.token = mcp.api_key("clerk", "staff")
    assert read(mcp, "library://staff").result["contents"][0]["text"] == "for staff"


# -- prompts and completion ------------------------------------------------------------------------
def test_a_prompt_renders_its_messages(library: Mcp) -> None:
    got = library.post(
        "prompts/get", {"name": "review", "arguments": {"code": "x = 1"}}, opt_in=False
    ).result
    assert got["description"] == "Review a piece of code."
    assert got["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Review this python code:\n\nx = 1"}}
    ]
    mixed = library.post("prompts/get", {"name": "show", "arguments": {"count": "3"}}, opt_in=False)
    roles = [(m["role"], m["content"]["type"]) for m in mixed.result["messages"]]
    assert roles == [("assistant", "text"), ("user", "image"), ("user", "resource")]


def test_bad_prompt_arguments_are_32602(library: Mcp) -> None:
    missing = library.post("prompts/get", {"name": "review", "arguments": {}}, opt_in=False)
    assert missing.code() == (400, -32602) and "code" in missing.error["message"]
    typed = library.post(
        "prompts/get", {"name": "show", "arguments": {"count": "many"}}, opt_in=False
    )
    assert typed.code() == (400, -32602)
    unknown = library.post("prompts/get", {"name": "nope"}, opt_in=False)
    assert unknown.code() == (400, -32602)


def test_a_ten_megabyte_argument_is_refused_before_any_code_runs(library: Mcp) -> None:
    big = {"name": "review", "arguments": {"code": "x" * (10 * 1024 * 1024)}}
    reply = library.post("prompts/get", big, opt_in=False)
    assert reply.status in {400, 413} and reply.status != 500
    assert "Traceback" not in reply.content.decode(errors="replace")


def test_completion_of_a_prompt_argument_and_a_template_variable(library: Mcp) -> None:
    def complete(ref: dict[str, Any], name: str, value: str) -> Any:
        params = {"ref": ref, "argument": {"name": name, "value": value}}
        return library.post("completion/complete", params, opt_in=False)

    languages = complete({"type": "ref/prompt", "name": "review"}, "language", "p").result
    assert languages["completion"] == {"values": ["python", "perl"], "total": 2, "hasMore": False}
    books = complete({"type": "ref/resource", "uri": "library://books/{book_id}"}, "book_id", "10")
    assert books.result["completion"]["values"] == ["101", "102"]
    none = complete({"type": "ref/prompt", "name": "review"}, "code", "")
    assert none.result["completion"]["values"] == []
    unknown = complete({"type": "ref/prompt", "name": "nope"}, "x", "")
    assert unknown.code() == (400, -32602)


# -- the 2025-era wire ----------------------------------------------------------------------------
def test_a_2025_session_declares_and_serves_the_same(library: Mcp) -> None:
    session = Session(library)
    capabilities = session.result["capabilities"]
    assert {"resources", "prompts", "completions", "logging"} <= capabilities.keys()
    listed = session.request("resources/list").result
    assert "ttlMs" not in listed and "resultType" not in listed
    assert listed["resources"][0]["uri"] == "library://policy"
    text = session.request("resources/read", {"uri": "library://policy"}, rid=2).result
    assert text["contents"][0]["text"].startswith("# Lending")
    unknown = session.request("resources/read", {"uri": "library://x"}, rid=3)
    assert unknown.code() == (200, -32602)
    got = session.request("prompts/get", {"name": "review", "arguments": {"code": "y"}}, rid=4)
    assert got.result["messages"][0]["content"]["text"].endswith("y")

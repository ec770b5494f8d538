"""A real MCP client (the official Python SDK) for the tests of
`sandcrab mcp serve`.

Usage:
  client.py stdio SCRIPT -- COMMAND [ARGS...]
  client.py http URL TOKEN SCRIPT

SCRIPT is a JSON list of steps, run in order after `initialize`:
  {"list": true}                          -> the tool names
  {"call": NAME, "args": {...}}           -> the result (with progress seen)
  {"cancel_after": SECS, "call": NAME, "args": {...}}
                                          -> cancel the call after SECS
  {"wait_list_changed": SECS}             -> whether tools/list_changed came
  {"sleep": SECS}
  {"touch": PATH}                         -> create PATH (tells the test
                                             the steps before it are done)
  {"gone": CMDLINE}                       -> whether no process has that
                                             command line (waits up to 3 s)
  {"answers": ["allow", "deny:NOTE", "decline"]}
                                          -> how the next elicitations are
                                             answered (a script with this
                                             step declares elicitation)
  {"asked": true}                         -> the elicitation messages seen
  {"set_level": LEVEL}                    -> logging/setLevel (the result)
  {"logs": true}                          -> the log messages seen

Prints one JSON object: {"server": name, "steps": [...]}.
"""

import json
import os
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def running(cmdline):
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().replace(b"\0", b" ").decode().strip() == cmdline:
                    return True
        except OSError:
            pass
    return False


async def gone(cmdline):
    for _ in range(300):
        if not running(cmdline):
            return True
        await anyio.sleep(0.01)
    return False


async def run_steps(read, write, script):
    list_changed = anyio.Event()

    async def on_message(message):
        name = type(getattr(message, "root", message)).__name__
        if "ToolListChanged" in name:
            list_changed.set()

    answers = []
    asked = []

    async def on_elicit(context, params):
        import mcp.types as types

        asked.append({"message": params.message, "schema": params.requested_schema})
        answer = answers.pop(0) if answers else "decline"
        if answer == "allow":
            return types.ElicitResult(action="accept", content={"allow": True})
        if answer.startswith("deny:"):
            return types.ElicitResult(action="accept", content={"allow": False, "note": answer[5:]})
        return types.ElicitResult(action="decline")

    logs = []

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    elicits = any("answers" in step for step in script)
    async with ClientSession(
        read,
        write,
        message_handler=on_message,
        elicitation_callback=on_elicit if elicits else None,
        logging_callback=on_log,
    ) as session:
        init = await session.initialize()
        out = {"server": init.server_info.name, "steps": []}
        for step in script:
            if "list" in step:
                tools = await session.list_tools()
                out["steps"].append(
                    {
                        "tools": [t.name for t in tools.tools],
                        "schemas": {t.name: t.input_schema for t in tools.tools},
                    }
                )
            elif "call" in step:
                progress = []

                async def on_progress(value, total, message):
                    progress.append(message)

                async def call():
                    return await session.call_tool(
                        step["call"], step.get("args", {}), progress_callback=on_progress
                    )

                if "cancel_after" in step:
                    with anyio.move_on_after(step["cancel_after"]) as scope:
                        await call()
                    out["steps"].append({"cancelled": scope.cancelled_caught, "progress": progress})
                    continue
                try:
                    result = await call()
                except Exception as e:  # a protocol error
                    out["steps"].append({"protocol_error": str(e)})
                    continue
                out["steps"].append(
                    {
                        "is_error": bool(result.is_error),
                        "text": text_of(result),
                        "structured": result.structured_content,
                        "meta": result.meta,
                        "progress": progress,
                    }
                )
            elif "wait_list_changed" in step:
                with anyio.move_on_after(step["wait_list_changed"]):
                    await list_changed.wait()
                out["steps"].append({"list_changed": list_changed.is_set()})
                list_changed = anyio.Event()
            elif "gone" in step:
                out["steps"].append({"gone": await gone(step["gone"])})
            elif "answers" in step:
                answers.extend(step["answers"])
            elif "asked" in step:
                out["steps"].append({"asked": asked})
            elif "set_level" in step:
                try:
                    await session.set_logging_level(step["set_level"])
                    out["steps"].append({"set_level": "ok"})
                except Exception as e:  # a protocol error
                    out["steps"].append({"set_level": str(e)})
            elif "logs" in step:
                await anyio.sleep(0.2)
                out["steps"].append({"logs": logs})
            elif "sleep" in step:
                await anyio.sleep(step["sleep"])
            elif "touch" in step:
                with open(step["touch"], "w"):
                    pass
        return out


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        script = json.loads(sys.argv[2])
        assert sys.argv[3] == "--"
        # The server gets this process's whole environment (the SDK passes
        # only a few safe variables by default): the tests' XDG directories.
        params = StdioServerParameters(
            command=sys.argv[4], args=sys.argv[5:], env=dict(os.environ)
        )
        async with stdio_client(params) as (read, write):
            out = await run_steps(read, write, script)
    else:
        url, token, script = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                out = await run_steps(read, write, script)
    print(json.dumps(out))


anyio.run(main)

"""A scripted editor: the official ACP Python SDK's client drives an agent
started as `python client.py STEPS CWD -- COMMAND ARGS…` and prints one
JSON report on stdout, in the same shape as client.mjs (the same steps but
`raw`: new, load, list, mode, prompt with answers and cancel_on)."""

import asyncio
import json
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    RequestPermissionResponse,
)


class Editor:
    """Collects updates for the running step and answers permission
    questions from its list of answers."""

    def __init__(self):
        self.current = None
        self.asked = []
        self.conn = None

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
                # The SDK spreads the request's _meta into the keywords.
                "_meta": dict(kwargs),
            }
        )
        answers = self.current["answers"] if self.current else []
        chosen = answers.pop(0) if answers else "cancelled"
        if chosen == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def session_update(self, session_id, update, **kwargs):
        if self.current is None:
            return
        dumped = update.model_dump(by_alias=True, exclude_none=True)
        self.current["updates"].append(dumped)
        cancel_on = self.current.get("cancel_on")
        if cancel_on and dumped.get("sessionUpdate") == cancel_on and not self.current.get("sent"):
            self.current["sent"] = True
            await self.conn.cancel(session_id=session_id)

    def on_connect(self, conn):
        self.conn = conn


async def main():
    steps_json, cwd, dashdash, command, *args = sys.argv[1:]
    assert dashdash == "--", "usage: client.py STEPS CWD -- COMMAND ARGS…"
    steps = json.loads(steps_json)
    editor = Editor()
    report = {"steps": []}
    async with spawn_agent_process(
        editor, command, *args, env=dict(os.environ), transport_kwargs={"limit": 64 * 1024 * 1024}
    ) as (conn, process):
        editor.conn = conn
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
        )
        report["initialize"] = init.model_dump(by_alias=True, exclude_none=True)
        last = None
        for step in steps:
            out = {"step": step, "updates": []}
            editor.current = {
                "updates": out["updates"],
                "answers": list(step.get("answers", [])),
                "cancel_on": step.get("cancel_on"),
            }
            try:
                if step.get("new"):
                    result = await conn.new_session(cwd=cwd, mcp_servers=[])
                    last = result.session_id
                elif step.get("load"):
                    last = last if step["load"] == "last" else step["load"]
                    result = await conn.load_session(cwd=cwd, session_id=last, mcp_servers=[])
                elif step.get("list"):
                    result = await conn.list_sessions(cwd=cwd)
                elif step.get("mode"):
                    result = await conn.set_session_mode(session_id=last, mode_id=step["mode"])
                elif step.get("prompt"):
                    result = await conn.prompt(
                        session_id=step.get("session", last), prompt=[text_block(step["prompt"])]
                    )
                else:
                    raise ValueError(f"unknown step {step}")
                out["result"] = result.model_dump(by_alias=True, exclude_none=True) if result else {}
            except Exception as err:  # the report says what failed
                out["error"] = {"code": getattr(err, "code", None), "message": str(err)}
            out["asked"] = editor.asked
            editor.asked = []
            report["steps"].append(out)
        editor.current = None
        process.stdin.close()
        report["agentExit"] = await asyncio.wait_for(process.wait(), 30)
    print(json.dumps(report))


asyncio.run(main())

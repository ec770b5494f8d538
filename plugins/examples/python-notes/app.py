"""python-notes: the Python example plugin, built with componentize-py.

Two tools, one per thing a plugin can do besides computing:

- `todo_list` reads a file from the workspace (Python's own `open`, which
  reaches the WASI filesystem the plugin was granted);
- `shout` runs a program on the host (`tr`, through sandcrab's `process`
  import; the operator must grant it);
- `url_todo_list` fetches a text document over HTTP (sandcrab_http.py, over
  wasi:http: the host lets the request out only to an origin the manifest
  asks for and the operator grants, and adds the operator's credential for
  it, if any, on the way out).

Build: `componentize-py -d wit -w notes-plugin componentize app -o python_notes.wasm`
(scripts/build-examples does it, after copying the WIT packages into wit/deps).
"""
import json

from componentize_py_types import Err
from sandcrab_paths import guest_path
from wit_world import exports
from wit_world.imports import process
from wit_world.imports import sandcrab_plugin_types as types

import sandcrab_http


def schema(properties, required):
    return json.dumps({"type": "object", "properties": properties, "required": required})


TOOLS = [
    types.ToolSpec(
        name="todo_list",
        description="List the TODO and FIXME lines of a file in the workspace, with line numbers.",
        parameters_schema=schema(
            {"path": {"type": "string", "description": "The file, relative to the working directory"}},
            ["path"],
        ),
        writes=types.Writes_Nothing(),
        background=False,
    ),
    types.ToolSpec(
        name="shout",
        description="Upper-case text with the host's `tr` program.",
        parameters_schema=schema({"text": {"type": "string"}}, ["text"]),
        writes=types.Writes_Nothing(),
        background=False,
    ),
    types.ToolSpec(
        name="url_todo_list",
        description="Fetch a text document over HTTP and list its TODO and FIXME lines.",
        parameters_schema=schema({"url": {"type": "string", "description": "The document's URL"}}, ["url"]),
        writes=types.Writes_Nothing(),
        background=False,
    ),
]


def todo_list(args, context):
    path = guest_path(context, args["path"])
    if path is None:
        raise Err(types.ToolError_Denied(f"{args['path']} is outside the workspace"))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Err(types.ToolError_InvalidArguments(f"cannot read {args['path']}: {e.strerror}"))
    return todos(lines, args["path"])


def todos(lines, name):
    found = [f"{n}: {line.strip()}" for n, line in enumerate(lines, 1) if "TODO" in line or "FIXME" in line]
    return "\n".join(found) if found else f"{name}: no TODO or FIXME"


def url_todo_list(args, _context):
    try:
        status, body = sandcrab_http.get(args["url"])
    except sandcrab_http.Refused as e:
        raise Err(types.ToolError_Denied(str(e)))
    except sandcrab_http.Failed as e:
        raise Err(types.ToolError_Failed(str(e)))
    if not 200 <= status < 300:
        raise Err(types.ToolError_Failed(f"{args['url']} answered {status}"))
    return todos(body.decode(errors="replace").splitlines(), args["url"])


def shout(args, _context):
    # Refused (the model reads why) unless the operator granted `tr`:
    # [policy.plugins.python-notes] programs = ["tr"]
    try:
        out = process.run(process.Command(
            program="tr", args=["a-z", "A-Z"], cwd=None, env=[],
            stdin=args["text"].encode(), timeout_ms=5000,
        ))
    except Err as e:
        raise Err(types.ToolError_Denied(f"cannot run tr: {e.value.value}"))
    if out.exit_code != 0:
        raise Err(types.ToolError_Failed(out.stderr.decode(errors="replace")))
    return out.stdout.decode(errors="replace")


HANDLERS = {"todo_list": todo_list, "shout": shout, "url_todo_list": url_todo_list}


class Tool(exports.Tool):
    def tools(self):
        return TOOLS

    def call(self, name, args_json, context):
        handler = HANDLERS.get(name)
        if handler is None:
            raise Err(types.ToolError_InvalidArguments(f"this plugin has no tool named {name}"))
        return types.ToolOutput(text=handler(json.loads(args_json), context), timed_out=False)

"""{{name}}: a sandcrab tool plugin in Python, built with componentize-py.

Build: ./build.sh (needs `pip install -r requirements.txt`).
Try it: sandcrab tool call {{tool}} --args '{"path": "README.md"}' --plugins .
"""
import json

from componentize_py_types import Err
from sandcrab_paths import guest_path
from wit_world import exports
from wit_world.imports import types

SPEC = types.ToolSpec(
    name="{{tool}}",
    description="Count the lines, words and bytes of a text file in the workspace.",
    parameters_schema=json.dumps({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to count, relative to the working directory"},
        },
        "required": ["path"],
    }),
    writes=types.Writes_Nothing(),
    background=False,
    # How much of a call's output the model sees (None: the host's default).
    output_limit=None,
)


class Tool(exports.Tool):
    def tools(self):
        return [SPEC]

    def call(self, name, args_json, context):
        if name != "{{tool}}":
            raise Err(types.ToolError_InvalidArguments(f"this plugin has no tool named {name}"))
        args = json.loads(args_json)
        path = guest_path(context, args["path"])
        if path is None:
            raise Err(types.ToolError_Denied(f"{args['path']} is outside the workspace"))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise Err(types.ToolError_InvalidArguments(f"cannot read {args['path']}: {e.strerror}"))
        text = data.decode("utf-8", errors="replace")
        return types.ToolOutput(
            text=f"{args['path']}: {len(text.splitlines())} lines, {len(text.split())} words, {len(data)} bytes",
            timed_out=False,
        )

# To run a program, request it in plugin.toml (programs = ["git"]), have the
# operator grant it, then:
#     from wit_world.imports import process
#     out = process.run(process.Command(program="git", args=["status"], cwd=None,
#                                       env=[], stdin=None, timeout_ms=None))

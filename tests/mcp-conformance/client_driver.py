"""The client side of the MCP conformance suite: sandcrab as a user runs
it, with the scenario's server configured as `[mcp.servers.conformance]`.

The suite starts this with the server's URL as the last argument and the
scenario in MCP_CONFORMANCE_SCENARIO; SANDCRAB_BIN names the binary. Each
scenario is what a user would type: `sandcrab mcp list` to connect, and
`sandcrab tool call` to call a tool, answering a server's question on
stdin as the operator would on the terminal (`y`: accept the defaults).
"""

import os
import subprocess
import sys
import tempfile

# scenario -> (tool, arguments, what the operator types), or None: connect
# and list only.
CALLS = {
    "initialize": None,
    "tools_call": ("add_numbers", '{"a": 2, "b": 3}', ""),
    "elicitation-sep1034-client-defaults": (
        "test_client_elicitation_defaults",
        "{}",
        "y\n",
    ),
    "sse-retry": ("test_reconnection", "{}", ""),
}


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario not in CALLS:
        print(f"client_driver: no steps for scenario {scenario!r}", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="sandcrab-conformance-")
    config = os.path.join(root, "config", "sandcrab")
    workspace = os.path.join(root, "workspace")
    os.makedirs(config)
    os.makedirs(workspace)
    with open(os.path.join(config, "config.toml"), "w") as f:
        f.write(f'[mcp.servers.conformance]\nurl = "{url}"\n')
    env = dict(
        os.environ,
        XDG_CONFIG_HOME=os.path.join(root, "config"),
        XDG_DATA_HOME=os.path.join(root, "data"),
    )
    sandcrab = os.environ["SANDCRAB_BIN"]
    step = CALLS[scenario]
    if step is None:
        args, answers = ["mcp", "list"], ""
    else:
        tool, arguments, answers = step
        args = ["tool", "call", f"conformance__{tool}", "--args", arguments]
    done = subprocess.run(
        [sandcrab, *args, "-w", workspace],
        input=answers,
        text=True,
        capture_output=True,
        env=env,
        timeout=60,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())

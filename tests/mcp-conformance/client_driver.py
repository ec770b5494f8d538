"""The client side of the MCP conformance suite: sandcrab as a user runs
it, with the scenario's server configured as `[mcp.servers.conformance]`.

The suite starts this with the server's URL as the last argument and the
scenario in MCP_CONFORMANCE_SCENARIO; SANDCRAB_BIN names the binary. Each
scenario is what a user would type: `sandcrab mcp list` to connect, and
`sandcrab tool call` to call a tool, answering a server's question on
stdin as the operator would on the terminal (`y`: accept the defaults).
"""

import json
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

# The client id metadata document the suite's servers expect.
CLIENT_METADATA = "https://conformance-test.local/client-metadata.json"


def browse(url: str) -> int:
    """Play the user's browser: open the authorization URL and follow its
    redirects, back to sandcrab's loopback listener (the suite's
    authorization server approves at once)."""
    import urllib.request

    urllib.request.urlopen(url, timeout=30).read()
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--browse"]:
        return browse(sys.argv[2])
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario.startswith("auth/"):
        return signed_in(url)
    if scenario not in CALLS:
        print(f"client_driver: no steps for scenario {scenario!r}", file=sys.stderr)
        return 2
    env, workspace = setup(url)
    return run(env, workspace, CALLS[scenario])


def setup(url: str):
    """A fresh user: configuration naming the server, folders of its own."""
    # Under SANDCRAB_CONFORMANCE_ROOT when set (the tests look inside).
    parent = os.environ.get("SANDCRAB_CONFORMANCE_ROOT")
    if parent:
        os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="sandcrab-conformance-", dir=parent)
    config = os.path.join(root, "config", "sandcrab")
    workspace = os.path.join(root, "workspace")
    os.makedirs(config)
    os.makedirs(workspace)
    # A client registered beforehand (the scenario's context names it):
    # its id in the configuration, its secret in the environment.
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    # The client's metadata document, as a client that hosts one names it
    # (the suite's authorization servers know this one): used where a
    # server supports URL client ids, dynamic registration elsewhere.
    oauth = f'[mcp.servers.conformance.oauth]\nclient_metadata_url = "{CLIENT_METADATA}"\n'
    if "client_id" in context:
        oauth += f'client_id = "{context["client_id"]}"\n'
        if "client_secret" in context:
            oauth += 'client_secret_env = "CONFORMANCE_CLIENT_SECRET"\n'
    with open(os.path.join(config, "config.toml"), "w") as f:
        f.write(f'[mcp.servers.conformance]\nurl = "{url}"\n{oauth}')
    env = dict(
        os.environ,
        CONFORMANCE_CLIENT_SECRET=context.get("client_secret", ""),
        XDG_CONFIG_HOME=os.path.join(root, "config"),
        XDG_DATA_HOME=os.path.join(root, "data"),
        BROWSER=f"{sys.executable} {os.path.abspath(__file__)} --browse",
    )
    return env, workspace


def signed_in(url: str) -> int:
    """Sign in (`mcp login`), connect, and call the scenario's tool. A
    call refused for want of scope says so and names `mcp login`: the
    operator signs in once more (step-up) and calls again, once."""
    env, workspace = setup(url)
    login = ["mcp", "login", "conformance"]
    call = ["tool", "call", "conformance__test-tool", "--args", "{}"]
    for args in (login, ["mcp", "list"], call):
        done = sandcrab(env, workspace, args, "")
        if done.returncode != 0:
            break
    if done.returncode != 0 and "sandcrab mcp login conformance" in done.stderr:
        done = sandcrab(env, workspace, login, "")
        if done.returncode == 0:
            done = sandcrab(env, workspace, call, "")
    return done.returncode


def sandcrab(env, workspace, args, answers) -> subprocess.CompletedProcess:
    """Run one command as the user would, showing what it said."""
    done = subprocess.run(
        [os.environ["SANDCRAB_BIN"], *args, "-w", workspace],
        input=answers,
        text=True,
        capture_output=True,
        env=env,
        timeout=60,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done


def run(env, workspace, step) -> int:
    if step is None:
        return sandcrab(env, workspace, ["mcp", "list"], "").returncode
    tool, arguments, answers = step
    args = ["tool", "call", f"conformance__{tool}", "--args", arguments]
    return sandcrab(env, workspace, args, answers).returncode


if __name__ == "__main__":
    sys.exit(main())

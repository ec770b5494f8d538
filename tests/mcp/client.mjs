// A real MCP client (the official TypeScript SDK) for the tests of
// `sandcrab mcp serve`; the same steps as client.py:
//
//   node client.mjs stdio SCRIPT -- COMMAND [ARGS...]
//   node client.mjs http URL TOKEN SCRIPT
//
// SCRIPT is a JSON list of {"list": true} and {"call": NAME, "args": {...}}
// steps; prints {"server": name, "steps": [...]}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);
let transport, script;
if (mode === "stdio") {
  script = JSON.parse(rest[0]);
  // The server gets this process's whole environment (the tests' XDG
  // directories), not the SDK's short default list.
  transport = new StdioClientTransport({ command: rest[2], args: rest.slice(3), env: process.env });
} else {
  const [url, token, steps] = rest;
  script = JSON.parse(steps);
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}
const client = new Client({ name: "sandcrab-test", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion()?.name, steps: [] };
for (const step of script) {
  if (step.list) {
    const { tools } = await client.listTools();
    out.steps.push({ tools: tools.map((t) => t.name) });
  } else if (step.call) {
    const progress = [];
    try {
      const result = await client.callTool({ name: step.call, arguments: step.args ?? {} }, undefined, {
        onprogress: (p) => progress.push(p.message ?? ""),
      });
      out.steps.push({
        is_error: Boolean(result.isError),
        text: result.content.map((c) => c.text ?? "").join(""),
        structured: result.structuredContent ?? null,
        progress,
      });
    } catch (e) {
      out.steps.push({ protocol_error: String(e.message ?? e) });
    }
  }
}
await client.close();
console.log(JSON.stringify(out));

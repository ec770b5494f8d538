// A scripted editor: the official ACP TypeScript SDK's client drives an
// agent started as `node client.mjs STEPS CWD -- COMMAND ARGS…` and
// prints one JSON report on stdout. STEPS is a JSON array, each one of:
//   {"new": true}                      session/new in CWD
//   {"load": "ID" | "last"}            session/load (its replayed updates kept)
//   {"list": true}                     session/list for CWD
//   {"mode": "ID"}                     session/set_mode
//   {"prompt": "text", "answers": ["allow-once", …], "cancel_on": "tool_call"}
//       session/prompt; each permission request is answered with the next
//       option id in `answers` ("cancelled" answers cancelled); with
//       `cancel_on`, session/cancel is sent when that update first arrives
//   {"raw": "line"}                    a line written to the agent as is
//                                      (the answer to it, if any, kept)
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [stepsJson, cwd, dashdash, command, ...args] = process.argv.slice(2);
if (dashdash !== "--" || !command) {
  console.error("usage: node client.mjs STEPS CWD -- COMMAND ARGS…");
  process.exit(2);
}
const steps = JSON.parse(stepsJson);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });

// Raw lines share stdin with the SDK: a tee keeps what the agent answers.
const rawAnswers = [];
const stdout = Readable.toWeb(agent.stdout).pipeThrough(
  new TransformStream({
    transform(chunk, controller) {
      for (const line of new TextDecoder().decode(chunk).split("\n")) {
        if (line.includes('"id":"raw-') || line.includes('"id":null')) {
          try { rawAnswers.push(JSON.parse(line)); } catch {}
        }
      }
      controller.enqueue(chunk);
    },
  }),
);
const stream = ndJsonStream(Writable.toWeb(agent.stdin), stdout);

let current = null; // what the running step collects
const asked = [];
const app = client({ name: "sandcrab-acp-test" })
  .onNotification("session/update", async ({ params }) => {
    if (current) {
      current.updates.push(params.update);
      if (current.cancelOn && params.update.sessionUpdate === current.cancelOn && !current.cancelSent) {
        current.cancelSent = true;
        await current.agent.notify("session/cancel", { sessionId: params.sessionId });
      }
    }
  })
  .onRequest("session/request_permission", async ({ params }) => {
    asked.push(params);
    const next = current?.answers?.shift();
    if (!next || next === "cancelled") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: next } };
  });
const connection = app.connect(stream);
const ctx = connection.agent;

const report = { steps: [] };
let lastSession = null;
try {
  report.initialize = await ctx.request("initialize", {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  for (const step of steps) {
    const out = { step, updates: [] };
    current = { updates: out.updates, answers: [...(step.answers ?? [])], cancelOn: step.cancel_on, agent: ctx };
    try {
      if (step.new) {
        out.result = await ctx.request("session/new", { cwd, mcpServers: [] });
        lastSession = out.result.sessionId;
      } else if (step.load) {
        const sessionId = step.load === "last" ? lastSession : step.load;
        out.result = await ctx.request("session/load", { sessionId, cwd, mcpServers: [] });
        lastSession = sessionId;
      } else if (step.list) {
        out.result = await ctx.request("session/list", { cwd });
      } else if (step.mode) {
        out.result = await ctx.request("session/set_mode", { sessionId: lastSession, modeId: step.mode });
      } else if (step.prompt) {
        out.result = await ctx.request("session/prompt", {
          sessionId: step.session ?? lastSession,
          prompt: [{ type: "text", text: step.prompt }],
        });
      } else if (step.raw) {
        agent.stdin.write(step.raw + "\n");
        await new Promise((r) => setTimeout(r, 300));
      }
    } catch (err) {
      out.error = { code: err.code, message: err.message };
    }
    out.asked = asked.splice(0);
    report.steps.push(out);
  }
} finally {
  current = null;
  report.raw = rawAnswers;
  connection.close();
  agent.stdin.end();
  const code = await new Promise((r) => agent.on("exit", (c) => r(c)));
  report.agentExit = code;
  console.log(JSON.stringify(report));
}

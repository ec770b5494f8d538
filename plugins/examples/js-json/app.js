// js-json: the JavaScript example plugin, built with componentize-js.
//
// Two tools, one per thing a plugin can do besides computing:
// - `json_keys` reads a file from the workspace (through fs.js, which uses
//   the WASI filesystem the plugin was granted);
// - `word_total` runs a program on the host (`wc`, through sandcrab's
//   `process` import; the operator must grant it).
//
// Build: npm install && npm run build (scripts/build-examples does it).
import { run } from 'sandcrab:plugin/process@0.2.0';
import { guestPath, readFile } from './fs.js';

const schema = (properties, required) =>
  JSON.stringify({ type: 'object', properties, required });

const TOOLS = [
  {
    name: 'json_keys',
    description: 'List the top-level keys of a JSON file in the workspace, with the type of each value.',
    parametersSchema: schema(
      { path: { type: 'string', description: 'The file, relative to the working directory' } },
      ['path'],
    ),
    writes: { tag: 'nothing' },
    background: false,
  },
  {
    name: 'word_total',
    description: "Count the words of a text with the host's `wc` program.",
    parametersSchema: schema({ text: { type: 'string' } }, ['text']),
    writes: { tag: 'nothing' },
    background: false,
  },
];

// A failed call: componentize-js turns a thrown { tag, val } into the
// `tool-error` variant the model reads.
const fail = (tag, message) => ({ tag, val: message });

function jsonKeys(args, context) {
  const path = guestPath(context, args.path);
  if (path === null) throw fail('denied', `${args.path} is outside the workspace`);
  let value;
  try {
    value = JSON.parse(new TextDecoder().decode(readFile(path)));
  } catch (e) {
    throw fail('invalid-arguments', `cannot read ${args.path} as JSON: ${e.message ?? e}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return `${args.path}: not a JSON object`;
  }
  const kind = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  return Object.entries(value).map(([k, v]) => `${k}: ${kind(v)}`).join('\n');
}

function wordTotal(args) {
  // Refused (the model reads why) unless the operator granted `wc`:
  // [policy.plugins.js-json] programs = ["wc"]
  let out;
  try {
    out = run({
      program: 'wc',
      args: ['-w'],
      cwd: undefined,
      env: [],
      stdin: new TextEncoder().encode(args.text),
      timeoutMs: 5000n,
    });
  } catch (e) {
    throw fail('denied', `cannot run wc: ${e.payload?.val ?? e.message ?? e}`);
  }
  if (out.exitCode !== 0) throw fail('failed', new TextDecoder().decode(out.stderr));
  return `${new TextDecoder().decode(out.stdout).trim()} words`;
}

const HANDLERS = { json_keys: jsonKeys, word_total: wordTotal };

export const tool = {
  tools() {
    return TOOLS;
  },
  call(name, argsJson, context) {
    const handler = HANDLERS[name];
    if (!handler) throw fail('invalid-arguments', `this plugin has no tool named ${name}`);
    return { text: handler(JSON.parse(argsJson), context), timedOut: false };
  },
};

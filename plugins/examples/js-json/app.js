// js-json: the JavaScript example plugin, built with componentize-js.
//
// Two tools, one per thing a plugin can do besides computing:
// - `json_keys` reads a file from the workspace (through fs.js, which uses
//   the WASI filesystem the plugin was granted);
// - `word_total` runs a program on the host (`wc`, through sandcrab's
//   `process` import; the operator must grant it);
// - `url_json_keys` fetches a JSON document with the standard `fetch`
//   (componentize-js runs it over wasi:http; the host lets the request out
//   only to an origin the manifest asks for and the operator grants, and
//   adds the operator's credential for it, if any, on the way out).
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
  {
    name: 'url_json_keys',
    description: 'Fetch a JSON document over HTTP and list its top-level keys, with the type of each value.',
    parametersSchema: schema({ url: { type: 'string', description: 'The document\'s URL' } }, ['url']),
    writes: { tag: 'nothing' },
    background: false,
  },
];

// A failed call: componentize-js turns a thrown { tag, val } into the
// `tool-error` variant the model reads.
const fail = (tag, message) => ({ tag, val: message });

// The top-level keys of a parsed JSON value, one `key: type` line each.
function keysOf(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return `${name}: not a JSON object`;
  }
  const kind = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  return Object.entries(value).map(([k, v]) => `${k}: ${kind(v)}`).join('\n');
}

function jsonKeys(args, context) {
  const path = guestPath(context, args.path);
  if (path === null) throw fail('denied', `${args.path} is outside the workspace`);
  let value;
  try {
    value = JSON.parse(new TextDecoder().decode(readFile(path)));
  } catch (e) {
    throw fail('invalid-arguments', `cannot read ${args.path} as JSON: ${e.message ?? e}`);
  }
  return keysOf(value, args.path);
}

async function urlJsonKeys(args) {
  let response;
  try {
    response = await fetch(args.url);
  } catch (e) {
    // A request the host refused lands here too; its receipt says why.
    throw fail('denied', `cannot fetch ${args.url}: ${e.message ?? e}`);
  }
  if (!response.ok) throw fail('failed', `${args.url} answered ${response.status}`);
  let value;
  try {
    value = JSON.parse(await response.text());
  } catch (e) {
    throw fail('failed', `${args.url} is not JSON: ${e.message ?? e}`);
  }
  return keysOf(value, args.url);
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

const HANDLERS = { json_keys: jsonKeys, word_total: wordTotal, url_json_keys: urlJsonKeys };

export const tool = {
  tools() {
    return TOOLS;
  },
  // Async: componentize-js runs the event loop until the promise settles,
  // so a handler may await `fetch`.
  async call(name, argsJson, context) {
    const handler = HANDLERS[name];
    if (!handler) throw fail('invalid-arguments', `this plugin has no tool named ${name}`);
    return { text: await handler(JSON.parse(argsJson), context), timedOut: false };
  },
};

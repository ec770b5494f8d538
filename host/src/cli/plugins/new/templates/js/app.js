// {{name}}: a sandcrab tool plugin in JavaScript, built with componentize-js.
//
// Build: npm install && npm run build
// Try it: sandcrab tool call {{tool}} --args '{"path": "README.md"}' --plugins .
import { guestPath, readFile } from './fs.js';

const SPEC = {
  name: '{{tool}}',
  description: 'Count the lines, words and bytes of a text file in the workspace.',
  parametersSchema: JSON.stringify({
    type: 'object',
    properties: {
      path: { type: 'string', description: 'File to count, relative to the working directory' },
    },
    required: ['path'],
  }),
  writes: { tag: 'nothing' },
  background: false,
  // How much of a call's output the model sees (undefined: the host's default).
  outputLimit: undefined,
};

// A failed call: componentize-js turns a thrown { tag, val } into the
// `tool-error` variant the model reads.
function fail(tag, message) {
  return { tag, val: message };
}

export const tool = {
  tools() {
    return [SPEC];
  },
  call(name, argsJson, context) {
    if (name !== SPEC.name) throw fail('invalid-arguments', `this plugin has no tool named ${name}`);
    const args = JSON.parse(argsJson);
    const path = guestPath(context, args.path);
    if (path === null) throw fail('denied', `${args.path} is outside the workspace`);
    let bytes;
    try {
      bytes = readFile(path);
    } catch (e) {
      throw fail('invalid-arguments', `cannot read ${args.path}: ${e.message ?? e}`);
    }
    const text = new TextDecoder().decode(bytes);
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    const words = text.split(/\s+/).filter((w) => w.length > 0).length;
    return { text: `${args.path}: ${lines} lines, ${words} words, ${bytes.length} bytes`, timedOut: false };
  },
};

// To run a program, request it in plugin.toml (programs = ["git"]), have the
// operator grant it, then:
//   import { run } from 'sandcrab:plugin/process@{{abi}}';
//   const out = run({ program: 'git', args: ['status'], cwd: undefined, env: [],
//                     stdin: undefined, timeoutMs: undefined });

// Files for a sandcrab plugin in JavaScript: componentize-js has no `fs`
// module, so this opens files through the WASI filesystem the plugin's
// world imports (wit/world.wit). Every directory the plugin was granted is
// a preopen: the workspace at `/workspace`, other paths at their own
// absolute path.
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

// The model's path (relative, or absolute on the host: the model sees host
// paths) as this plugin sees it; null when it leads outside the workspace.
export function guestPath(context, path) {
  const hostRoot = context.hostWorkspaceRoot.replace(/\/+$/, '');
  if (path === hostRoot || path.startsWith(hostRoot + '/')) {
    path = context.workspaceRoot + path.slice(hostRoot.length);
  } else if (!path.startsWith('/')) {
    path = context.workingDir + '/' + path;
  }
  const parts = [];
  for (const part of path.split('/')) {
    if (part === '..') parts.pop();
    else if (part !== '' && part !== '.') parts.push(part);
  }
  const normal = '/' + parts.join('/');
  const root = context.workspaceRoot.replace(/\/+$/, '');
  return normal === root || normal.startsWith(root + '/') ? normal : null;
}

// The preopen holding `path` and the path relative to it.
function locate(path) {
  let best = null;
  for (const [dir, root] of getDirectories()) {
    const base = root.replace(/\/+$/, '');
    const inside = path === base || path.startsWith(base + '/');
    if (inside && (best === null || base.length > best.base.length)) {
      best = { dir, base };
    }
  }
  if (best === null) throw new Error(`${path} is not inside a directory granted to this plugin`);
  const rest = path.slice(best.base.length).replace(/^\/+/, '');
  return { dir: best.dir, rest: rest === '' ? '.' : rest };
}

// The bytes of the file at the guest path `path`.
export function readFile(path) {
  const { dir, rest } = locate(path);
  const file = dir.openAt({ symlinkFollow: true }, rest, {}, { read: true });
  const chunks = [];
  let offset = 0n;
  for (;;) {
    const [bytes, end] = file.read(65536n, offset);
    chunks.push(bytes);
    offset += BigInt(bytes.length);
    if (end || bytes.length === 0) break;
  }
  const out = new Uint8Array(Number(offset));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

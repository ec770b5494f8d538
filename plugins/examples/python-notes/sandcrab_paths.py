"""Map the paths a model gives to the paths a plugin sees.

The model (and the programs it runs) name host paths, or paths relative to
where the agent works; the plugin sees the workspace at
`context.workspace_root` (a WASI preopen such as /workspace). The sandbox
refuses anything outside it either way; this gives the model a clear
message instead of a failed open.
"""
import posixpath


def guest_path(context, path):
    """`path` as this plugin sees it, or None when it leads outside the
    workspace."""
    host_root = context.host_workspace_root.rstrip("/")
    if path == host_root or path.startswith(host_root + "/"):
        path = context.workspace_root + path[len(host_root):]
    elif not path.startswith("/"):
        path = posixpath.join(context.working_dir, path)
    path = posixpath.normpath(path)
    root = context.workspace_root.rstrip("/")
    return path if path == root or path.startswith(root + "/") else None

//! The OpenAPI 3.1 document of the bridge (`GET /openapi.json`), built from
//! one table of operations; an end-to-end test calls every operation it
//! lists against the real router, so the two cannot drift apart.

use serde_json::{Value, json};

/// One operation: method, path, summary, request body schema (if any),
/// success status and response schema.
struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    body: Option<fn() -> Value>,
    status: &'static str,
    response: fn() -> Value,
}

fn ok_body() -> Value {
    json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
}

fn status_body() -> Value {
    json!({
        "type": "object",
        "properties": {
            "lifecycle": {"oneOf": [
                {"type": "string", "enum": ["Stopped", "Starting", "Running", "Suspended"]},
                {"type": "object", "properties": {"Error": {"type": "string"}}, "required": ["Error"]}
            ]},
            "is_streaming": {"type": "boolean"}
        },
        "required": ["lifecycle", "is_streaming"]
    })
}

fn turns_body() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"},
        "timestamp": {"type": "string", "format": "date-time"},
        "kind": {"type": "string", "enum": ["user", "assistant", "tool_results", "steering", "system"]}
    }, "required": ["id", "timestamp", "kind"]}})
}

fn permissions_body() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"},
        "session_id": {"type": "string"},
        "call_id": {"type": "string"},
        "tool": {"type": "string"},
        "arguments": {},
        "from": {"type": "string", "description": "agent, or subagent ID"},
        "preview": {"type": "string"},
        "diff": {"type": ["string", "null"], "description": "for a file edit, the unified diff it would apply"},
        "sandbox": {"type": "string"},
        "reason": {"type": "string"},
        "scopes": {"type": "array", "items": {"type": "object", "properties": {
            "scope": {"type": "string", "enum": ["once", "session", "workspace"]},
            "allows": {"type": "string"},
            "rule": {"type": ["string", "null"], "description": "the rule a wider yes adds, as an --approve value"}
        }}},
        "form": {"type": "object", "description": "present when this is not a call but an MCP server's question (elicitation): a yes accepts it with `content`, completed with the fields' defaults", "properties": {
            "asker": {"type": "string"},
            "message": {"type": "string"},
            "fields": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "kind": {"type": "object", "description": "{\"type\": \"string\"|\"integer\"|\"number\"|\"boolean\"|\"choice\", \"values\": [choices]}"},
                "required": {"type": "boolean"},
                "default": {}
            }}}
        }}
    }, "required": ["id", "tool", "arguments", "preview", "sandbox", "scopes"]}})
}

const OPERATIONS: &[Op] = &[
    Op {
        method: "post",
        path: "/workspace/initialize",
        summary: "Open a workspace (stops an agent running in another one)",
        body: Some(
            || json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}),
        ),
        status: "200",
        response: || json!({"type": "object", "properties": {"ok": {"type": "boolean"}, "workspace": {"type": "string"}}}),
    },
    Op {
        method: "post",
        path: "/agent/start",
        summary: "Start the agent (409 already_running; a stub provider when no key is set)",
        body: None,
        status: "200",
        response: ok_body,
    },
    Op {
        method: "post",
        path: "/agent/stop",
        summary: "Stop the agent (no-op when stopped)",
        body: None,
        status: "200",
        response: ok_body,
    },
    Op {
        method: "post",
        path: "/agent/messages",
        summary: "Send a message; returns at once, results arrive on /events (409 not_running)",
        body: Some(
            || json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}),
        ),
        status: "202",
        response: ok_body,
    },
    Op {
        method: "post",
        path: "/agent/interrupt",
        summary: "Interrupt the turn in flight (no-op when idle)",
        body: None,
        status: "200",
        response: ok_body,
    },
    Op {
        method: "get",
        path: "/agent/status",
        summary: "Lifecycle and whether a turn is streaming",
        body: None,
        status: "200",
        response: status_body,
    },
    Op {
        method: "post",
        path: "/agent/clear",
        summary: "Start a new conversation (the old one stays in `sandcrab sessions`)",
        body: None,
        status: "200",
        response: ok_body,
    },
    Op {
        method: "get",
        path: "/agent/history",
        summary: "The stored turns of the current conversation",
        body: None,
        status: "200",
        response: turns_body,
    },
    Op {
        method: "get",
        path: "/agent/permissions",
        summary: "Calls waiting for the operator's approval, oldest first (each also announced as agent:permission-required)",
        body: None,
        status: "200",
        response: permissions_body,
    },
    Op {
        method: "post",
        path: "/agent/permissions/{id}",
        summary: "Answer a waiting call: allow or deny, for this call (`once`) or for what the request's `session` scope names; a note is shown to the model with a denial. For a form (an MCP server's question), allow accepts it with `content`, the fields' defaults filling the rest, and deny declines it; 400 answer_does_not_fit names the field that does not fit (the request still waits). 404 unknown_permission when it is no longer waiting (answered, timed out, withdrawn)",
        body: Some(|| {
            json!({"type": "object", "properties": {
                "decision": {"type": "string", "enum": ["allow", "deny"]},
                "scope": {"type": "string", "enum": ["once", "session", "workspace"], "default": "once"},
                "note": {"type": "string", "maxLength": 2000},
                "content": {"type": "object", "description": "for a form: the values of its fields by name"}
            }, "required": ["decision"], "additionalProperties": false})
        }),
        status: "200",
        response: ok_body,
    },
    Op {
        method: "get",
        path: "/events",
        summary: "Server-Sent Events (agent:status-changed, agent:message-chunk, agent:session-started, agent:session-completed, agent:session-interrupted, agent:tool-call, agent:error, agent:permission-required, agent:permission-resolved, job and compaction events); send Last-Event-ID to resume",
        body: None,
        status: "200",
        response: || json!({"type": "string", "description": "text/event-stream"}),
    },
    Op {
        method: "get",
        path: "/bridge/proof",
        summary: "Proof that this server holds the token, for ?challenge= (64 hex digits): a keyed BLAKE3 hash of the challenge and of the address the client reached (see sandcrab's server::token::proof); the one route that needs no token. Clients check it before they send the token",
        body: None,
        status: "200",
        response: || json!({"type": "object", "properties": {"proof": {"type": "string"}}, "required": ["proof"]}),
    },
    Op {
        method: "get",
        path: "/openapi.json",
        summary: "This document",
        body: None,
        status: "200",
        response: || json!({"type": "object"}),
    },
];

/// The document.
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for op in OPERATIONS {
        let mut operation = json!({
            "summary": op.summary,
            "operationId": format!("{}{}", op.method, op.path.replace(['/', '.'], "_")),
            "security": [{"bearer": []}],
            "responses": {
                op.status: {"description": "success", "content": {"application/json": {"schema": (op.response)()}}},
                "default": {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }
        });
        if let Some(body) = op.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body()}}});
        }
        let entry = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "sandcrab bridge", "version": env!("CARGO_PKG_VERSION")},
        "servers": [{"url": "http://127.0.0.1:9990"}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                "code": {"type": "string"}, "message": {"type": "string"}
            }, "required": ["code", "message"]}}, "required": ["error"]}}
        }
    })
}

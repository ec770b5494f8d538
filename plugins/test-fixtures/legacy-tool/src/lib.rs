//! Test fixture: a tool plugin built against the frozen 0.1.0 ABI. `where`
//! reports the call context it received; `pwd` runs `pwd` through the 0.1.0
//! `process` import with no working directory given.

wit_bindgen::generate!({
    path: "../../../wit/since_v0.1.0",
    world: "tool-plugin",
});

use exports::sandcrab::plugin::tool::Guest;
use sandcrab::plugin::process::{Command, run};
use sandcrab::plugin::types::{CallContext, ToolError, ToolSpec};

struct Legacy;

impl Guest for Legacy {
    fn tools() -> Vec<ToolSpec> {
        let schema = r#"{"type":"object","properties":{}}"#.to_string();
        vec![
            ToolSpec {
                name: "where".into(),
                description: "Report the call context".into(),
                parameters_schema: schema.clone(),
            },
            ToolSpec {
                name: "pwd".into(),
                description: "Run pwd".into(),
                parameters_schema: schema,
            },
        ]
    }

    fn call(name: String, _args: String, ctx: CallContext) -> Result<String, ToolError> {
        match name.as_str() {
            "where" => Ok(format!(
                "root={} host={} session={} call={}",
                ctx.workspace_root, ctx.host_workspace_root, ctx.session_id, ctx.call_id
            )),
            "pwd" => {
                let out = run(&Command {
                    program: "sh".into(),
                    args: vec!["-c".into(), "pwd".into()],
                    cwd: None,
                    env: Vec::new(),
                    stdin: None,
                    timeout_ms: None,
                })
                .map_err(|e| ToolError::Failed(format!("{e:?}")))?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            }
            other => Err(ToolError::InvalidArguments(format!("no tool {other}"))),
        }
    }
}

export!(Legacy);

//! `sandcrab acp`: serve the Agent Client Protocol on stdio for an editor
//! (see [`crate::acp`]). Each workspace the editor opens gets an agent
//! built as `chat` builds one — the same configuration, trust rules,
//! plugins, store and approvals — with the editor as the operator.

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use super::agent_cmd::AgentArgs;
use crate::agent::AgentKit;
use crate::approvals::PermissionQueue;

/// Builds a kit per workspace from the command's flags.
struct FromFlags {
    args: AgentArgs,
    /// Each kit's plugin host and settings, alive as long as the kit.
    setups: Mutex<Vec<super::setup::Setup>>,
}

#[async_trait::async_trait]
impl crate::acp::Kits for FromFlags {
    async fn kit(
        &self,
        workspace: &Path,
        queue: Arc<PermissionQueue>,
    ) -> anyhow::Result<Arc<AgentKit>> {
        let mut args = self.args.clone();
        args.host.workspace = Some(workspace.to_path_buf());
        args.default_approvals = super::agent_cmd::ASKING_DEFAULT;
        let (setup, mut kit) = args.kit_with(false, false).await?;
        // The editor answers what the approval rules ask.
        kit.ask_through(queue);
        for warning in setup.warnings.iter().chain(&kit.warnings) {
            errln!("sandcrab acp: {}", super::terminal::sanitize(warning));
        }
        if let Ok(mut setups) = self.setups.lock() {
            setups.push(setup);
        }
        Ok(Arc::new(kit))
    }
}

/// Serve ACP on stdin/stdout until the editor closes stdin. Logs and
/// warnings go to stderr: stdout carries the protocol only.
pub async fn run(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let kits = Box::new(FromFlags {
        args,
        setups: Mutex::new(Vec::new()),
    });
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    crate::acp::serve(input, tokio::io::stdout(), kits).await?;
    Ok(ExitCode::SUCCESS)
}

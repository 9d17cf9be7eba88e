//! `postonce mcp` (feature `mcp`, in the default build, not in the Lambda build): the Model
//! Context Protocol server over stdio ([`crate::triggers::mcp`]).

use std::sync::Arc;

use crate::app::App;
use crate::config::Config;

use super::bad_input;

/// An agent's covers: only beneath POSTONCE_MCP_IMAGE_DIRS, at every read of the process.
///
/// # Errors
/// The exit code when the folders cannot be resolved.
pub(super) fn prepare(config: &mut Config) -> Result<(), i32> {
    if let Err(e) = config.resolve_mcp_covers() {
        return Err(bad_input(format!("configuration: {e}")));
    }
    config.local_covers = config.mcp_covers.clone();
    Ok(())
}

pub(super) async fn run(app: Arc<App>) -> i32 {
    match crate::triggers::mcp::serve(app).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("postonce: {e}");
            1
        }
    }
}

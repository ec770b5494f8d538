//! Remote MCP servers that need sign-in: `sandcrab mcp login NAME` runs
//! the OAuth flow ([`flow`]) and keeps the tokens ([`store`]); every
//! connection to that server then sends them (refreshed when they
//! expire) and nothing else does.

mod discovery;
mod flow;
mod step_up;
mod store;

pub use discovery::metadata;
pub use flow::{CALLBACK_TIMEOUT, CLIENT_NAME, SignInError, sign_in};
pub use step_up::{ask_for_more, needed_scopes};
pub use store::{BadServerName, FOLDER, SignIn, SignInStore};

/// The sign-in store of server `name` at `url` in the user's data folder
/// (None: no data folder, or a name that cannot name a file).
pub fn store_of(name: &str, url: &str) -> Option<SignInStore> {
    let data = crate::user_files::data_dir()?;
    SignInStore::new(&data, name, url).ok()
}

//! `sandcrab acp`: sandcrab as an Agent Client Protocol (v1) agent on
//! stdio, for editors (Zed, JetBrains, Neovim, Emacs). The editor drives
//! sessions; sandcrab keeps the sandbox: every tool runs through its own
//! plugins and confinement (never the editor's terminal or file writes),
//! every call the approval rules ask about is put to the editor as
//! `session/request_permission` and answered into the call's receipt
//! (channel `acp`), and sessions live in the same store as the terminal's,
//! so one moves between `chat` and the editor with its history.
//!
//! - [`wire`]: JSON-RPC lines, bounded, one writer;
//! - [`updates`]: session events and stored history as `session/update`s;
//! - [`permission`]: the approval question and its answer;
//! - [`commands`]: the slash commands an editor offers;
//! - [`agent`]: the read loop and the methods; `driven`: the sessions;
//!   `asking`: the questions put to the editor.

pub mod agent;
mod asking;
pub mod commands;
mod driven;
pub mod permission;
pub mod updates;
pub mod wire;

pub use agent::{Kits, serve};

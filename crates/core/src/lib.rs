//! sandcrab's vocabulary: plain data that more than one floor of the host
//! speaks, with no behaviour beyond reading, writing and rendering it. It
//! depends on serde alone, so anything may use it without building the
//! plugin runtime.

pub mod approval;
pub mod spelling;
pub mod terminal_safe;
pub mod time;
pub mod user_files;

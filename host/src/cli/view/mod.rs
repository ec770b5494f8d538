//! How sandcrab draws on a terminal: styled text that only sandcrab can
//! style ([`style`]), the assistant's Markdown ([`markdown`]) with code
//! highlighting, file changes as coloured diffs ([`diff_view`]) and the
//! live output of running programs ([`live_area`]). Pure: these build
//! text; the command line writes it.

pub mod diff_view;
mod highlight;
pub mod live_area;
pub mod markdown;
pub mod recap;
pub mod style;

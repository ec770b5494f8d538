//! Why an agent could not be put together.

use super::profile::ProfileError;

/// Why an agent could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("{0}")]
    Config(String),
}

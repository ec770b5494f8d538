//! Which store to open: a SQLite file (the default) or a PostgreSQL
//! database (`[store] url`), as the trusted configuration says or as a
//! command line names one (`sqlite:PATH`, `postgres://…`).

use std::path::PathBuf;
use std::sync::Arc;

use super::{PgSettings, PgStore, SqliteStore, Store, StoreError, StoreOptions};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    Postgres(PgSettings),
}

impl StoreLocation {
    /// `sqlite:PATH`, a plain path, or `postgres://…` / `postgresql://…`
    /// (its password, if any, from `PGPASSWORD`, as libpq does).
    pub fn parse(text: &str) -> Result<StoreLocation, String> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(PgSettings {
                url: text.to_string(),
                password_env: std::env::var_os("PGPASSWORD").map(|_| "PGPASSWORD".to_string()),
                ..PgSettings::default()
            }));
        }
        let path = text.strip_prefix("sqlite:").unwrap_or(text);
        if path.is_empty() || text.contains("://") {
            return Err(format!(
                "'{}' names no store: write sqlite:PATH or postgres://USER@HOST:PORT/DATABASE",
                without_credentials(text)
            ));
        }
        Ok(StoreLocation::Sqlite(PathBuf::from(path)))
    }

    /// Open it (creating and migrating as needed).
    pub fn open(
        &self,
        options: &StoreOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self {
            StoreLocation::Sqlite(path) => Arc::new(SqliteStore::open_with(path, options)?),
            StoreLocation::Postgres(settings) => Arc::new(PgStore::open(settings, options, env)?),
        })
    }
}

/// Open the store at `location` with the process's environment.
pub fn open(
    location: &StoreLocation,
    options: &StoreOptions,
) -> Result<Arc<dyn Store>, StoreError> {
    location.open(options, &|var| std::env::var(var).ok())
}

/// `text` with the user and password of a URL replaced by `…` (for
/// messages about something that may be a mistyped URL).
pub fn without_credentials(text: &str) -> String {
    match text.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/').map_or(rest, |(a, _)| a).rfind('@') {
            Some(at) => format!("{scheme}://…{}", &rest[at..]),
            None => text.to_string(),
        },
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_read_from_their_spelling() {
        assert_eq!(
            StoreLocation::parse("sqlite:/tmp/x.db").unwrap(),
            StoreLocation::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            StoreLocation::parse("rel/x.db").unwrap(),
            StoreLocation::Sqlite("rel/x.db".into())
        );
        assert!(matches!(
            StoreLocation::parse("postgresql://u@h/d").unwrap(),
            StoreLocation::Postgres(_)
        ));
        let err = StoreLocation::parse("mysql://u@h/d").unwrap_err();
        assert!(err.contains("sqlite:PATH or postgres://"), "{err}");
    }

    #[test]
    fn credentials_never_reach_a_message() {
        for (typed, shown) in [
            ("Postgres://app:s3cret@db/x", "Postgres://…@db/x"),
            (
                "postgre://app:s3cret@db:5432/x?sslmode=require",
                "postgre://…@db:5432/x?sslmode=require",
            ),
            ("mysql://db/x", "mysql://db/x"),
            ("/a/b", "/a/b"),
        ] {
            assert_eq!(without_credentials(typed), shown);
        }
        let err = StoreLocation::parse("Postgres://app:s3cret@db/x").unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
    }
}

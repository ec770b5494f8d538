//! `sandcrab store migrate|copy`: bring a store's schema up to date, and
//! move a history from one store to another.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::Config;
use crate::store::StoreLocation;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Apply the migrations a store lacks (SQLite or PostgreSQL) and say
    /// which version it is at. Every command that opens a store does this
    /// too; run it first when hosts of several versions share one.
    Migrate {
        /// The store (`sqlite:PATH` or `postgres://…`; default: the one
        /// the configuration names).
        #[arg(long, value_name = "STORE")]
        url: Option<String>,
        /// Configuration file (default: ~/.config/sandcrab/config.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Copy every session of one store into another (turns, recordings,
    /// hash chains, summaries), each verified first; sessions the
    /// destination has are left alone, so it can be run again.
    Copy {
        /// Where from: `sqlite:PATH` or `postgres://…`.
        #[arg(long, value_name = "STORE")]
        from: String,
        /// Where to (its password from PGPASSWORD, or use --config's
        /// `[store]` by naming the same URL).
        #[arg(long, value_name = "STORE")]
        to: String,
        /// Configuration file whose `[store]` gives the password settings
        /// of a PostgreSQL store with the same URL.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

pub fn run(cmd: StoreCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        StoreCommand::Migrate { url, config } => {
            let config = load(config.as_deref())?;
            let location = locate(url.as_deref(), &config)?;
            let new = matches!(&location, StoreLocation::Sqlite(path) if !path.exists());
            let store = crate::store::open(&location, &config.store.options())?;
            let (place, version) = store.describe();
            if new {
                outln!("{place}: created, schema at version {version}");
            } else {
                outln!("{place}: schema at version {version} (up to date)");
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Copy { from, to, config } => {
            let config = load(config.as_deref())?;
            let (from, to) = (locate(Some(&from), &config)?, locate(Some(&to), &config)?);
            // A mistyped source must not become a new, empty store.
            if let StoreLocation::Sqlite(path) = &from
                && !path.exists()
            {
                anyhow::bail!(
                    "--from {}: no such store (a SQLite file that exists, `sqlite:PATH`, or `postgres://…`)",
                    path.display()
                );
            }
            if from == to {
                anyhow::bail!("--from and --to name the same store");
            }
            let options = config.store.options();
            let source = crate::store::open(&from, &options)?;
            let destination = crate::store::open(&to, &options)?;
            let started = std::time::Instant::now();
            let report = crate::store::copy::copy(
                source.as_ref(),
                destination.as_ref(),
                &mut |id, what| errln!("{id}: {what}"),
            )?;
            outln!(
                "{} sessions copied to {}, {} already there, {} refused ({:.1} s)",
                report.copied.len(),
                destination.describe().0,
                report.present.len(),
                report.refused.len(),
                started.elapsed().as_secs_f64()
            );
            for (id, why) in &report.refused {
                errln!("{id}: not copied: {why}");
            }
            Ok(if report.refused.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn load(file: Option<&std::path::Path>) -> anyhow::Result<Config> {
    let dir = std::env::current_dir()?;
    Ok(Config::load(&dir, file)?.config)
}

/// The store `text` names (a PostgreSQL URL equal to the configuration's
/// takes its password settings), else the configuration's.
fn locate(text: Option<&str>, config: &Config) -> anyhow::Result<StoreLocation> {
    let configured = config.store.location().map_err(anyhow::Error::msg)?;
    let Some(text) = text else {
        return configured.ok_or_else(|| {
            anyhow::anyhow!("no data directory (set HOME or XDG_DATA_HOME, or [store] path)")
        });
    };
    let named = StoreLocation::parse(text).map_err(anyhow::Error::msg)?;
    Ok(match (named, configured) {
        (StoreLocation::Postgres(n), Some(StoreLocation::Postgres(c))) if n.url == c.url => {
            StoreLocation::Postgres(c)
        }
        (named, _) => named,
    })
}

//! `shard_probe` through `sandcrab:shards`: each shard reports which part
//! it is and returns its pieces out of order; a shard named in the
//! arguments fails, traps, spins or reads a path, so the tests can watch
//! the host order, merge and contain them.

use serde::Deserialize;

mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/shards/since_v0.1.0",
        world: "sharded-tool-plugin",
    });
}

use bindings::exports::sandcrab::shards::sharded_tool as wit;

#[derive(Deserialize, Default)]
pub struct ShardArgs {
    /// Pieces each shard returns.
    #[serde(default)]
    pub pieces: u64,
    /// The shard that reports a tool failure.
    pub fail: Option<u32>,
    /// The shard that traps.
    pub trap: Option<u32>,
    /// The shard that never ends.
    pub spin: Option<u32>,
    /// A path every shard tries to read (its outcome becomes a piece).
    pub read: Option<String>,
    /// How long every shard sleeps first, in milliseconds.
    pub sleep_ms: Option<u64>,
}

struct Sharded;

impl wit::Guest for Sharded {
    fn shardable() -> Vec<String> {
        vec!["shard_probe".into()]
    }

    fn call_shard(
        _name: String,
        args_json: String,
        _context: wit::CallContext,
        shard: wit::Shard,
    ) -> Result<wit::ShardOutput, wit::ToolError> {
        let args: ShardArgs = serde_json::from_str(&args_json)
            .map_err(|e| wit::ToolError::InvalidArguments(e.to_string()))?;
        if let Some(ms) = args.sleep_ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let me = Some(shard.index);
        if args.fail == me {
            return Err(wit::ToolError::Failed(format!(
                "shard {} refused",
                shard.index
            )));
        }
        if args.trap == me {
            panic!("shard {} traps", shard.index);
        }
        if args.spin == me {
            #[allow(clippy::empty_loop)]
            loop {}
        }
        // Piece k of this shard belongs at place k * count + index;
        // returned last first.
        let mut pieces: Vec<wit::Piece> = (0..args.pieces)
            .rev()
            .map(|k| wit::Piece {
                major: k * u64::from(shard.count) + u64::from(shard.index),
                minor: 0,
                text: format!("shard {}/{} piece {k}", shard.index, shard.count),
            })
            .collect();
        if let Some(path) = &args.read {
            let outcome = match std::fs::read_to_string(path) {
                Ok(text) => format!("read {path}: {text}"),
                Err(e) => format!("cannot read {path}: {e}"),
            };
            pieces.push(wit::Piece {
                major: u64::MAX,
                minor: u64::from(shard.index),
                text: outcome,
            });
        }
        Ok(wit::ShardOutput {
            pieces,
            stopped_early: shard.index == 0,
        })
    }

    fn merge(
        _name: String,
        _args_json: String,
        _context: wit::CallContext,
        pieces: Vec<wit::Piece>,
        stopped_early: bool,
    ) -> Result<wit::MergedOutput, wit::ToolError> {
        let mut text = format!(
            "merged {} pieces, stopped early {stopped_early}\n",
            pieces.len()
        );
        for piece in pieces {
            text.push_str(&piece.text);
            text.push('\n');
        }
        Ok(wit::MergedOutput {
            text,
            timed_out: false,
        })
    }
}

bindings::export!(Sharded with_types_in bindings);

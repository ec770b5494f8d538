#!/usr/bin/env bash
# Whole-process start-up of `sandcrab tool call read_file`, as a new user
# meets it: with an empty component cache (a new machine, a CI job, an
# ephemeral container) against a warm one, and the same cold start when the
# built-in plugins must be compiled (what every first start cost before
# their code was embedded in the binary; forced here with
# `plugin_debug_info = true`, which the embedded code was not built with).
#
# Paired runs, medians: hyperfine (`apt-get install hyperfine`).
# Run: host/benches/startup.sh [RUNS]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-20}
command -v hyperfine >/dev/null || { echo "needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
cargo build --release -q -p sandcrab
bin=$PWD/target/release/sandcrab
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/ws" "$scratch/home/.config/sandcrab" "$scratch/compiling/sandcrab"
seq 1 200 | sed 's/^/line /' > "$scratch/ws/a.txt"
echo 'plugin_debug_info = true' > "$scratch/compiling/sandcrab/config.toml"
call="$bin tool call read_file --args '{\"file_path\":\"a.txt\"}' -w $scratch/ws"
export HOME=$scratch/home XDG_CONFIG_HOME=$scratch/home/.config
hyperfine --runs "$runs" --warmup 2 --export-markdown "$scratch/table.md" \
  --command-name "empty cache" --prepare "rm -rf $scratch/cold" \
  "env XDG_CACHE_HOME=$scratch/cold $call" \
  --command-name "warm cache" --prepare "true" \
  "env XDG_CACHE_HOME=$scratch/warm $call" \
  --command-name "empty cache, compiling (plugin_debug_info)" --prepare "rm -rf $scratch/cold2" \
  "env XDG_CACHE_HOME=$scratch/cold2 XDG_CONFIG_HOME=$scratch/compiling $call"
cat "$scratch/table.md"

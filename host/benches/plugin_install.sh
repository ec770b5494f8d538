#!/usr/bin/env bash
# What `sandcrab plugins install oci://…` costs for the three example
# plugins (Rust, Python, JavaScript), from a real registry on loopback
# (Debian's docker-registry): with an empty component cache (a new
# machine: the install compiles the component once, for its check and for
# the first load) and with a warm one (a reinstall). The peer in the same
# run is `skopeo copy` pulling the same artifact into an OCI layout: the
# transfer alone, with no signature check, no grant and no compile.
#
# Paired runs, medians: hyperfine (`apt-get install hyperfine`); needs
# docker-registry, skopeo and ssh-keygen (scripts/setup-registry) and the
# examples built (scripts/build-examples).
# Run: host/benches/plugin_install.sh [RUNS]   (builds the release binary)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
for tool in hyperfine docker-registry skopeo ssh-keygen; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
cargo build --release -q -p sandcrab
bin=$PWD/target/release/sandcrab
scratch=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$scratch/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $scratch/registry}}
http: {addr: 127.0.0.1:$port}
YML
docker-registry serve "$scratch/registry.yml" >/dev/null 2>&1 &
registry=$!
trap 'kill $registry; rm -rf "$scratch"' EXIT
until curl -sf "http://127.0.0.1:$port/v2/" >/dev/null; do sleep 0.1; done

export HOME=$scratch/home XDG_CONFIG_HOME=$scratch/home/.config XDG_DATA_HOME=$scratch/home/data XDG_CACHE_HOME=$scratch/cache
mkdir -p "$XDG_CONFIG_HOME/sandcrab" "$scratch/src"
ssh-keygen -q -t ed25519 -N "" -C bench -f "$scratch/key"
config="$XDG_CONFIG_HOME/sandcrab/config.toml"
printf '[trust.signers.bench]\nkey = "%s"\nplugins = ["*"]\n' "$(cat "$scratch/key.pub")" > "$config.base"

# The three examples as plugin folders, signed and published.
mkdir -p "$scratch/src/hello-tool"
cp plugins/examples/hello-tool/plugin.toml "$scratch/src/hello-tool/"
cp target/wasm-plugins/wasm32-wasip2/release/hello_tool.wasm "$scratch/src/hello-tool/"
cp -r target/examples/python-notes target/examples/js-json "$scratch/src/"
commands=()
for name in hello-tool python-notes js-json; do
  dir=$scratch/src/$name
  "$bin" plugins statement "$dir" | ssh-keygen -Y sign -f "$scratch/key" -n sandcrab-plugin > "$dir/plugin.sig" 2>/dev/null
  ref=oci://127.0.0.1:$port/bench/$name:1
  "$bin" plugins publish "$dir" "$ref" >/dev/null
  size=$(du -k "$dir"/*.wasm | cut -f1)
  install="cp $config.base $config && $bin plugins install $ref --yes >/dev/null"
  commands+=(--command-name "$name (${size} KiB): install, empty cache"
             --prepare "rm -rf $XDG_DATA_HOME $XDG_CACHE_HOME" "$install")
  commands+=(--command-name "$name: install, warm cache"
             --prepare "rm -rf $XDG_DATA_HOME" "$install")
  commands+=(--command-name "$name: skopeo copy (peer: transfer only)"
             --prepare "rm -rf $scratch/pulled"
             "skopeo copy -q --src-tls-verify=false --insecure-policy docker://127.0.0.1:$port/bench/$name:1 oci:$scratch/pulled:1")
done
hyperfine --runs "$runs" --warmup 1 --export-markdown "$scratch/table.md" "${commands[@]}"
cat "$scratch/table.md"

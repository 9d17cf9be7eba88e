#!/usr/bin/env bash
# Where a cold run's instructions go (issue 34): one full new-key dry run
# (`postonce post … --image <loopback URL> --json`, the cold run of bench/run.sh) under
# `valgrind --tool=callgrind`, against a redis-server started here, a DynamoDB at
# $DYNAMODB_ENDPOINT (default http://127.0.0.1:18000, not started here) and examples/cover.png
# served on loopback. Instruction counts do not depend on the machine's load. Prints the whole
# run's instructions, the cover check's (inclusive: `postonce::image::as_is`, the walk of an
# original that fits, and `decode::decode`, the strict decode), the system's root certificates'
# load (none since the SDK's requests went on postonce's own client: they were two thirds of a
# cold run), the peak RSS of the same run outside valgrind (`/usr/bin/time`), and keeps the callgrind file for
# `callgrind_annotate --inclusive=yes FILE`.
#
# Usage: bench/callgrind.sh [BINARY]   (default $CARGO_TARGET_DIR/release/postonce; build it with
#   CARGO_PROFILE_RELEASE_STRIP=none so that the functions keep their names)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${1:-${CARGO_TARGET_DIR:-$HOME/.cache/postonce/target}/release/postonce}
DYNAMODB_ENDPOINT=${DYNAMODB_ENDPOINT:-http://127.0.0.1:18000}
for tool in redis-server valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "callgrind.sh: $tool is missing" >&2; exit 1; }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
OUT=$(mktemp -d /tmp/postonce-callgrind.XXXXXX)
REDIS_PORT=$(free_port)
IMAGE_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" >/dev/null 2>&1 &
REDIS_PID=$!
python3 -m http.server "$IMAGE_PORT" --bind 127.0.0.1 --directory "$ROOT/examples" >/dev/null 2>&1 &
HTTP_PID=$!
trap 'kill $REDIS_PID $HTTP_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  (echo >/dev/tcp/127.0.0.1/"$REDIS_PORT") 2>/dev/null && (echo >/dev/tcp/127.0.0.1/"$IMAGE_PORT") 2>/dev/null && break
  sleep 0.1
done
TABLE=postonce-callgrind-$$
export POSTONCE_WEBHOOK_SECRET=callgrind-secret POSTONCE_TABLE=$TABLE \
  AWS_ENDPOINT_URL_DYNAMODB=$DYNAMODB_ENDPOINT AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
  REDIS_URL=redis://127.0.0.1:$REDIS_PORT/ POSTONCE_IMAGE_HOSTS=http://127.0.0.1:$IMAGE_PORT
"$BIN" table create >/dev/null
post() { # SLUG [RUNNER…]: one new-key dry run of BIN, under RUNNER if given
  local slug=$1
  shift
  "$@" "$BIN" post --kind bench --slug "$slug" --caption "Callgrind post $slug: one draft, posted exactly once." \
    --image "http://127.0.0.1:$IMAGE_PORT/cover.png" --link https://example.com/posts/bench --json
}
# A warm-up run outside valgrind (the table and the connections' first use), then the measured
# run, then the same run outside valgrind for its peak RSS.
post "warm-$$" >/dev/null
post "cg-$$" valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
  >"$OUT/run.json" 2>"$OUT/valgrind.log"
grep -q '"posted"' "$OUT/run.json" || { cat "$OUT/run.json" "$OUT/valgrind.log" >&2; exit 1; }
post "rss-$$" /usr/bin/time -f '%M' -o "$OUT/rss" >/dev/null
callgrind_annotate --inclusive=yes --threshold=100 "$OUT/callgrind.out" >"$OUT/inclusive.txt"
total=$(grep -m1 -E 'PROGRAM TOTALS' "$OUT/inclusive.txt" | awk '{print $1}')
echo "whole cold run (exec → a full new-key dry run → exit): $total instructions"
echo "the cover check (inclusive; as_is: the walk of an original that fits, decode: the strict decode):"
grep -E 'postonce::image::(as_is|cover_blocking|decode::decode|structure::)' "$OUT/inclusive.txt" | sed 's/^/  /' || echo "  (no cover check symbol: inlined?)"
echo "start-up: loading the system's root certificates (rustls_native_certs::CertPaths::load, inclusive):"
grep -m1 -E 'rustls_native_certs::CertPaths::load' "$OUT/inclusive.txt" | sed 's/^/  /' ||
  echo "  (none: every client here trusts the Mozilla roots compiled in; src/aws_http.rs)"
echo "peak RSS of the same run outside valgrind: $(cat "$OUT/rss") KB"
echo "callgrind file: $OUT/callgrind.out (callgrind_annotate --inclusive=yes $OUT/callgrind.out)"

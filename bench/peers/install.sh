#!/usr/bin/env bash
# Installs one of the benchmark's peers on first use (bench.py --peers calls it):
#   install.sh powertools   python3 -m venv .venv + pip install -r requirements.txt (pinned)
#   install.sh node         npm ci (package-lock.json)
# Exits non-zero, saying what failed, when it cannot (no network, no npm, …).
set -uo pipefail
cd "$(dirname "$0")"
case "${1:-}" in
  powertools)
    .venv/bin/python -c "import aws_lambda_powertools, boto3" 2>/dev/null && exit 0
    echo "bench: installing the Powertools peer (PyPI: aws-lambda-powertools, boto3) into bench/peers/.venv" >&2
    python3 -m venv .venv || { echo "bench: python3 -m venv bench/peers/.venv failed" >&2; exit 1; }
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt \
      || { echo "bench: pip install -r bench/peers/requirements.txt failed" >&2; exit 1; }
    ;;
  node)
    node -e "require('redis'); require('@aws-sdk/client-dynamodb')" 2>/dev/null && exit 0
    echo "bench: installing the Node peer (npm: redis, @aws-sdk/client-dynamodb) into bench/peers/node_modules" >&2
    command -v npm >/dev/null || { echo "bench: npm is missing" >&2; exit 1; }
    npm ci --no-audit --no-fund --loglevel=error >/dev/null \
      || { echo "bench: npm ci in bench/peers failed" >&2; exit 1; }
    ;;
  *) echo "usage: install.sh powertools|node" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Template checks (run by scripts/test.sh): cfn-lint and `sam validate --lint` on
# infra/template.yaml, then scripts/check_template.py (the template against the code's configuration).
# Everything runs offline and without AWS credentials. cfn-lint and aws-sam-cli come from PyPI;
# when either is missing they are installed into a virtualenv outside the clone
# ($POSTONCE_INFRA_VENV, default ~/.cache/postonce/infra-venv; about a minute the first time)
# so that no system Python is touched.
# Usage: scripts/lint-infra.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TEMPLATE=infra/template.yaml
VENV=${POSTONCE_INFRA_VENV:-$HOME/.cache/postonce/infra-venv}
# Versions this template was checked with; the SAM CLI pins the cfn-lint it works with.
SAM_CLI_SPEC=${POSTONCE_SAM_CLI_SPEC:-aws-sam-cli==1.170.0}

# SAM CLI would otherwise try to send telemetry; nothing here needs the network.
export SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}

if [[ -x "$VENV/bin/sam" && -x "$VENV/bin/cfn-lint" ]]; then
  export PATH="$VENV/bin:$PATH"
fi
if ! command -v cfn-lint >/dev/null || ! command -v sam >/dev/null; then
  echo "installing $SAM_CLI_SPEC and cfn-lint into $VENV (PyPI)"
  start=$(date +%s)
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    # Debian's python3 without ensurepip.
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$SAM_CLI_SPEC" cfn-lint
  export PATH="$VENV/bin:$PATH"
  echo "installed in $(($(date +%s) - start))s"
fi

# check_template.py needs PyYAML; cfn-lint's own interpreter always has it.
PYTHON=python3
if ! python3 -c 'import yaml' 2>/dev/null; then
  if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
    PYTHON=$VENV/bin/python
  else
    python3 -m pip install --quiet --disable-pip-version-check pyyaml
  fi
fi

status=0
run() {
  echo "+ $*"
  if ! "$@"; then
    echo "FAILED: $*" >&2
    status=1
  fi
}

echo "cfn-lint $(cfn-lint --version | awk '{print $2}'), $(sam --version)"
run cfn-lint "$TEMPLATE"
run sam validate --lint --region us-east-1 --template-file "$TEMPLATE"
run "$PYTHON" scripts/check_template.py
exit "$status"

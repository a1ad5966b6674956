# Racecap local environment. Source it (bash, or POSIX sh from the repo root):
#   . local/env.sh
# Puts Node 22 (installed by `local/install.sh node` into .cache/node22) and the pinned npm
# tools (local/node/node_modules/.bin: cdk, artillery, local-sfn) first on PATH, caches
# bytecode in .cache/pycache, and turns off the tools' telemetry and browser downloads.
# Safe to source more than once.

if [ -n "${BASH_VERSION:-}" ]; then
  RACECAP_ROOT="$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
elif [ -z "${RACECAP_ROOT:-}" ]; then
  RACECAP_ROOT="$(pwd)"   # POSIX sh has no way to find a sourced file: assume the repo root
fi
export RACECAP_ROOT

RACECAP_NODE_BIN_DIR="$RACECAP_ROOT/.cache/node22/node_modules/node/bin"
export RACECAP_NODE="$RACECAP_NODE_BIN_DIR/node"

case ":$PATH:" in
  *":$RACECAP_ROOT/local/node/node_modules/.bin:"*) ;;
  *) PATH="$RACECAP_NODE_BIN_DIR:$RACECAP_ROOT/local/node/node_modules/.bin:$PATH" ;;
esac
export PATH

# Bytecode cached in one ignored folder, not in __pycache__ beside the sources (see the Makefile).
export PYTHONPYCACHEPREFIX="$RACECAP_ROOT/.cache/pycache"
unset PYTHONDONTWRITEBYTECODE

export CDK_DISABLE_CLI_TELEMETRY=true
export ARTILLERY_DISABLE_TELEMETRY=true
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

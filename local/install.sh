#!/usr/bin/env bash
# Racecap's idempotent installer for the local stack and the test tooling.
#
#   local/install.sh                 # every step
#   local/install.sh python node     # only these steps (in the order given)
#
# Steps: apt, python, maven, node, console, scanners. Everything except apt packages is kept under the repo's
# ignored .cache/ folder (and the venv in .venv/). A finished step leaves a stamp in
# .cache/stamps/<step> holding a hash of the step's inputs (pins, poms, tool versions);
# the step is skipped while that hash still matches and its outputs are still there.
# Each step's output goes to .cache/logs/install-<step>.log; on failure its tail is shown.
# Works without a terminal (CI=true, no stdin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
STAMPS="$CACHE/stamps"
LOGS="$CACHE/logs"
ALL_STEPS=(apt python maven node console scanners)

PYTHON_BOOT="${RACECAP_PYTHON:-python3}"   # the interpreter that creates .venv
NODE_SPEC="node@22"                        # npm package "node": the Node 22 binary from the registry
NODE_MIN="22.18.0"
NODE_PREFIX="$CACHE/node22"
NODE_TOOLS="$ROOT/local/node"
CONSOLE_DIR="$ROOT/site/admin"   # the director's console: its own packages (esbuild, qrcode-generator, uPlot)
MAVEN_OUT="$CACHE/maven"
CHECKOV_VENV="$CACHE/checkov"   # checkov conflicts with our pins: a venv of its own
M2="$CACHE/m2"

mkdir -p "$STAMPS" "$LOGS"
export npm_config_cache="$CACHE/npm"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export PIP_CACHE_DIR="$CACHE/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 ARTILLERY_DISABLE_TELEMETRY=true CDK_DISABLE_CLI_TELEMETRY=true
export DEBIAN_FRONTEND=noninteractive

say() { printf '[install] %s\n' "$*"; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }

# sha256 over the named files (missing ones count as empty) plus any extra strings.
hash_inputs() {
  local f
  {
    for f in "$@"; do
      if [[ -f "$f" ]]; then printf '%s\n' "${f#"$ROOT"/}"; cat "$f"; else printf '%s\n' "$f"; fi
    done
  } | sha256sum | cut -c1-16
}

# run_step NAME KEY_FN CHECK_FN DO_FN
#   KEY_FN prints the hash of the inputs ("" = no stamp, rely on CHECK_FN alone)
#   CHECK_FN exits 0 if the outputs are present
#   DO_FN does the work; its output goes to the step's log
run_step() {
  local name=$1 key_fn=$2 check_fn=$3 do_fn=$4
  local stamp="$STAMPS/$name" log="$LOGS/install-$name.log" key rc start secs
  key="$($key_fn)"
  printf '[install] %-7s ... ' "$name"
  if { [[ -z "$key" ]] || [[ "$(cat "$stamp" 2>/dev/null)" == "$key" ]]; } && $check_fn >/dev/null 2>&1; then
    echo "ok (cached)"
    return 0
  fi
  start=$SECONDS
  set +e
  ( set -euo pipefail; $do_fn ) </dev/null >"$log" 2>&1
  rc=$?
  set -e
  secs=$((SECONDS - start))
  if [[ $rc -ne 0 ]] || ! $check_fn >>"$log" 2>&1; then
    echo "FAILED after ${secs}s (exit $rc)"
    rm -f "$stamp"  # outputs may be half-replaced: never trust the old stamp again
    echo "[install] ---- last lines of ${log#"$ROOT"/} ----" >&2
    tail -n 30 "$log" >&2 || true
    echo "[install] ---- end of log; re-run 'local/install.sh $name' after fixing ----" >&2
    exit 1
  fi
  # Recompute: a step may create one of its own inputs (e.g. the npm lockfile).
  key="$($key_fn)"
  if [[ -n "$key" ]]; then printf '%s\n' "$key" >"$stamp"; fi
  echo "installed in ${secs}s"
}

# ---------------------------------------------------------------- apt
APT_PACKAGES=(redis-server chromium nginx wrk)
apt_key() { echo ""; }
apt_check() { command -v redis-server && command -v chromium && command -v nginx && command -v wrk; }
apt_do() {
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install ${APT_PACKAGES[*]}"; return 1; }
    sudo=(sudo -n)
  fi
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0
             -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  # Debian starts a freshly installed nginx on 0.0.0.0:80; a policy-rc.d that forbids service
  # starts keeps it down (the stack starts its own on 127.0.0.1 when it needs it).
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null && "${sudo[@]}" chmod +x "$policy" && made_policy=1
  fi
  # The step runs in its own subshell: this trap removes the policy however the step ends.
  if [[ $made_policy == 1 ]]; then trap "${sudo[*]} rm -f $policy" EXIT; fi
  # apt-get update only when needed: no package lists yet, or the install fails on stale ones.
  if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
    "${apt[@]}" update
  fi
  if ! "${apt[@]}" install --no-install-recommends "${APT_PACKAGES[@]}"; then
    echo "--- install failed; refreshing package lists and retrying"
    "${apt[@]}" update
    "${apt[@]}" install --no-install-recommends "${APT_PACKAGES[@]}"
  fi
}

# ---------------------------------------------------------------- python
python_key() {
  hash_inputs "$ROOT"/requirements*.txt "$("$PYTHON_BOOT" -c 'import sys; print(sys.version)' 2>/dev/null)"
}
python_check() { "$ROOT/.venv/bin/python" -c 'import boto3, pytest, redis' && [[ -x "$ROOT/.venv/bin/pytest" ]]; }
python_do() {
  "$PYTHON_BOOT" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
    || { echo "need Python >= 3.11 as '$PYTHON_BOOT' (set RACECAP_PYTHON)"; return 1; }
  if [[ ! -x "$ROOT/.venv/bin/python" ]]; then
    "$PYTHON_BOOT" -m venv "$ROOT/.venv"
  fi
  "$ROOT/.venv/bin/python" -m pip install -q --progress-bar off -r "$ROOT/requirements-dev.txt"
}

# ---------------------------------------------------------------- maven
maven_key() {
  hash_inputs "$ROOT"/local/maven/*/pom.xml "$ROOT/local/java/LocalDynamo.java" \
    "$(javac -version 2>&1)" "$(java -version 2>&1 | head -n1)"
}
maven_check() {
  compgen -G "$MAVEN_OUT/dynamodb/DynamoDBLocal-*.jar" \
    && compgen -G "$MAVEN_OUT/dynamodb/libsqlite4java-linux-*.so" \
    && compgen -G "$MAVEN_OUT/elasticmq/elasticmq-server_*.jar" \
    && [[ -f "$MAVEN_OUT/launcher/LocalDynamo.class" ]]
}
maven_do() {
  command -v mvn >/dev/null || { echo "mvn (Maven 3) not found on PATH"; return 1; }
  command -v javac >/dev/null || { echo "javac (JDK 17+) not found on PATH"; return 1; }
  local name cp tmp
  for name in dynamodb elasticmq; do
    echo "--- fetching $name"
    rm -rf "$MAVEN_OUT/$name.tmp"
    mvn -B -q -Dmaven.repo.local="$M2" -f "$ROOT/local/maven/$name/pom.xml" \
      dependency:copy-dependencies -DoutputDirectory="$MAVEN_OUT/$name.tmp"
    ls "$MAVEN_OUT/$name.tmp"
    # Swap only if something changed: servers may be running from these jars right now.
    if [[ -d "$MAVEN_OUT/$name" ]] && diff -rq "$MAVEN_OUT/$name" "$MAVEN_OUT/$name.tmp" >/dev/null; then
      echo "--- $name unchanged"
      rm -rf "$MAVEN_OUT/$name.tmp"
    else
      rm -rf "$MAVEN_OUT/$name"
      mv "$MAVEN_OUT/$name.tmp" "$MAVEN_OUT/$name"
    fi
  done
  echo "--- compiling local/java/LocalDynamo.java"
  mkdir -p "$MAVEN_OUT/launcher"
  tmp="$(mktemp -d "$MAVEN_OUT/launcher.XXXXXX")"
  cp="$(find "$MAVEN_OUT/dynamodb" -maxdepth 1 -name '*.jar' | sort | paste -sd: -)"
  javac -nowarn -d "$tmp" -cp "$cp" "$ROOT/local/java/LocalDynamo.java"
  mv -f "$tmp/LocalDynamo.class" "$MAVEN_OUT/launcher/LocalDynamo.class"  # atomic rename
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- node
# The Node 22 binary installed by `npm i node@22`; prints its path or nothing.
node22_bin() {
  local c
  for c in "$NODE_PREFIX/node_modules/node/bin/node" "$NODE_PREFIX/node_modules/.bin/node"; do
    if [[ -x "$c" ]]; then (cd "$(dirname "$c")" && echo "$(pwd -P)/$(basename "$c")"); return 0; fi
  done
  return 1
}
node_key() {
  hash_inputs "$NODE_TOOLS/package.json" "$NODE_TOOLS/package-lock.json" "$NODE_SPEC" "$NODE_MIN"
}
node_version_ok() {  # node_version_ok /path/to/node
  "$1" -e 'const [a,b,c]=process.versions.node.split(".").map(Number),[x,y,z]=process.argv[1].split(".").map(Number);
           process.exit((a-x||b-y||c-z)>=0?0:1)' "$NODE_MIN"
}
node_check() {
  local node; node="$(node22_bin)" || return 1
  node_version_ok "$node" \
    && [[ -x "$NODE_TOOLS/node_modules/.bin/cdk" ]] \
    && [[ -x "$NODE_TOOLS/node_modules/.bin/artillery" ]] \
    && [[ -x "$NODE_TOOLS/node_modules/.bin/local-sfn" ]] \
    && [[ -f "$NODE_TOOLS/package-lock.json" ]]
}
node_do() {
  command -v npm >/dev/null || { echo "npm not found on PATH (any Node >= 18 with npm bootstraps Node 22)"; return 1; }
  local node
  if ! node="$(node22_bin)" || ! node_version_ok "$node"; then
    echo "--- npm install $NODE_SPEC into ${NODE_PREFIX#"$ROOT"/}"
    mkdir -p "$NODE_PREFIX"
    [[ -f "$NODE_PREFIX/package.json" ]] || echo '{"name":"racecap-node22","private":true}' >"$NODE_PREFIX/package.json"
    npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --no-save "$NODE_SPEC"
    node="$(node22_bin)" || { echo "npm installed $NODE_SPEC but no node binary found under $NODE_PREFIX"; return 1; }
    node_version_ok "$node" || { echo "$node is $("$node" --version), need >= $NODE_MIN"; return 1; }
  fi
  echo "--- node 22: $node ($("$node" --version))"
  # npm itself is a node script: with Node 22 first on PATH it runs under Node 22.
  export PATH="$(dirname "$node"):$PATH"
  echo "--- node for npm: $(node --version)  npm $(npm --version)"
  # --ignore-scripts: the tools' install scripts are all optional here and some would reach
  # outside the registries: @playwright/browser-chromium (downloads a browser), unix-dgram
  # (node-gyp fetches Node headers from nodejs.org, or builds against a wrong system nodedir;
  # only hot-shots' UDS transport would load it, lazily), protobufjs (a version notice).
  local flags=(--no-audit --no-fund --ignore-scripts)
  cd "$NODE_TOOLS"
  if [[ -f package-lock.json ]]; then
    if ! npm ci "${flags[@]}"; then
      if [[ "${CI:-}" == "true" ]]; then
        echo "npm ci failed (is local/node/package-lock.json in sync with package.json?)"; return 1
      fi
      echo "--- npm ci failed; package.json probably changed: npm install (updates package-lock.json)"
      npm install "${flags[@]}"
    fi
  else
    npm install "${flags[@]}"
  fi
  "$NODE_TOOLS/node_modules/.bin/cdk" --version
  "$NODE_TOOLS/node_modules/.bin/artillery" version || true
}

# ---------------------------------------------------------------- console
# The race director's console's own packages (site/admin/package.json), bundled into the
# site by site/build.py: nothing is loaded from a CDN. Separate from local/node (the tools)
# so the console's lockfile moves with the site alone. Needs the node step's Node 22.
console_key() {
  hash_inputs "$CONSOLE_DIR/package.json" "$CONSOLE_DIR/package-lock.json"
}
console_check() {
  [[ -f "$CONSOLE_DIR/node_modules/esbuild/package.json" ]] \
    && [[ -f "$CONSOLE_DIR/node_modules/qrcode-generator/package.json" ]] \
    && [[ -f "$CONSOLE_DIR/node_modules/uplot/package.json" ]]
}
console_do() {
  local node
  node="$(node22_bin)" || { echo "Node 22 is missing: run 'local/install.sh node' first"; return 1; }
  export PATH="$(dirname "$node"):$PATH"
  cd "$CONSOLE_DIR"
  # --ignore-scripts: esbuild's postinstall only swaps its launcher for the binary; the
  # build calls esbuild's JavaScript API, which finds @esbuild/<platform> by itself.
  npm ci --no-audit --no-fund --ignore-scripts
  node -e "require('esbuild').transformSync('let a = 1'); console.log('esbuild', require('esbuild').version)"
}

# ---------------------------------------------------------------- scanners
scanners_key() {
  hash_inputs "$ROOT/local/scanners.txt" "$("$PYTHON_BOOT" -c 'import sys; print(sys.version)' 2>/dev/null)"
}
scanners_check() { "$CHECKOV_VENV/bin/checkov" --version; }
scanners_do() {
  rm -rf "$CHECKOV_VENV"
  "$PYTHON_BOOT" -m venv "$CHECKOV_VENV"
  "$CHECKOV_VENV/bin/python" -m pip install -q --progress-bar off -r "$ROOT/local/scanners.txt"
}

# ---------------------------------------------------------------- main
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=("${ALL_STEPS[@]}")
for s in "${steps[@]}"; do
  case " ${ALL_STEPS[*]} " in
    *" $s "*) ;;
    *) die "unknown step '$s' (steps: ${ALL_STEPS[*]})" ;;
  esac
done

total=$SECONDS
for s in "${steps[@]}"; do
  run_step "$s" "${s}_key" "${s}_check" "${s}_do"
done
say "done in $((SECONDS - total))s"

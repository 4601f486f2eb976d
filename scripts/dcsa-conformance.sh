#!/usr/bin/env bash
# DCSA Track & Trace 3.0.0 conformance of this service's Event Producer (issue 39), scripted.
#
# Runs DCSA's own Conformance Framework (github.com/dcsaorg/Conformance-Gateway, pinned at commit
# 283bf7a1dcbcd9ea8fa6a25230af7c45c136e892) against the service, the way a DCSA adopter does in
# DCSA's web UI, but through the sandbox's HTTP API (/conformance/webui, as the framework's own
# ManualTestBase drives it):
#   1. gets the framework at the pinned commit: $CONFORMANCE_GATEWAY_DIR when set (a clone already at
#      that commit), else a clone of https://github.com/dcsaorg/Conformance-Gateway in
#      $DCSA_CONFORMANCE_CACHE (default ~/.cache/dcsa-conformance);
#   2. builds it once (Java 25 from $JAVA_HOME, Maven wrapper; only `-pl spring-boot -am`, tests
#      skipped; cached until the commit or the local patch below changes);
#   3. starts it on a free port, and the service with its embedded database on another free port
#      with a fresh DATA_DIR (PUSH_ALLOW_HTTP=true, PUSH_ALLOWED_NETWORKS=127.0.0.0/8, so the webhook
#      can push to the sandbox on loopback);
#   4. scripts/dcsa-conformance.mjs seeds data through the public API (an owner's API key, asset
#      APZU4812090 / 45R1, booking data with carrierBookingReference and transportDocumentReference
#      linked to it, locations, a DOOR sensor record, reefer data, an acknowledged SET_TEMPERATURE
#      command), creates a sandbox testing the Producer role (the sandbox is the Consumer), and runs
#      every IOT- and REEFER-relevant scenario: GET /events by type (IOT, REEFER), the primary and
#      additional query-parameter filters, pagination, and POST /events (IOT, REEFER) pushed by a
#      webhook integration with webhook.format "dcsa-tnt-3";
#   5. prints one line per scenario (conformant / non-conformant / could not run, with the
#      framework's own failure messages) and, with --report FILE, the same as a markdown table;
#   6. stops everything it started.
#
# Local patch: the framework hard-codes its own base URL as http://localhost:8080 (the sandbox calls
# itself over HTTP at that address), so it could only run on port 8080. The script changes that one
# literal in spring-boot/.../ConformanceApplication.java to read the port from -Dserver.port
# (default 8080, so unchanged behaviour there); no check, scenario or payload is touched.
#
# Usage: scripts/dcsa-conformance.sh [--report FILE] [--only REGEX] [--force]
#   --only REGEX  run only the scenarios whose name matches (JavaScript RegExp)
#   --force       run the scenarios even when GET /api/dcsa/tnt/v3/events answers 404
# Exit status: 0 all conformant, 1 a scenario non-conformant, 2 a scenario could not run (or setup
# failed), 3 usage. Env: CONFORMANCE_GATEWAY_DIR, DCSA_CONFORMANCE_CACHE, JAVA_HOME,
# DCSA_KEEP_WORK=1 (keep the logs and data folder), DCSA_SCENARIO_TIMEOUT_S (default 60).
set -euo pipefail

PINNED=283bf7a1dcbcd9ea8fa6a25230af7c45c136e892
UPSTREAM=https://github.com/dcsaorg/Conformance-Gateway
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

driver_args=()
while (($#)); do
  case "$1" in
    --report | --only)
      (($# >= 2)) || { echo "$1 needs a value" >&2; exit 3; }
      driver_args+=("$1" "$2"); shift 2 ;;
    --force) driver_args+=("$1"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 3 ;;
  esac
done

say() { printf '[dcsa-conformance] %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

# --- tools -------------------------------------------------------------------------------------
command -v node >/dev/null || die "node not found on PATH (Node.js 22 or newer)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' ||
  die "Node.js 22 or newer needed, found $(node --version)"
# No JAVA_HOME: the newest JDK 25+ under /usr/lib/jvm when the default java is older (Debian keeps
# its own JDK as the default and a second one, such as Temurin 25, beside it).
if [[ -z ${JAVA_HOME:-} ]]; then
  for jdk in $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -rV); do
    v=$("$jdk/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p') || continue
    if ((${v:-0} >= 25)); then export JAVA_HOME=${jdk%/}; break; fi
  done
fi
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
command -v "$JAVA" >/dev/null || die "java not found (set JAVA_HOME to a JDK 25)"
java_major=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
((${java_major:-0} >= 25)) || die "the framework needs Java 25 or newer; $JAVA is ${java_major:-unknown} (set JAVA_HOME)"
export JAVA_HOME=${JAVA_HOME:-$(cd "$(dirname "$(readlink -f "$(command -v "$JAVA")")")/.." && pwd)}

# --- 1. the framework at the pinned commit ------------------------------------------------------
if [[ -n ${CONFORMANCE_GATEWAY_DIR:-} ]]; then
  CG=$CONFORMANCE_GATEWAY_DIR
  [[ -d $CG/.git || -f $CG/.git ]] || die "CONFORMANCE_GATEWAY_DIR=$CG is not a git work tree"
  head=$(git -C "$CG" rev-parse HEAD)
  [[ $head == "$PINNED" ]] || die "CONFORMANCE_GATEWAY_DIR is at $head, not the pinned $PINNED (git -C $CG checkout $PINNED)"
else
  CG=${DCSA_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dcsa-conformance}/Conformance-Gateway
  if [[ ! -d $CG/.git ]]; then
    say "cloning $UPSTREAM into $CG"
    mkdir -p "$(dirname "$CG")"
    git clone --quiet "$UPSTREAM" "$CG"
  fi
  if [[ $(git -C "$CG" rev-parse HEAD) != "$PINNED" ]]; then
    git -C "$CG" cat-file -e "$PINNED^{commit}" 2>/dev/null || git -C "$CG" fetch --quiet origin
    git -C "$CG" -c advice.detachedHead=false checkout --quiet "$PINNED" -- 2>/dev/null ||
      git -C "$CG" -c advice.detachedHead=false checkout --quiet "$PINNED"
  fi
fi

# The one local change (see the header): the sandbox's own base URL follows -Dserver.port.
APP_JAVA=$CG/spring-boot/src/main/java/org/dcsa/conformance/springboot/ConformanceApplication.java
PATCHED='"http://localhost:" + System.getProperty("server.port", "8080"),'
if ! grep -qF "$PATCHED" "$APP_JAVA"; then
  grep -qF 'new ConformanceWebuiHandler(accessChecker, "http://localhost:8080",' "$APP_JAVA" ||
    die "cannot find the base URL literal to patch in $APP_JAVA"
  sed -i 's|new ConformanceWebuiHandler(accessChecker, "http://localhost:8080",|new ConformanceWebuiHandler(accessChecker, "http://localhost:" + System.getProperty("server.port", "8080"),|' "$APP_JAVA"
  say "patched the framework's base URL to follow -Dserver.port ($APP_JAVA)"
fi

# --- 2. build once --------------------------------------------------------------------------------
STAMP=$CG/spring-boot/target/.dcsa-conformance-built
stamp_want="$PINNED $(sha256sum "$APP_JAVA" | cut -c1-16)"
if [[ ! -f $STAMP || $(cat "$STAMP") != "$stamp_want" || ! -d $CG/spring-boot/target/dependency ]]; then
  say "building the framework (./mvnw -pl spring-boot -am package, tests skipped); the first build downloads its dependencies from Maven Central"
  build_log=$CG/spring-boot-build.log
  t0=$SECONDS
  if ! (cd "$CG" && ./mvnw -B -pl spring-boot -am clean package dependency:copy-dependencies \
    -DincludeScope=runtime -DskipTests >"$build_log" 2>&1); then
    grep -E '^\[ERROR\]' "$build_log" | head -20 >&2 || true
    die "framework build failed after $((SECONDS - t0)) s; full log: $build_log"
  fi
  echo "$stamp_want" >"$STAMP"
  say "framework built in $((SECONDS - t0)) s"
fi

# --- 3. start the framework and the service -------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dcsa-conformance.XXXXXX")
pids=()
status=2
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${DCSA_KEEP_WORK:-} == 1 || $status -ne 0 ]]; then
    say "logs and data kept in $WORK (framework.log, service.log)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
FPORT=$(free_port)
SPORT=$(free_port)
while [[ $SPORT == "$FPORT" ]]; do SPORT=$(free_port); done

say "starting the framework on 127.0.0.1:$FPORT"
"$JAVA" -Xmx768m -Dserver.port="$FPORT" \
  -cp "$CG/spring-boot/target/classes:$CG/spring-boot/target/dependency/*" \
  org.dcsa.conformance.springboot.ConformanceApplication \
  --server.address=127.0.0.1 \
  --conformance.createAutoTestingSandboxes=false --conformance.createManualTestingSandboxes=false \
  >"$WORK/framework.log" 2>&1 &
pids+=($!)

say "building the service if its sources changed (scripts/build-if-changed.mjs)"
(cd "$ROOT" && node scripts/build-if-changed.mjs) || die "the service does not build (npm run build for the errors)"
OPERATOR_SECRET=$(node -e 'console.log(require("crypto").randomBytes(18).toString("hex"))')
OPERATOR_PASSWORD=$(node -e 'console.log(require("crypto").randomBytes(18).toString("hex"))')
say "starting the service on 127.0.0.1:$SPORT (embedded database in $WORK/data)"
(
  cd "$ROOT"
  export PORT=$SPORT HOST=127.0.0.1 PUBLIC_URL=http://127.0.0.1:$SPORT DATA_DIR=$WORK/data LOG_LEVEL=warn \
    BOOTSTRAP_CLIENT_ID=tracking-cli BOOTSTRAP_CLIENT_SECRET=$OPERATOR_SECRET \
    BOOTSTRAP_USERNAME=operator BOOTSTRAP_PASSWORD=$OPERATOR_PASSWORD \
    PUSH_ALLOW_HTTP=true PUSH_ALLOWED_NETWORKS=127.0.0.0/8 DELIVERY_POLL_MS=250 \
    RATE_LIMIT_MAX=1000000 TOKEN_LIFE_SECONDS=86400
  exec node dist/main.js
) >"$WORK/service.log" 2>&1 &
pids+=($!)

# --- 4./5. seed, run the scenarios, report ---------------------------------------------------------
set +e
DCSA_FRAMEWORK_URL=http://127.0.0.1:$FPORT DCSA_SERVICE_URL=http://127.0.0.1:$SPORT \
  DCSA_OPERATOR_CLIENT_ID=tracking-cli DCSA_OPERATOR_CLIENT_SECRET=$OPERATOR_SECRET \
  DCSA_OPERATOR_USERNAME=operator DCSA_OPERATOR_PASSWORD=$OPERATOR_PASSWORD \
  DCSA_WORK_DIR=$WORK \
  node "$ROOT/scripts/dcsa-conformance.mjs" ${driver_args[@]+"${driver_args[@]}"}
status=$?
set -e
exit "$status"

#!/usr/bin/env bash
# Starts a real Keycloak (from Maven Central, no Docker) for test/keycloak.test.ts, in dev mode on
# 127.0.0.1, with the realm from test/fixtures/keycloak-realm.json imported. Idempotent: when the
# realm already answers, it does nothing. Everything lives in a cache folder outside git.
#
#   bash scripts/keycloak.sh            # start (or confirm running); exit 0 when the realm answers
#   bash scripts/keycloak.sh stop       # stop the Keycloak this script started
#
# Environment (all optional):
#   TRACKING_CACHE_DIR        cache folder (default $HOME/.cache/tracking-ci)
#   KEYCLOAK_VERSION          org.keycloak:keycloak-quarkus-dist version (default 26.7.3)
#   KEYCLOAK_PORT             HTTP port (default 18180)
#   KEYCLOAK_MANAGEMENT_PORT  health/management port (default KEYCLOAK_PORT + 1)
#   KEYCLOAK_START_TIMEOUT    seconds to wait for the realm (default 180)
#   JAVA_HOME                 JDK to run it with (Keycloak 26.x runs on 17, 21 or 25); else java on PATH
#   JAVA_OPTS_KC_HEAP         heap flags (default -Xms64m -Xmx512m)
#   JAVA_OPTS_APPEND          other JVM flags (default -XX:TieredStopAtLevel=1, below)
set -euo pipefail

CACHE_DIR="${TRACKING_CACHE_DIR:-$HOME/.cache/tracking-ci}"
VERSION="${KEYCLOAK_VERSION:-26.7.3}"
PORT="${KEYCLOAK_PORT:-18180}"
MGMT_PORT="${KEYCLOAK_MANAGEMENT_PORT:-$((PORT + 1))}"
TIMEOUT="${KEYCLOAK_START_TIMEOUT:-180}"
REALM=tracking-test
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REALM_FILE="$REPO_DIR/test/fixtures/keycloak-realm.json"
MAVEN_URL="https://repo.maven.apache.org/maven2/org/keycloak/keycloak-quarkus-dist/$VERSION/keycloak-quarkus-dist-$VERSION.zip"

ZIP="$CACHE_DIR/keycloak-$VERSION.zip"
HOME_DIR="$CACHE_DIR/keycloak-$VERSION"
LOG="$CACHE_DIR/keycloak-$PORT.log"
PID_FILE="$CACHE_DIR/keycloak-$PORT.pid"
BASE="http://127.0.0.1:$PORT"
DISCOVERY="$BASE/realms/$REALM/.well-known/openid-configuration"

say() { echo "keycloak.sh: $*" >&2; }
SHOW_LOG=0 # the log tail is shown only once it is this run's (or the running Keycloak's) log
fail() {
  say "$*"
  if [ "$SHOW_LOG" = 1 ] && [ -f "$LOG" ]; then
    say "last lines of $LOG:"
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}
realm_answers() { curl -fsS -o /dev/null -m 5 "$DISCOVERY" 2>/dev/null; }
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
our_pid() {
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

mkdir -p "$CACHE_DIR"

if [ "${1:-}" = stop ]; then
  pid="$(our_pid)"
  if [ -z "$pid" ]; then
    say "no Keycloak started by this script is running on port $PORT"
    exit 0
  fi
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  rm -f "$PID_FILE"
  say "stopped Keycloak (pid $pid)"
  exit 0
fi

if realm_answers; then
  say "Keycloak already answers at $BASE (realm $REALM)"
  exit 0
fi

# One starter at a time; a second caller waits here, then finds the realm answering below.
exec 9>"$CACHE_DIR/keycloak-$PORT.lock"
flock -w "$TIMEOUT" 9 || fail "timed out waiting for another keycloak.sh run"

wait_for_realm() {
  local pid="$1" deadline=$((SECONDS + TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if realm_answers; then return 0; fi
    kill -0 "$pid" 2>/dev/null || fail "Keycloak (pid $pid) exited before the realm answered"
    sleep 1
  done
  fail "the realm's discovery document ($DISCOVERY) did not answer within ${TIMEOUT}s"
}

if realm_answers; then
  say "Keycloak already answers at $BASE (realm $REALM)"
  exit 0
fi
pid="$(our_pid)"
if [ -n "$pid" ]; then
  say "Keycloak (pid $pid) is starting; waiting for it"
  SHOW_LOG=1
  wait_for_realm "$pid"
  say "ready at $BASE/realms/$REALM"
  exit 0
fi
if port_in_use "$PORT"; then
  fail "port $PORT is in use by something that does not serve realm $REALM; set KEYCLOAK_PORT or stop it"
fi
if port_in_use "$MGMT_PORT"; then
  fail "management port $MGMT_PORT is in use; set KEYCLOAK_MANAGEMENT_PORT"
fi

sha1_ok() {
  local want
  if [ ! -s "$ZIP.sha1" ]; then
    curl -fsSL --retry 3 -o "$ZIP.sha1.tmp" "$MAVEN_URL.sha1" || return 2
    mv "$ZIP.sha1.tmp" "$ZIP.sha1"
  fi
  want="$(awk '{print $1; exit}' "$ZIP.sha1")"
  [ "$(sha1sum "$ZIP" | awk '{print $1}')" = "$want" ]
}

if [ ! -x "$HOME_DIR/bin/kc.sh" ]; then
  if [ -f "$ZIP" ] && ! sha1_ok; then
    say "$ZIP does not match Maven Central's SHA-1 (or it could not be fetched); downloading again"
    rm -f "$ZIP" "$ZIP.sha1"
  fi
  if [ ! -f "$ZIP" ]; then
    say "downloading $MAVEN_URL"
    curl -fsSL --retry 3 -o "$ZIP.part" "$MAVEN_URL" || fail "download failed"
    mv "$ZIP.part" "$ZIP"
    sha1_ok || { rm -f "$ZIP"; fail "downloaded zip does not match $MAVEN_URL.sha1"; }
  fi
  say "unpacking $ZIP"
  tmp="$(mktemp -d "$CACHE_DIR/unzip.XXXXXX")"
  unzip -q "$ZIP" -d "$tmp" || { rm -rf "$tmp"; fail "unzip failed"; }
  rm -rf "$HOME_DIR"
  mv "$tmp/keycloak-$VERSION" "$HOME_DIR"
  rm -rf "$tmp"
fi

JAVA_BIN="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$JAVA_BIN" >/dev/null || fail "no java found (set JAVA_HOME to a JDK 17, 21 or 25)"

mkdir -p "$HOME_DIR/data/import"
cp "$REALM_FILE" "$HOME_DIR/data/import/$REALM-realm.json"

say "starting Keycloak $VERSION ($("$JAVA_BIN" -version 2>&1 | head -n 1)) on $BASE, log $LOG"
start=$SECONDS
# The client compiler alone (no C2): this Keycloak answers a test file's few logins, and its start
# took 22.7 CPU-seconds instead of 43.5 on the two cores the tests share (an idle minute costs
# 0.1-0.4 either way).
# dev-mem: a fresh in-memory database every start, so the realm file is always imported as written
# and no users from earlier runs survive a restart.
KC_BOOTSTRAP_ADMIN_USERNAME=admin KC_BOOTSTRAP_ADMIN_PASSWORD=admin \
JAVA_OPTS_KC_HEAP="${JAVA_OPTS_KC_HEAP:--Xms64m -Xmx512m}" \
JAVA_OPTS_APPEND="${JAVA_OPTS_APPEND--XX:TieredStopAtLevel=1}" \
  setsid nohup "$HOME_DIR/bin/kc.sh" start-dev \
    --db=dev-mem \
    --http-host=127.0.0.1 --http-port="$PORT" \
    --http-management-host=127.0.0.1 --http-management-port="$MGMT_PORT" \
    --health-enabled=true \
    --import-realm \
    </dev/null >"$LOG" 2>&1 9>&- &
pid=$!
echo "$pid" >"$PID_FILE"
SHOW_LOG=1
wait_for_realm "$pid"
say "ready at $BASE/realms/$REALM after $((SECONDS - start))s (pid $pid; stop with: bash scripts/keycloak.sh stop)"

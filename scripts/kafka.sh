#!/usr/bin/env bash
# Runs a real Apache Kafka broker (KRaft, one process that is both broker and controller) for the
# tests, without Docker: the jars of org.apache.kafka:kafka_2.13 come from Maven Central through
# scripts/kafka/pom.xml (fetched once into the cache folder). Several named instances can run side by
# side, each in its own folder with its own config, data, certificates, pid file and log.
#
#   bash scripts/kafka.sh [start] [--name NAME] [--port-base P]  # start, or confirm running (exit 0 when it answers)
#   bash scripts/kafka.sh stop [--name NAME]                     # stop it; exit 0 once nothing runs
#   bash scripts/kafka.sh status [--name NAME]                   # exit 0 when running and answering, else 3
#
# Default instance "shared" on port base 19092. Listeners, all on 127.0.0.1 (P = port base):
#   P    PLAINTEXT, anonymous (also the inter-broker listener)
#   P+1  SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; user tracker / tracker-secret
#   P+2  SSL, server authentication only (CA: INSTANCE/certs/ca.pem)
#   P+3  SSL with client certificates required (INSTANCE/certs/client.pem + client-key.pem)
#   P+4  SASL_SSL, same mechanisms and user as P+1
#   P+5  CONTROLLER (KRaft)
# INSTANCE is $CACHE/kafka-instances/NAME. The certificates (made with openssl once per instance):
# ca.pem/ca-key.pem, server.pem (CN=localhost, SAN DNS:localhost, IP:127.0.0.1), client.pem +
# client-key.pem (unencrypted) from the same CA, and a foreign CA other-ca.pem with
# other-client.pem/other-client-key.pem for negative tests. A stopped instance keeps its data: the
# next start reuses it (topics and messages survive a stop + start, for outage tests).
#
# Environment (all optional):
#   TRACKING_CACHE_DIR     cache folder (default $HOME/.cache/tracking-ci)
#   KAFKA_NAME             instance name when --name is not given (default shared)
#   KAFKA_PORT_BASE        port base for start when --port-base is not given (default: the instance's
#                          last one, else 19092)
#   KAFKA_HEAP             JVM heap flags (default -Xmx512m)
#   KAFKA_JVM_FLAGS        the JVM's other flags (default: the client compiler alone and the serial
#                          collector, below)
#   KAFKA_START_TIMEOUT    seconds to wait for the broker to answer (default 120)
#   JAVA_HOME              JDK to run it with (17 or newer); else java on PATH
# A node of a cluster of several (each its own instance, all started at once: a quorum elects its
# controller only once a majority of the voters runs):
#   KAFKA_NODE_ID          this node's id (default 1)
#   KAFKA_VOTERS           the controller quorum, id@127.0.0.1:controller-port,... (default: this node alone)
#   KAFKA_CLUSTER_ID       the cluster id every node is formatted with (default: a new one)
#   KAFKA_REPLICATION      replicas of the consumer offsets and transaction topics (default 1)
set -euo pipefail

VERSION=3.9.1
CACHE_DIR="${TRACKING_CACHE_DIR:-$HOME/.cache/tracking-ci}"
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$REPO_DIR/scripts/kafka/pom.xml"
KAFKA_DIR="$CACHE_DIR/kafka-$VERSION"
LIBS="$KAFKA_DIR/libs"
TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
HEAP="${KAFKA_HEAP:--Xmx512m}"
USERNAME=tracker
PASSWORD=tracker-secret
KEY_PASSWORD=tracking-test-key # protects only the throwaway test key inside server-keystore.pem

say() { echo "kafka.sh: $*" >&2; }
usage() {
  sed -n '/^#   bash/p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 2
}

CMD=start
NAME="${KAFKA_NAME:-shared}"
PORT_BASE_ARG=""
while [ $# -gt 0 ]; do
  case "$1" in
    start | stop | status) CMD="$1" ;;
    --name) [ $# -ge 2 ] || usage; NAME="$2"; shift ;;
    --name=*) NAME="${1#--name=}" ;;
    --port-base) [ $# -ge 2 ] || usage; PORT_BASE_ARG="$2"; shift ;;
    --port-base=*) PORT_BASE_ARG="${1#--port-base=}" ;;
    -h | --help) usage ;;
    *) say "unknown argument: $1"; usage ;;
  esac
  shift
done
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] || { say "bad instance name: $NAME"; exit 2; }

INST="$CACHE_DIR/kafka-instances/$NAME"
CONF="$INST/server.properties"
DATA="$INST/data"
CERTS="$INST/certs"
PID_FILE="$INST/kafka.pid"
PORT_FILE="$INST/port-base"
LOG="$INST/kafka.log"

# The port base: the one asked for (--port-base, or for start KAFKA_PORT_BASE), else the one this
# instance last ran with, else the default.
PORT_BASE="$PORT_BASE_ARG"
if [ -z "$PORT_BASE" ] && [ "$CMD" = start ]; then PORT_BASE="${KAFKA_PORT_BASE:-}"; fi
if [ -z "$PORT_BASE" ] && [ -s "$PORT_FILE" ]; then PORT_BASE="$(cat "$PORT_FILE")"; fi
PORT_BASE="${PORT_BASE:-19092}"
[[ "$PORT_BASE" =~ ^[0-9]+$ ]] && [ "$PORT_BASE" -ge 1024 ] && [ "$PORT_BASE" -le 65530 ] ||
  { say "bad port base: $PORT_BASE"; exit 2; }
P_PLAIN=$PORT_BASE
P_SASL=$((PORT_BASE + 1))
P_SSL=$((PORT_BASE + 2))
P_MTLS=$((PORT_BASE + 3))
P_SASL_SSL=$((PORT_BASE + 4))
P_CONTROLLER=$((PORT_BASE + 5))
NODE_ID="${KAFKA_NODE_ID:-1}"
VOTERS="${KAFKA_VOTERS:-$NODE_ID@127.0.0.1:$P_CONTROLLER}"
REPLICATION="${KAFKA_REPLICATION:-1}"
[[ "$NODE_ID" =~ ^[0-9]+$ ]] && [[ "$REPLICATION" =~ ^[0-9]+$ ]] || { say "bad KAFKA_NODE_ID or KAFKA_REPLICATION"; exit 2; }
ALL_PORTS="$P_PLAIN $P_SASL $P_SSL $P_MTLS $P_SASL_SSL $P_CONTROLLER"

SHOW_LOG=0 # the log tail is shown only once it is this run's (or the running broker's) log
fail() {
  say "$*"
  if [ "$SHOW_LOG" = 1 ] && [ -f "$LOG" ]; then
    say "last lines of $LOG:"
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The pid from the pid file, when that process is alive and really is this instance's broker (a pid
# that was reused by some other process after a crash does not count).
our_pid() {
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $CONF"; then echo "$pid"; fi
}

# True when the broker answers a metadata request on the PLAINTEXT listener and every listener
# accepts connections.
answers() {
  local port
  if command -v kcat >/dev/null; then
    kcat -b "127.0.0.1:$P_PLAIN" -L -m 5 -q >/dev/null 2>&1 || return 1
  else
    grep -q "Kafka Server started" "$LOG" 2>/dev/null || return 1
  fi
  for port in $ALL_PORTS; do port_open "$port" || return 1; done
}

wait_until_answering() {
  local pid="$1" deadline=$((SECONDS + TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if answers; then return 0; fi
    kill -0 "$pid" 2>/dev/null || fail "the broker (pid $pid) exited before it answered"
    sleep 0.5
  done
  fail "the broker (pid $pid) did not answer on 127.0.0.1:$P_PLAIN within ${TIMEOUT}s"
}

if [ "$CMD" != start ] && [ ! -d "$INST" ]; then
  [ "$CMD" = stop ] && { say "instance $NAME is not running"; exit 0; }
  echo "stopped (instance $NAME)"
  exit 3
fi
mkdir -p "$INST"
# One start/stop of this instance at a time; a second caller waits here, then sees the first's result.
exec 9>"$INST/.lock"
flock -w $((TIMEOUT + 60)) 9 || fail "timed out waiting for another kafka.sh run on instance $NAME"

case "$CMD" in
  stop)
    pid="$(our_pid)"
    if [ -z "$pid" ]; then
      rm -f "$PID_FILE"
      say "instance $NAME is not running"
      exit 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      say "the broker (pid $pid) did not stop within 30s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
    kill -0 "$pid" 2>/dev/null && fail "could not stop the broker (pid $pid)"
    rm -f "$PID_FILE"
    say "stopped instance $NAME (pid $pid)"
    exit 0
    ;;
  status)
    pid="$(our_pid)"
    if [ -n "$pid" ] && answers; then
      echo "running (instance $NAME, pid $pid, port base $PORT_BASE)"
      exit 0
    fi
    if [ -n "$pid" ]; then echo "not answering (instance $NAME, pid $pid, port base $PORT_BASE)"; else echo "stopped (instance $NAME)"; fi
    exit 3
    ;;
esac

# ---- start ----
pid="$(our_pid)"
if [ -n "$pid" ]; then
  running_base="$(cat "$PORT_FILE" 2>/dev/null || echo "$PORT_BASE")"
  if [ "$running_base" != "$PORT_BASE" ]; then
    fail "instance $NAME already runs on port base $running_base (pid $pid); stop it first to use $PORT_BASE"
  fi
  SHOW_LOG=1
  if ! answers; then
    say "instance $NAME (pid $pid) is running but not answering yet; waiting for it"
    wait_until_answering "$pid"
  fi
  echo "running (instance $NAME, pid $pid, port base $PORT_BASE)"
  exit 0
fi
rm -f "$PID_FILE"
for port in $ALL_PORTS; do
  port_open "$port" && fail "port $port is in use by something else; stop it or pick another --port-base"
done

JAVA_BIN="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$JAVA_BIN" >/dev/null || fail "no java found (set JAVA_HOME to a JDK 17 or newer)"

# The jars, once per version of the pom (shared by all instances). Fetched into a temporary folder
# first so that an interrupted download never looks complete.
POM_SUM="$(sha256sum "$POM" | cut -d' ' -f1)"
if [ ! -f "$LIBS/kafka_2.13-$VERSION.jar" ] || [ "$(cat "$LIBS/.pom.sha256" 2>/dev/null)" != "$POM_SUM" ]; then
  command -v mvn >/dev/null || fail "mvn is needed once to fetch the Kafka jars from Maven Central"
  say "fetching org.apache.kafka:kafka_2.13:$VERSION and its dependencies from Maven Central"
  mkdir -p "$KAFKA_DIR"
  tmp="$(mktemp -d "$KAFKA_DIR/libs.XXXXXX")"
  (cd "$REPO_DIR/scripts/kafka" && mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp") >"$tmp.log" 2>&1 ||
    { cat "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; fail "mvn could not fetch the jars"; }
  rm -f "$tmp.log"
  [ -f "$tmp/kafka_2.13-$VERSION.jar" ] || { rm -rf "$tmp"; fail "mvn did not deliver kafka_2.13-$VERSION.jar"; }
  echo "$POM_SUM" >"$tmp/.pom.sha256"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
fi

# Certificates, once per instance, made in a temporary folder and moved into place when complete.
make_certs() {
  local dir="$1"
  cd "$dir"
  local leaf="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment"
  printf '%s\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' "$leaf" >server.ext
  printf '%s\nextendedKeyUsage=clientAuth\n' "$leaf" >client.ext
  for ca in ca other-ca; do
    openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 -keyout "$ca-key.pem" -out "$ca.pem" \
      -subj "/CN=tracking test $ca $NAME" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  done
  # name, CA, subject, extensions
  for spec in "server ca localhost server" "client ca $USERNAME client" "other-client other-ca $USERNAME client"; do
    set -- $spec
    openssl req -new -nodes -newkey rsa:2048 -sha256 -keyout "$1-key.pem" -out "$1.csr" -subj "/CN=$3"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2-key.pem" -set_serial "0x$(openssl rand -hex 16)" \
      -days 3650 -sha256 -extfile "$4.ext" -out "$1.pem"
    rm -f "$1.csr"
  done
  # Java 17 cannot read OpenSSL 3's default (PBES2) PKCS#8 encryption: use the legacy PBE-SHA1-3DES.
  openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES -in server-key.pem -passout "pass:$KEY_PASSWORD" -out server-key.enc.pem
  cat server-key.enc.pem server.pem >server-keystore.pem
  rm -f server-key.enc.pem server.ext client.ext
  chmod 600 ./*-key.pem server-keystore.pem
}
if [ ! -s "$CERTS/server-keystore.pem" ] || [ ! -s "$CERTS/other-client.pem" ]; then
  say "making test certificates in $CERTS"
  tmp="$(mktemp -d "$INST/certs.XXXXXX")"
  # (set -e does not apply inside a subshell that is part of an || list, hence the explicit status.)
  set +e
  (set -e; make_certs "$tmp") >"$tmp.log" 2>&1
  rc=$?
  set -e
  if [ "$rc" != 0 ] || [ ! -s "$tmp/server-keystore.pem" ]; then
    cat "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    fail "openssl failed"
  fi
  rm -rf "$CERTS" "$tmp.log"
  mv "$tmp" "$CERTS"
fi

jaas() { # listener (lower case)
  local l="$1"
  cat <<EOF
listener.name.$l.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.$l.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$USERNAME="$PASSWORD";
listener.name.$l.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$l.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
}

mkdir -p "$DATA" "$INST/logs"
cat >"$CONF.tmp" <<EOF
# Written by scripts/kafka.sh on every start; edits are lost.
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:$P_PLAIN,SASL_PLAINTEXT://127.0.0.1:$P_SASL,SSL://127.0.0.1:$P_SSL,MTLS://127.0.0.1:$P_MTLS,SASL_SSL://127.0.0.1:$P_SASL_SSL,CONTROLLER://127.0.0.1:$P_CONTROLLER
advertised.listeners=PLAINTEXT://127.0.0.1:$P_PLAIN,SASL_PLAINTEXT://127.0.0.1:$P_SASL,SSL://127.0.0.1:$P_SSL,MTLS://127.0.0.1:$P_MTLS,SASL_SSL://127.0.0.1:$P_SASL_SSL
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER

sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
$(jaas sasl_plaintext)
$(jaas sasl_ssl)

ssl.keystore.type=PEM
ssl.keystore.location=$CERTS/server-keystore.pem
ssl.key.password=$KEY_PASSWORD
ssl.truststore.type=PEM
ssl.truststore.location=$CERTS/ca.pem
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required
ssl.endpoint.identification.algorithm=

log.dirs=$DATA
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=$REPLICATION
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$REPLICATION
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.retention.hours=168
EOF
mv "$CONF.tmp" "$CONF"

cat >"$INST/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.apache.kafka.storage.internals.log=WARN
log4j.logger.kafka.log=WARN
EOF

# A broker here lives for a test run and carries a test's load, on a machine whose cores the tests
# share: the client compiler alone (no C2) and the serial collector brought a start from 5.7 to 3.0
# CPU-seconds and an idle minute from 4.2 to 2.9 (G1 and tiered compilation measured beside it),
# and formatting an instance from 4.3 to 3.3. A production Kafka is not run by this script.
read -r -a JVM_EXTRA <<<"${KAFKA_JVM_FLAGS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"
JVM_FLAGS=($HEAP "${JVM_EXTRA[@]}" -Djava.awt.headless=true
  "-Dlog4j.configuration=file:$INST/log4j.properties" "-Dkafka.logs.dir=$INST/logs")

if [ ! -f "$DATA/meta.properties" ]; then
  say "formatting $DATA"
  cluster_id="${KAFKA_CLUSTER_ID:-$("$JAVA_BIN" -cp "$LIBS/*" "${JVM_FLAGS[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)}"
  [ -n "$cluster_id" ] || fail "could not make a cluster id"
  "$JAVA_BIN" -cp "$LIBS/*" "${JVM_FLAGS[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$CONF" \
    --add-scram "SCRAM-SHA-256=[name=$USERNAME,password=$PASSWORD]" \
    --add-scram "SCRAM-SHA-512=[name=$USERNAME,password=$PASSWORD]" >"$INST/format.log" 2>&1 ||
    { cat "$INST/format.log" >&2; fail "formatting $DATA failed"; }
fi

[ -f "$LOG" ] && mv -f "$LOG" "$LOG.1"
echo "$PORT_BASE" >"$PORT_FILE"
say "starting Kafka $VERSION instance $NAME on 127.0.0.1:$P_PLAIN..$P_CONTROLLER, log $LOG"
start=$SECONDS
# setsid: the broker outlives the caller's process group (a test runner that started it).
setsid nohup "$JAVA_BIN" "${JVM_FLAGS[@]}" -cp "$LIBS/*" kafka.Kafka "$CONF" </dev/null >"$LOG" 2>&1 9>&- &
pid=$!
echo "$pid" >"$PID_FILE"
SHOW_LOG=1
wait_until_answering "$pid"
say "instance $NAME answers after $((SECONDS - start))s (pid $pid; stop with: bash scripts/kafka.sh stop --name $NAME)"
echo "started (instance $NAME, pid $pid, port base $PORT_BASE)"

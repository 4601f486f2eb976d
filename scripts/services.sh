#!/usr/bin/env bash
# Starts what the test suite talks to, when it is not running already: PostgreSQL (5432),
# Redis (6379), Mosquitto (1883), Keycloak (scripts/keycloak.sh) and an Apache Kafka broker
# (scripts/kafka.sh), both from Maven Central; installs kcat, the mosquitto clients and Chromium when absent.
# Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

wait_for() { # name, seconds, command...
  local name=$1 secs=$2; shift 2
  for _ in $(seq 1 "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "$name did not come up in ${secs}s" >&2; return 1
}

if pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "PostgreSQL: running"
else
  echo "PostgreSQL: starting"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  wait_for PostgreSQL 30 pg_isready -q -h 127.0.0.1 -p 5432
fi

if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  echo "Redis: running"
else
  echo "Redis: starting"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis 15 redis-cli -h 127.0.0.1 -p 6379 ping
fi

# Command-line clients the tests read brokers with (kcat, mosquitto_sub/_pub) and the broker binary
# for test/brokers.ts's private Mosquittos, from Debian when missing.
missing=()
command -v kcat >/dev/null || missing+=(kcat)
command -v mosquitto_sub >/dev/null || missing+=(mosquitto-clients)
command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
# The browser the dashboard tests drive (playwright-core with Debian's Chromium).
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" || { apt-get update -q && apt-get install -y -q "${missing[@]}"; }
fi

if (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  echo "Mosquitto: running"
elif command -v mosquitto >/dev/null; then
  echo "Mosquitto: starting"
  mosquitto -d -c /etc/mosquitto/mosquitto.conf
  wait_for Mosquitto 15 bash -c '(exec 3<>/dev/tcp/127.0.0.1/1883)'
else
  echo "Mosquitto: not installed" >&2
  exit 1
fi

bash scripts/keycloak.sh

# The shared Kafka broker (KRaft, ports 19092-19097) from Maven Central: scripts/kafka.sh.
echo "Kafka: $(bash scripts/kafka.sh start)"

#!/usr/bin/env bash
# Starts what the test suite talks to, when it is not running already: PostgreSQL (5432),
# Redis (6379), Mosquitto (1883), and Keycloak from Maven Central (scripts/keycloak.sh).
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

if (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  echo "Mosquitto: running"
elif command -v mosquitto >/dev/null; then
  echo "Mosquitto: starting"
  mosquitto -d -c /etc/mosquitto/mosquitto.conf
  wait_for Mosquitto 15 bash -c '(exec 3<>/dev/tcp/127.0.0.1/1883)'
else
  echo "Mosquitto: not installed (not needed by the tests yet)"
fi

bash scripts/keycloak.sh

#!/usr/bin/env bash
# What `npm test` needs besides node_modules, brought here where this machine
# allows it (`pretest` and .ci/run run this):
#   - PostgreSQL at TEST_DATABASE_URL (default 127.0.0.1:5432): a Debian
#     cluster of this machine on that port that is down is started.
#   - Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379): on this
#     machine, a redis-server is started on that port if nothing answers.
#   - Chromium at CHROMIUM_PATH (default /usr/bin/chromium): when unset and
#     missing, Debian's chromium is installed with apt-get (as root).
# Each action is one line on stdout; each piece that is missing and cannot be
# brought is one line on stderr, and the exit code is 1. With everything
# present it prints nothing and changes nothing.
set -uo pipefail

DATABASE_URL_FOR_TESTS=${TEST_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/postgres}
REDIS_URL_FOR_TESTS=${TEST_REDIS_URL:-redis://127.0.0.1:6379}
# Where Debian's package puts it (test/scripts/testPrerequisites.test.ts
# names a path that does not exist, to see what happens where it is missing).
DEBIAN_CHROMIUM=${TEST_PREREQUISITES_DEBIAN_CHROMIUM:-/usr/bin/chromium}
CHROMIUM=${CHROMIUM_PATH:-$DEBIAN_CHROMIUM}
START_TIMEOUT_S=30

missing=0
say() { echo "test: $*"; }
lack() {
  echo "test: $*" >&2
  missing=1
}
is_root() { [ "$(id -u)" = 0 ]; }
is_local() { case "$1" in 127.0.0.1 | localhost | ::1 | "[::1]") return 0 ;; *) return 1 ;; esac; }

# host and port of scheme://[user[:password]@]host[:port][/…]; the default port when none is written.
url_host() { [[ $1 =~ ^[a-z]+://([^/@?]*@)?(\[[^]]*\]|[^:/?]*) ]] && echo "${BASH_REMATCH[2]:-127.0.0.1}"; }
url_port() { if [[ $1 =~ ^[a-z]+://([^/@?]*@)?(\[[^]]*\]|[^:/?]*):([0-9]+) ]]; then echo "${BASH_REMATCH[3]}"; else echo "$2"; fi; }

# Polls until the command "$@" succeeds, for at most START_TIMEOUT_S seconds.
wait_for() {
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

postgres_answers() {
  if command -v pg_isready >/dev/null; then
    pg_isready -q -t 2 -d "$DATABASE_URL_FOR_TESTS"
  else
    (exec 2>/dev/null 3<>"/dev/tcp/$(url_host "$DATABASE_URL_FOR_TESTS" | tr -d '[]')/$(url_port "$DATABASE_URL_FOR_TESTS" 5432)")
  fi
}

redis_answers() (
  host=$(url_host "$REDIS_URL_FOR_TESTS" | tr -d '[]')
  port=$(url_port "$REDIS_URL_FOR_TESTS" 6379)
  exec 2>/dev/null 3<>"/dev/tcp/$host/$port" || exit 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || exit 1
  # -NOAUTH also means a Redis is there: the URL's password is the tests' business.
  [[ $reply == +PONG* || $reply == -NOAUTH* ]]
)

prepare_postgres() {
  postgres_answers && return 0
  local host port where cluster
  host=$(url_host "$DATABASE_URL_FOR_TESTS")
  port=$(url_port "$DATABASE_URL_FOR_TESTS" 5432)
  where="$host:$port${TEST_DATABASE_URL:+ (TEST_DATABASE_URL)}"
  if ! is_local "$host"; then
    lack "no PostgreSQL answers at $where: start it, or unset TEST_DATABASE_URL"
    return
  fi
  # The Debian cluster of this machine that listens on that port, if it is down.
  cluster=$(command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | awk -v p="$port" '$3 == p && $4 == "down" { print $1, $2; exit }')
  if [ -z "$cluster" ]; then
    lack "no PostgreSQL answers at $where, and this machine has no stopped Debian cluster on port $port to start: apt-get install postgresql, or set TEST_DATABASE_URL to a running server"
    return
  fi
  if ! is_root; then
    lack "PostgreSQL $(echo "$cluster" | tr ' ' /) (port $port) is down, and starting it needs root: sudo pg_ctlcluster ${cluster} start, or set TEST_DATABASE_URL"
    return
  fi
  say "starting PostgreSQL $(echo "$cluster" | tr ' ' /) on port $port…"
  local out
  # shellcheck disable=SC2086 # version and name
  if ! out=$(pg_ctlcluster --skip-systemctl-redirect $cluster start 2>&1); then
    lack "PostgreSQL $(echo "$cluster" | tr ' ' /) did not start: $(echo "$out" | tail -1)"
    return
  fi
  wait_for postgres_answers || lack "PostgreSQL $(echo "$cluster" | tr ' ' /) started but does not answer at $where after ${START_TIMEOUT_S} s"
}

prepare_redis() {
  redis_answers && return 0
  local host port where
  host=$(url_host "$REDIS_URL_FOR_TESTS")
  port=$(url_port "$REDIS_URL_FOR_TESTS" 6379)
  where="$host:$port${TEST_REDIS_URL:+ (TEST_REDIS_URL)}"
  if ! is_local "$host"; then
    lack "no Redis answers at $where: start it, or unset TEST_REDIS_URL"
    return
  fi
  if ! command -v redis-server >/dev/null; then
    lack "no Redis answers at $where, and there is no redis-server to start: apt-get install redis-server, or set TEST_REDIS_URL"
    return
  fi
  say "starting Redis on 127.0.0.1:$port…"
  local out
  if ! out=$(redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$port" --save "" --appendonly no 2>&1); then
    lack "redis-server did not start on port $port: $(echo "$out" | tail -1)"
    return
  fi
  wait_for redis_answers || lack "redis-server started but does not answer at $where after ${START_TIMEOUT_S} s"
}

prepare_chromium() {
  [ -x "$CHROMIUM" ] && return 0
  if [ -n "${CHROMIUM_PATH:-}" ]; then
    lack "no Chromium at $CHROMIUM (CHROMIUM_PATH): point it at a Chromium, or unset it to use Debian's"
    return
  fi
  if ! command -v apt-get >/dev/null; then
    lack "no Chromium at $CHROMIUM, and no apt-get to install Debian's: install Chromium and set CHROMIUM_PATH to it"
    return
  fi
  if ! is_root; then
    lack "no Chromium at $CHROMIUM, and installing it needs root: sudo apt-get install chromium, or set CHROMIUM_PATH"
    return
  fi
  say "installing Debian's chromium (apt-get install chromium)…"
  local log
  log=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends chromium; } >"$log" 2>&1; then
    lack "apt-get install chromium failed: $(grep -v '^\s*$' "$log" | tail -1)"
  elif [ ! -x "$CHROMIUM" ]; then
    lack "apt-get installed chromium, but there is no $CHROMIUM: set CHROMIUM_PATH"
  fi
  rm -f "$log"
}

prepare_postgres
prepare_redis
prepare_chromium
exit "$missing"

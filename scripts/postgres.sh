#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the gateway's PostgreSQL store (docs/scaling.md), from Debian's
# package: nothing of the machine's own clusters is used or changed.
#
#   scripts/postgres.sh install
#       installs Debian's `postgresql` when its server binaries are missing (idempotent; scripts/test-deps.sh runs it).
#   scripts/postgres.sh start [--owner PID] [--port PORT] [--tls CERT KEY [--client-ca CA]]
#       makes a cluster in a new temporary folder, starts it on 127.0.0.1 (on PORT, else a free port) and prints two
#       lines: the folder, then the URL of an empty database `remit` (user `remit`, password in the folder's
#       `password` file, also in the URL). With `--owner PID`, a watcher stops the server and removes the folder
#       when that process ends (a test killed before it could stop it leaves nothing running). With `--tls`, the
#       server also speaks TLS (`ssl = on`) with the certificate chain CERT and the key KEY (PEM files; copied).
#       With `--client-ca`, it also asks clients for a certificate issued by a CA of the PEM file CA (`ssl_ca_file`),
#       and every database but `remit` (the printed URL's, which the tests make their databases through) takes a
#       connection over TCP only over TLS and only with such a certificate naming the user (`hostssl … cert`:
#       clientcert=verify-full, no password); plain TCP to them is rejected.
#   scripts/postgres.sh standby PRIMARY_DIR [--owner PID] [--sync]
#       makes a streaming-replication standby of the server of PRIMARY_DIR (started by `start`): a base backup
#       (pg_basebackup, its WAL streamed) in a new temporary folder, started on 127.0.0.1 on a free port as a hot
#       standby streaming the primary's WAL (`primary_conninfo`; the password in a passfile of the folder), and
#       prints the folder and the URL of its database `remit`, as `start` does. With `--sync`, the primary then
#       waits for the standby at every commit (`synchronous_standby_names = 'remit_standby'`, `synchronous_commit`
#       left `on`: a commit returns once the standby has flushed it), and this waits until the standby is the
#       primary's synchronous one; without, it waits until the standby streams (asynchronous). The standby's folder
#       takes `stop`, `pause`, `resume`, `freeze`, `thaw` and `promote`.
#   scripts/postgres.sh promote DIR
#       promotes the standby of DIR (`pg_ctl promote`; returns once it accepts writes).
#   scripts/postgres.sh certificate DIR CERT KEY
#       replaces the TLS certificate and key of the server of DIR (started with `--tls`) and reloads it: new
#       connections get the new certificate, established ones keep theirs.
#   scripts/postgres.sh stop DIR
#       stops the server of DIR (fast shutdown) and removes DIR.
#   scripts/postgres.sh pause DIR / resume DIR
#       stops the server of DIR and keeps its data / starts it again on the same port (fault tests).
#   scripts/postgres.sh freeze DIR / thaw DIR
#       stops the server's processes (SIGSTOP) without closing a connection, as a host that hangs or a network that
#       drops packets leaves them / lets them go on (SIGCONT) (fault tests).
#
# The server runs as the `postgres` user when this runs as root (initdb refuses root), as the caller otherwise.
set -euo pipefail

bin_dir() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  done
  return 1
}

install() {
  bin_dir >/dev/null && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq postgresql >/dev/null 2>&1 \
    || { $sudo apt-get update -qq && $sudo apt-get install -y -qq postgresql >/dev/null; }
  bin_dir >/dev/null || { echo "postgres.sh: Debian's postgresql installed no initdb" >&2; exit 1; }
}

# Runs a command as the server's user.
as_server() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local owner="" port="" tls_cert="" tls_key="" client_ca=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --tls) tls_cert="$2"; tls_key="$3"; shift 3 ;;
      --client-ca) client_ca="$2"; shift 2 ;;
      *) echo "postgres.sh: unknown option \`$1\`" >&2; exit 2 ;;
    esac
  done
  if [ -n "$client_ca" ] && [ -z "$tls_cert" ]; then
    echo "postgres.sh: --client-ca needs --tls" >&2; exit 2
  fi
  local bin
  bin="$(bin_dir)" || { echo "postgres.sh: no PostgreSQL server: run \`scripts/postgres.sh install\`" >&2; exit 1; }
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/remit-pg-XXXXXX")"
  chmod 755 "$dir"
  local password
  password="$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
  printf '%s\n' "$password" >"$dir/password"
  mkdir "$dir/data"
  [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
  as_server "$bin/initdb" -D "$dir/data" -U remit --pwfile="$dir/password" --auth-local=trust \
    --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; exit 1; }
  # Throwaway: no fsync (the tests kill processes, not the machine), the socket in the folder, loopback only.
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/data'
fsync = off
full_page_writes = off
max_connections = 200
EOF
  if [ -n "$tls_cert" ]; then
    install_certificate "$dir" "$tls_cert" "$tls_key"
    printf "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n" >>"$dir/data/postgresql.conf"
  fi
  if [ -n "$client_ca" ]; then
    [ -r "$client_ca" ] || { echo "postgres.sh: cannot read \`$client_ca\`" >&2; rm -rf "$dir"; exit 1; }
    cp "$client_ca" "$dir/data/root.crt"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir/data/root.crt"; fi
    printf "ssl_ca_file = 'root.crt'\n" >>"$dir/data/postgresql.conf"
    # The first line that matches decides: these come before initdb's own.
    { printf '%s\n' \
        "host      remit  all  127.0.0.1/32  scram-sha-256" \
        "hostssl   all    all  127.0.0.1/32  cert" \
        "hostnossl all    all  127.0.0.1/32  reject"
      cat "$dir/data/pg_hba.conf"; } >"$dir/data/pg_hba.conf.new"
    mv "$dir/data/pg_hba.conf.new" "$dir/data/pg_hba.conf"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir/data/pg_hba.conf"; fi
  fi
  local tries=0 started=""
  while [ $tries -lt 5 ] && [ -z "$started" ]; do
    tries=$((tries + 1))
    [ -n "$port" ] || port="$(free_port)"
    if as_server "$bin/pg_ctl" -D "$dir/data" -o "-p $port" -l "$dir/server.log" -w -t 30 start >/dev/null; then
      started=1
    else
      port=""
    fi
  done
  [ -n "$started" ] || { cat "$dir/server.log" >&2 || true; rm -rf "$dir"; exit 1; }
  echo "$port" >"$dir/port"
  as_server "$bin/psql" -h "$dir/data" -p "$port" -U remit -d postgres -q -c 'CREATE DATABASE remit' >/dev/null
  if [ -n "$owner" ]; then
    # Detached from the caller's session: it outlives the caller to clean up after it.
    setsid bash -c "while kill -0 $owner 2>/dev/null && [ -d '$dir' ]; do sleep 1; done; '$0' stop '$dir'" \
      </dev/null >/dev/null 2>&1 &
  fi
  echo "$dir"
  echo "postgres://remit:$password@127.0.0.1:$port/remit"
}

stop() {
  local dir="${1:?postgres.sh stop DIR}"
  [ -d "$dir/data" ] || { rm -rf "$dir"; return 0; }
  local bin
  bin="$(bin_dir)"
  # A server left frozen by a test that failed would never stop.
  thaw "$dir" 2>/dev/null || true
  as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

# Copies a certificate chain and its key into the cluster of DIR (the key readable by the server's user only, as
# PostgreSQL demands).
install_certificate() {
  local dir="$1" cert="$2" key="$3"
  [ -r "$cert" ] && [ -r "$key" ] || { echo "postgres.sh: cannot read \`$cert\` and \`$key\`" >&2; exit 1; }
  cp "$cert" "$dir/data/server.crt"
  cp "$key" "$dir/data/server.key"
  chmod 600 "$dir/data/server.key"
  [ "$(id -u)" = 0 ] && chown postgres "$dir/data/server.crt" "$dir/data/server.key"
  return 0
}

standby() {
  local primary="${1:?postgres.sh standby PRIMARY_DIR [--owner PID] [--sync]}"
  shift
  local owner="" sync=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner="$2"; shift 2 ;;
      --sync) sync=1; shift ;;
      *) echo "postgres.sh: unknown option \`$1\`" >&2; exit 2 ;;
    esac
  done
  [ -f "$primary/port" ] || { echo "postgres.sh: no server started in \`$primary\`" >&2; exit 1; }
  local bin primary_port password dir port=""
  bin="$(bin_dir)" || { echo "postgres.sh: no PostgreSQL server: run \`scripts/postgres.sh install\`" >&2; exit 1; }
  [ -x "$bin/pg_basebackup" ] || { echo "postgres.sh: no \`$bin/pg_basebackup\` (Debian's postgresql-client)" >&2; exit 1; }
  primary_port="$(cat "$primary/port")"
  password="$(cat "$primary/password")"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/remit-pg-XXXXXX")"
  chmod 755 "$dir"
  printf '%s\n' "$password" >"$dir/password"
  # The replication connection's password, in a passfile rather than on a command line or in the configuration.
  printf '127.0.0.1:%s:*:remit:%s\n' "$primary_port" "$password" >"$dir/pgpass"
  chmod 600 "$dir/pgpass"
  [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
  as_server env PGPASSFILE="$dir/pgpass" "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U remit \
    -D "$dir/data" -X stream -c fast >"$dir/basebackup.log" 2>&1 \
    || { cat "$dir/basebackup.log" >&2; rm -rf "$dir"; exit 1; }
  # The primary's configuration came with the backup: the socket in this folder, the WAL from the primary.
  {
    echo "unix_socket_directories = '$dir/data'"
    echo "primary_conninfo = 'host=127.0.0.1 port=$primary_port user=remit passfile=$dir/pgpass application_name=remit_standby'"
    echo "hot_standby = on"
  } >>"$dir/data/postgresql.conf"
  as_server touch "$dir/data/standby.signal"
  local tries=0 started=""
  while [ $tries -lt 5 ] && [ -z "$started" ]; do
    tries=$((tries + 1))
    port="$(free_port)"
    if as_server "$bin/pg_ctl" -D "$dir/data" -o "-p $port" -l "$dir/server.log" -w -t 30 start >/dev/null; then
      started=1
    fi
  done
  [ -n "$started" ] || { cat "$dir/server.log" >&2 || true; rm -rf "$dir"; exit 1; }
  echo "$port" >"$dir/port"
  if [ -n "$owner" ]; then
    setsid bash -c "while kill -0 $owner 2>/dev/null && [ -d '$dir' ]; do sleep 1; done; '$0' stop '$dir'" \
      </dev/null >/dev/null 2>&1 &
  fi
  local want="streaming|async"
  if [ -n "$sync" ]; then
    want="streaming|sync"
    printf "synchronous_standby_names = 'remit_standby'\n" >>"$primary/data/postgresql.conf"
    as_server "$bin/pg_ctl" -D "$primary/data" reload >/dev/null
  fi
  # Streaming (and with --sync, the synchronous standby) before this returns.
  local state="" waited=0
  while [ "$state" != "$want" ]; do
    state="$(as_server "$bin/psql" -h "$primary/data" -p "$primary_port" -U remit -d postgres -Atq \
      -c "SELECT state || '|' || sync_state FROM pg_stat_replication WHERE application_name = 'remit_standby'" \
      2>/dev/null)" || true
    [ "$state" = "$want" ] && break
    waited=$((waited + 1))
    if [ $waited -ge 300 ]; then
      echo "postgres.sh: the standby is \`$state\`, not \`$want\`, after 30 s" >&2
      cat "$dir/server.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
  echo "$dir"
  echo "postgres://remit:$password@127.0.0.1:$port/remit"
}

promote() {
  local dir="${1:?postgres.sh promote DIR}"
  as_server "$(bin_dir)/pg_ctl" -D "$dir/data" -w -t 30 promote >/dev/null
}

certificate() {
  local dir="${1:?postgres.sh certificate DIR CERT KEY}"
  install_certificate "$dir" "${2:?postgres.sh certificate DIR CERT KEY}" "${3:?postgres.sh certificate DIR CERT KEY}"
  as_server "$(bin_dir)/pg_ctl" -D "$dir/data" reload >/dev/null
}

pause() {
  local dir="${1:?postgres.sh pause DIR}"
  as_server "$(bin_dir)/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null
}

# The server's processes: the postmaster (the first line of postmaster.pid) and its children.
server_pids() {
  local dir="$1" postmaster
  postmaster="$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)" || return 0
  [ -n "$postmaster" ] || return 0
  echo "$postmaster"
  pgrep -P "$postmaster" || true
}

freeze() {
  local dir="${1:?postgres.sh freeze DIR}"
  local pids
  pids="$(server_pids "$dir")"
  [ -n "$pids" ] || { echo "postgres.sh: no server runs in $dir" >&2; exit 1; }
  # shellcheck disable=SC2086 # one pid a word
  kill -STOP $pids
}

thaw() {
  local dir="${1:?postgres.sh thaw DIR}"
  local pids
  pids="$(server_pids "$dir")"
  # shellcheck disable=SC2086 # one pid a word
  [ -z "$pids" ] || kill -CONT $pids
}

resume() {
  local dir="${1:?postgres.sh resume DIR}"
  as_server "$(bin_dir)/pg_ctl" -D "$dir/data" -o "-p $(cat "$dir/port")" -l "$dir/server.log" -w -t 30 start \
    >/dev/null
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) stop "${2:-}" ;;
  pause) pause "${2:-}" ;;
  freeze) freeze "${2:-}" ;;
  thaw) thaw "${2:-}" ;;
  standby) shift; standby "$@" ;;
  promote) promote "${2:-}" ;;
  certificate) certificate "${2:-}" "${3:-}" "${4:-}" ;;
  resume) resume "${2:-}" ;;
  *) echo "usage: scripts/postgres.sh install | start [--owner PID] [--port PORT] [--tls CERT KEY [--client-ca CA]] | standby PRIMARY_DIR [--owner PID] [--sync] | promote DIR | stop DIR | pause DIR | resume DIR | freeze DIR | thaw DIR | certificate DIR CERT KEY" >&2
     exit 2 ;;
esac

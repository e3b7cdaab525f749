#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the ladder's storage tests and prints how to reach it.
#
#   bash .ci/postgres.sh          # prints: export SCOUT_TEST_POSTGRES_URL=postgresql+psycopg://...
#   bash .ci/postgres.sh --url    # prints the URL alone (for $(...) in the Makefile)
#
# Idempotent: a cluster already answering is reused, a stopped one is started, a missing one is
# created. Installs Debian's postgresql package when no server is installed (needs root). The
# cluster lives in a scratch directory ($PGDATA_DIR, default /tmp/scout-arena-pg), listens on
# 127.0.0.1 only, and runs with fsync off: it holds test data and nothing else.
# Everything but the final line goes to stderr, so that $(...) captures only the URL.
set -euo pipefail

PORT="${SCOUT_TEST_POSTGRES_PORT:-55432}"
DATA="${PGDATA_DIR:-/tmp/scout-arena-pg}"
SOCKET_DIR="${SCOUT_TEST_POSTGRES_SOCKET_DIR:-/tmp}"
ROLE=scout
PASSWORD=scout
DATABASE=scout_test
URL="postgresql+psycopg://${ROLE}:${PASSWORD}@127.0.0.1:${PORT}/${DATABASE}"

mode=export
case "${1:-}" in
    --url) mode=url ;;
    "") ;;
    *) echo "usage: $0 [--url]" >&2; exit 2 ;;
esac

say() { echo "postgres.sh: $*" >&2; }

emit() {
    if [[ $mode == url ]]; then echo "$URL"; else echo "export SCOUT_TEST_POSTGRES_URL=$URL"; fi
}

# One caller at a time (make -j, two terminals): the second waits and then finds it running.
LOCK="/tmp/scout-arena-pg-${PORT}.lock"
exec 9>>"$LOCK"
chmod 0666 "$LOCK" 2>/dev/null || true
flock 9

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [[ -n $dir && -x $dir/pg_ctl ]] && echo "$dir"
}

answering() {
    # The URL's own role, password and database: if this works, the tests will too.
    [[ -n ${BIN:-} ]] || return 1
    PGPASSWORD="$PASSWORD" PGCONNECT_TIMEOUT=3 "$BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" \
        -U "$ROLE" -d "$DATABASE" -tAc 'SELECT 1' >/dev/null 2>&1
}

BIN=$(pg_bin || true)
if answering; then
    emit
    exit 0
fi

if [[ -z $BIN ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        say "no PostgreSQL server under /usr/lib/postgresql and not root: install the" \
            "'postgresql' package, or set SCOUT_TEST_POSTGRES_URL to a server you have"
        exit 1
    fi
    say "installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql >&2
    BIN=$(pg_bin)
fi

# PostgreSQL refuses to run as root: as root the cluster belongs to the 'postgres' user the
# package creates; anybody else owns their own cluster.
if [[ $(id -u) -eq 0 ]]; then
    OWNER=postgres
    as_owner() { runuser -u postgres -- "$@"; }
else
    OWNER=$(id -un)
    as_owner() { "$@"; }
fi

version=$("$BIN/pg_ctl" --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')
if [[ -f $DATA/PG_VERSION && $(cat "$DATA/PG_VERSION") != "$version" ]]; then
    say "$DATA holds a PostgreSQL $(cat "$DATA/PG_VERSION") cluster; making a fresh $version one"
    rm -rf "$DATA"
fi

if [[ ! -f $DATA/PG_VERSION ]]; then
    say "creating a cluster in $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA"
    chown "$OWNER" "$DATA"
    chmod 700 "$DATA"
    # Local (socket) connections of the superuser are trusted; TCP needs the password.
    as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust \
        --auth-host=scram-sha-256 -E UTF8 --locale=C >&2
fi

# A postmaster.pid left by a killed server whose pid now belongs to some other process would
# make pg_ctl think the server is up; drop it when that pid is not a postgres.
if [[ -f $DATA/postmaster.pid ]]; then
    pid=$(head -n 1 "$DATA/postmaster.pid")
    if ! [[ -r /proc/$pid/comm && $(cat "/proc/$pid/comm") == postgres* ]]; then
        say "removing the stale $DATA/postmaster.pid"
        rm -f "$DATA/postmaster.pid"
    fi
fi

if ! as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    say "starting PostgreSQL $version on 127.0.0.1:$PORT"
    # 9>&-: the server must not inherit the lock, or it would hold it for its whole life.
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -p $PORT -k $SOCKET_DIR -c fsync=off \
         -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        >&2 9>&- || {
        say "the server did not start; its log:"
        tail -n 30 "$DATA/server.log" >&2 || true
        exit 1
    }
fi

as_owner "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKET_DIR" -p "$PORT" -U postgres \
    -d postgres >&2 <<SQL
SELECT format('CREATE ROLE %I LOGIN', '$ROLE')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE')\gexec
ALTER ROLE $ROLE WITH LOGIN PASSWORD '$PASSWORD';
SELECT format('CREATE DATABASE %I OWNER %I', '$DATABASE', '$ROLE')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DATABASE')\gexec
SQL

if ! answering; then
    say "PostgreSQL is up but $URL does not answer"
    exit 1
fi
emit

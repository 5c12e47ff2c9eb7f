#!/bin/sh
# Run once by the postgres image when it creates the database (compose.yaml): the runtime
# role the api and the worker connect as. `posture-api migrate --runtime-role posture_app`
# gives it its privileges. The password is hex (openssl rand -hex 24): nothing to quote.
set -eu
case "$PG_APP_PASSWORD" in
    *[!0-9a-f]*|"") echo "PG_APP_PASSWORD must be hex (openssl rand -hex 24)" >&2; exit 1 ;;
esac
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -c "CREATE ROLE posture_app LOGIN PASSWORD '$PG_APP_PASSWORD'"

#!/bin/sh
# Run once by compose.yaml's citus-init, on the coordinator's primary: waits until Patroni
# has registered both worker groups, then creates posture's roles (the coordinator creates
# them on every node) and gives Citus their passwords for its connections between nodes.
# `posture-api migrate --runtime-role posture_app` then grants the runtime role its
# privileges. The passwords are hex (openssl rand -hex 24): nothing to quote.
set -eu
for password in "$PG_OWNER_PASSWORD" "$PG_APP_PASSWORD"; do
    case "$password" in
        *[!0-9a-f]*|"") echo "PG_OWNER_PASSWORD and PG_APP_PASSWORD must be hex (openssl rand -hex 24)" >&2; exit 1 ;;
    esac
done
until [ "$(psql -tAc "SELECT count(*) FROM pg_dist_node WHERE groupid > 0 AND noderole = 'primary'" 2>/dev/null)" = 2 ]; do
    echo "waiting for Patroni to register both worker groups"
    sleep 2
done
psql -v ON_ERROR_STOP=1 <<SQL
SELECT 'CREATE ROLE posture LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'posture')
\gexec
SELECT 'CREATE ROLE posture_app LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'posture_app')
\gexec
ALTER ROLE posture PASSWORD '$PG_OWNER_PASSWORD';
ALTER ROLE posture_app PASSWORD '$PG_APP_PASSWORD';
ALTER DATABASE posture OWNER TO posture;
INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES
    (0, 'posture', 'password=$PG_OWNER_PASSWORD'),
    (0, 'posture_app', 'password=$PG_APP_PASSWORD')
ON CONFLICT (nodeid, rolename) DO UPDATE SET authinfo = excluded.authinfo;
SQL
# The workers connect to each other too (a statement entering through one reaches another's
# shards): each keeps its own pg_dist_authinfo.
psql -v ON_ERROR_STOP=1 <<SQL
SELECT success, result FROM run_command_on_workers(\$cmd\$
    INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES
        (0, 'posture', 'password=$PG_OWNER_PASSWORD'),
        (0, 'posture_app', 'password=$PG_APP_PASSWORD')
    ON CONFLICT (nodeid, rolename) DO UPDATE SET authinfo = excluded.authinfo
\$cmd\$);
SQL

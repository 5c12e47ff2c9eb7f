-- The runtime role (posture-api serve, posture-worker) does not own the tables, so it cannot
-- ANALYZE them itself (PostgreSQL 15 has no MAINTAIN privilege). After a pass, the planner
-- statistics of the tables a pass grows are refreshed through this function, which runs as
-- its owner (the migrating role) and analyzes only the listed tables' `customer_id` column.
CREATE FUNCTION posture_analyze(table_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF table_name NOT IN ('findings', 'identities') THEN
        RAISE EXCEPTION 'posture_analyze: % is not a table posture refreshes', table_name;
    END IF;
    EXECUTE format('ANALYZE %I (customer_id)', table_name);
END;
$$;
REVOKE EXECUTE ON FUNCTION posture_analyze(text) FROM PUBLIC;

-- Every id posture makes is a UUID of version 7 (RFC 9562: Unix milliseconds, then random
-- bits), so ids sort by creation. The Rust side uses `Uuid::now_v7`; the fan-out queues
-- deliveries with INSERT ... SELECT, and PostgreSQL 15 has no uuidv7(): this function makes
-- one from gen_random_uuid() (a version 4) by writing the time over its first 48 bits and
-- setting the version nibble from 4 to 7 (bits 52 and 53; the variant bits stay).
CREATE FUNCTION posture_uuid_v7() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp())
                                                     * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

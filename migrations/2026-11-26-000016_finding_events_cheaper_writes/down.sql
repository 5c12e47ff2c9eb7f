CREATE OR REPLACE FUNCTION posture_event_id(at timestamptz, seq bigint) RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (lpad(to_hex((floor(extract(epoch FROM at) * 1000)::bigint << 16)
                        | 28672 | ((seq >> 28) & 4095)), 16, '0')
         || lpad(to_hex((-9223372036854775808)::bigint | ((seq & 268435455) << 34)
                        | floor(random() * 17179869184)::bigint), 16, '0'))::uuid
$$;
ALTER TABLE finding_events ADD CONSTRAINT finding_events_customer_id_fkey
    FOREIGN KEY (customer_id) REFERENCES customers (id);
DROP FUNCTION posture_event_floor(timestamptz);
ALTER TABLE finding_events ADD CONSTRAINT finding_events_customer_id_seq_key UNIQUE (customer_id, seq);
CREATE INDEX finding_events_age_idx ON finding_events (customer_id, created_at);
CREATE INDEX finding_events_retention_idx ON finding_events (created_at);

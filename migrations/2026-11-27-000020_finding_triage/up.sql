-- Triage: the customer's own decision about a finding, written with a `write:findings` key
-- (`PATCH /api/v1/findings/{id}`) and kept apart from the analyzer's columns, so a pass
-- that reports the finding again leaves it. Outside a transaction (metadata.toml),
-- statement by statement, each safe to run again: the new columns have constant defaults
-- (no rewrite of findings), the checks are added NOT VALID (every stored row is
-- `untriaged`; new rows are checked).
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_state text NOT NULL DEFAULT 'untriaged';
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_reason text;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_comment text;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_expires_at timestamptz;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_updated_at timestamptz;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_key_id uuid;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_key_name text;
ALTER TABLE findings DROP CONSTRAINT IF EXISTS findings_triage_check;
ALTER TABLE findings ADD CONSTRAINT findings_triage_check CHECK (
    triage_state IN ('untriaged', 'acknowledged', 'dismissed', 'risk_accepted')
    AND (triage_reason IS NULL
         OR triage_reason IN ('false_positive', 'not_applicable', 'compensating_control',
                              'duplicate', 'wont_fix', 'other'))
    AND length(triage_comment) <= 8000) NOT VALID;

-- Every change of a finding's triage, newest first by id (time-ordered UUIDs), for
-- `GET /api/v1/findings/{id}/triage`. Appended only. On Citus, `migrate` distributes it by
-- customer with the rest after the migrations (`posture_distribute()`): on a fresh
-- database nothing is distributed yet when this runs.
CREATE TABLE IF NOT EXISTS finding_triage_history (
    customer_id  uuid NOT NULL,
    finding_id   text NOT NULL,
    id           uuid NOT NULL,
    created_at   timestamptz NOT NULL,
    -- The key that wrote it (id and name as they were); both NULL when a mark expired.
    key_id       uuid,
    key_name     text,
    from_state   text NOT NULL,
    from_reason  text,
    to_state     text NOT NULL,
    to_reason    text,
    comment      text,
    expires_at   timestamptz,
    PRIMARY KEY (customer_id, id)
);
-- A finding's history, newest first.
CREATE INDEX IF NOT EXISTS finding_triage_history_finding_idx
    ON finding_triage_history (customer_id, finding_id, id);

-- Only `write:findings` is new; existing keys keep their scopes (they are immutable).
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check CHECK (
    cardinality(scopes) > 0
    AND scopes <@ ARRAY['read:identities', 'read:findings', 'read:roles', 'read:upr',
                        'manage:webhooks', 'provision:scim', 'write:findings']::text[]) NOT VALID;

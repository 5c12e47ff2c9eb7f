-- The console names a customer's identity provider as its operator chose ("Contoso Entra
-- ID"), lists the customer's live sessions and lets an admin end other admins' sessions.

-- What the sign-in button calls the provider; NULL: the issuer's host.
ALTER TABLE console_sso ADD COLUMN display_name text
    CHECK (length(display_name) BETWEEN 1 AND 100);

-- A session's public id, for ending it from the sessions page: the page never shows a
-- token, nor its hash. Keyed by it, like every customer table with an id; the token's hash
-- stays unique, the way a presented cookie finds its session.
ALTER TABLE console_sessions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE console_sessions
    DROP CONSTRAINT console_sessions_pkey,
    ADD PRIMARY KEY (customer_id, id);
CREATE UNIQUE INDEX console_sessions_token_idx ON console_sessions (customer_id, token_hash);

-- An admin ending other admins' sessions is audited.
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended'));

-- The keys page reads a customer's keys newest first, a page at a time.
CREATE INDEX api_keys_customer_page_idx ON api_keys (customer_id, created_at DESC, id DESC);
DROP INDEX api_keys_customer_idx;

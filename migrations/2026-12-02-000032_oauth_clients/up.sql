-- OAuth 2.0 clients (docs/auth.md). A client is a credential like a key: bound to one
-- customer and fixed scopes at issue, revocable, counted among the customer's active keys,
-- its last use recorded. It is a row of `api_keys` of kind 'client', with no hash: it is
-- never presented itself. Its access tokens are found by the row's id, so revoking the row
-- ends them through the keys' own notification (migration 000004).
ALTER TABLE api_keys
    ADD COLUMN kind text NOT NULL DEFAULT 'key' CHECK (kind IN ('key', 'client')),
    ALTER COLUMN key_hash DROP NOT NULL,
    ADD CONSTRAINT api_keys_kind_hash_check CHECK ((kind = 'key') = (key_hash IS NOT NULL));

CREATE OR REPLACE FUNCTION api_keys_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.scopes IS DISTINCT FROM OLD.scopes
       OR NEW.key_hash IS DISTINCT FROM OLD.key_hash
       OR NEW.customer_id IS DISTINCT FROM OLD.customer_id
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
       OR NEW.created_by IS DISTINCT FROM OLD.created_by
       OR NEW.kind IS DISTINCT FROM OLD.kind THEN
        RAISE EXCEPTION 'api key % is immutable apart from revocation', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;

-- How a client proves who it is at the token endpoint: secrets (their SHA-256) and public
-- keys (`private_key_jwt`: a JWK of the public members, bound to one algorithm). A rotation
-- adds one and sets when the others lapse. Beside `api_keys` on one node (no customer_id:
-- found by the client's id before its customer is known).
CREATE TABLE client_credentials (
    id           uuid PRIMARY KEY,
    client       uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('secret', 'public_key')),
    -- "pcs_" and 6 characters of a secret, or the key's RFC 7638 thumbprint.
    label        text NOT NULL CHECK (length(label) BETWEEN 1 AND 64),
    secret_hash  bytea UNIQUE CHECK (length(secret_hash) = 32),
    algorithm    text CHECK (algorithm IN ('RS256', 'ES256')),
    public_key   jsonb CHECK (length(public_key::text) <= 4096),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    CHECK ((kind = 'secret') = (secret_hash IS NOT NULL)),
    CHECK ((kind = 'public_key') = (algorithm IS NOT NULL AND public_key IS NOT NULL))
);
CREATE INDEX client_credentials_client_idx ON client_credentials (client, created_at);

-- Client assertions used (their `jti`), kept until they expire: a replay is refused,
-- whichever instance sees it. Expired ones of a client are deleted when it next asks.
CREATE TABLE client_assertions (
    client      uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    jti         text NOT NULL CHECK (length(jti) BETWEEN 1 AND 256),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (client, jti)
);
-- The client's lapsed ones, found without reading the rest.
CREATE INDEX client_assertions_lapse_idx ON client_assertions (client, expires_at);

ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended',
                          'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                          'scim.group.created', 'scim.group.updated', 'scim.group.deleted',
                          'client.issued', 'client.rotated', 'client.revoked')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked') OR action LIKE 'scim.%'
                OR action LIKE 'client.%')
               = (key_id IS NOT NULL AND key_name IS NOT NULL AND key_prefix IS NOT NULL));

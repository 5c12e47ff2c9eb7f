-- Every change SCIM makes is a line of the customer's audit log, by the key that made it:
-- the actor kind `key` (its id and name as the actor's subject and name), the key named on
-- the line, what changed in `detail`.
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_actor_kind_check,
    ADD CONSTRAINT console_audit_actor_kind_check
        CHECK (actor_kind IN ('admin', 'operator', 'key')),
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended',
                          'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                          'scim.group.created', 'scim.group.updated', 'scim.group.deleted')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked') OR action LIKE 'scim.%')
               = (key_id IS NOT NULL AND key_name IS NOT NULL AND key_prefix IS NOT NULL));

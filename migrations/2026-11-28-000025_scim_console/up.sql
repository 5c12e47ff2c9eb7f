-- Provisioning required for a customer's console (docs/scim.md, "Requiring provisioning"):
-- only an active SCIM-provisioned user whose `userName` equals the ID token's
-- `provisioning_claim` (case-insensitively) may sign in, and admins are the members of the
-- SCIM group named `admin_group`; the admin rule is then not used. Both NULL: not required.
ALTER TABLE console_sso
    ADD COLUMN provisioning_claim text
        CONSTRAINT console_sso_provisioning_claim_check
        CHECK (length(provisioning_claim) BETWEEN 1 AND 200),
    ADD COLUMN admin_group text
        CONSTRAINT console_sso_admin_group_check CHECK (length(admin_group) BETWEEN 1 AND 256),
    ADD CONSTRAINT console_sso_provisioning_check
        CHECK ((provisioning_claim IS NULL) = (admin_group IS NULL));

-- The provisioned user a session was admitted as: SCIM writes end the live sessions whose
-- user is no longer active, provisioned or a member of the admin group, in their own
-- transaction. NULL: admitted by the admin rule.
ALTER TABLE console_sessions ADD COLUMN scim_user_id uuid;
CREATE INDEX console_sessions_scim_user_idx ON console_sessions (customer_id, scim_user_id)
    WHERE scim_user_id IS NOT NULL AND ended_at IS NULL;

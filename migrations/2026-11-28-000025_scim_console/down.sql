DROP INDEX console_sessions_scim_user_idx;
ALTER TABLE console_sessions DROP COLUMN scim_user_id;
ALTER TABLE console_sso
    DROP CONSTRAINT console_sso_provisioning_check,
    DROP COLUMN admin_group,
    DROP COLUMN provisioning_claim;

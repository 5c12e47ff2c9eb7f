-- The privileges of the runtime role that `posture-api serve`, `posture-worker` and the
-- operator commands other than `migrate` connect as (docs/operations.md, "Database roles").
-- Applied by `posture-api migrate --runtime-role NAME` after the migrations, in the
-- migration's transaction, by the role that owns the tables. `{role}` is a validated plain
-- identifier. Idempotent: everything is revoked first, so a grant this file drops is gone.
--
-- What the runtime role cannot do, by construction: own or alter anything (no DDL, no
-- triggers to drop or disable), TRUNCATE, create objects in the schema, update a column not
-- listed here (a key's hash, scopes or customer; a pass's counts; an audit line), delete
-- from tables it only appends to (the audit log but its lines older than 30 days, which the
-- retention sweep deletes: its trigger refuses any younger).

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role};
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM {role};
REVOKE ALL ON SCHEMA public FROM {role};
GRANT USAGE ON SCHEMA public TO {role};
DO $$ BEGIN
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM {role}', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO {role}', current_database());
END $$;

-- Reads: every table of the schema (readiness reads the migration table).
GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};

-- Customers and keys (operator commands, the console): created, never deleted; a key is
-- revoked and its last use recorded, nothing else changes.
GRANT INSERT ON customers, api_keys, console_audit TO {role};
-- Written by the previous release's passes during a rollout (this one uses customer_sync);
-- goes with the column in a later release.
GRANT UPDATE (synced_through) ON customers TO {role};
GRANT UPDATE (revoked_at, last_used_at, last_used_from, last_used_user_agent, allow_from)
    ON api_keys TO {role};
-- The customer's inactivity rule, set by its admins (migration 000033).
GRANT UPDATE (inactivity_days) ON customers TO {role};
-- The addresses each credential was used from, and the audit log's retention (a line younger
-- than 30 days cannot be deleted, whoever asks: the table's trigger).
GRANT INSERT, DELETE ON credential_addresses TO {role};
GRANT DELETE ON console_audit TO {role};
-- OAuth clients' credentials (a rotation sets when the old ones lapse) and the assertions
-- they used (migration 000032).
GRANT INSERT ON client_credentials TO {role};
GRANT UPDATE (expires_at) ON client_credentials TO {role};
GRANT INSERT, DELETE ON client_assertions TO {role};

-- Tenants: connected (and registered to their customer, for good) and renamed.
GRANT INSERT ON tenants, cloud_tenant_owners TO {role};
GRANT UPDATE (display_name, primary_domain) ON tenants TO {role};

-- An analyzer pass (ingest): appends the pass, upserts the data, replaces a customer's
-- totals and an identity's role assignments.
-- A pass locks its customer's row of customer_sync and records its bound there.
GRANT INSERT ON customer_sync TO {role};
GRANT UPDATE (synced_through) ON customer_sync TO {role};
GRANT INSERT ON analyzer_passes, identities, findings, role_recommendations, upr_scores,
    upr_latest, role_assignments, finding_totals, identity_totals TO {role};
GRANT DELETE ON role_assignments, finding_totals, identity_totals TO {role};
GRANT UPDATE (cloud_tenant_id, kind, display_name, principal_name, last_seen_at, modified_at)
    ON identities TO {role};
GRANT UPDATE (cloud_tenant_id, finding_type, severity, status, title, description, identity_id,
    detected_at, updated_at, last_pass_id, modified_at) ON findings TO {role};
-- Triage (`write:findings`): a finding's mark and its history, appended only.
GRANT UPDATE (triage_state, triage_reason, triage_comment, triage_expires_at, triage_updated_at,
    triage_key_id, triage_key_name, triage_change_id) ON findings TO {role};
-- A finding keeps its newest 100 history records: the older ones are deleted, and the
-- comments (kept once per write) no finding or record names any more (migration 000030).
GRANT INSERT, DELETE ON finding_triage_history, triage_changes TO {role};
-- `Idempotency-Key`: claimed, answered, freed and forgotten.
GRANT INSERT, DELETE ON idempotency_keys TO {role};
GRANT UPDATE (fingerprint, claim, running_until, kept_until, status, headers, body_key_id, body_nonce,
    body) ON idempotency_keys TO {role};
-- SCIM (`provision:scim`): users and groups created, changed and deleted by the identity
-- provider; a group's members added and removed.
GRANT INSERT, DELETE ON scim_users, scim_groups, scim_group_members TO {role};
GRANT UPDATE (user_name, user_name_key, external_id, display_name, active, attributes, version,
    updated_at) ON scim_users TO {role};
GRANT UPDATE (display_name, display_name_key, external_id, version, updated_at)
    ON scim_groups TO {role};
GRANT UPDATE (cloud_tenant_id, identity_id, current_roles, recommended_role_name,
    recommended_actions, removed_actions, updated_at, modified_at)
    ON role_recommendations TO {role};
GRANT UPDATE (cloud_tenant_id, score, factors, recorded_at, pass_id) ON upr_scores TO {role};
GRANT UPDATE (cloud_tenant_id, score, factors, recorded_at) ON upr_latest TO {role};
-- The data version a tenant or subscription change bumps (a trigger, run as the writer).
GRANT INSERT ON customer_data_versions TO {role};
GRANT UPDATE (version) ON customer_data_versions TO {role};
-- Planner statistics after a pass, through the owner's function (migration 000009).
GRANT EXECUTE ON FUNCTION posture_analyze(text) TO {role};
-- ... of one customer, on the node of its shard with Citus (migration 000017).
GRANT EXECUTE ON FUNCTION posture_analyze(uuid, text) TO {role};
-- Delivery ids of the fan-out (migration 000011).
GRANT EXECUTE ON FUNCTION posture_uuid_v7() TO {role};
GRANT EXECUTE ON FUNCTION posture_event_id(timestamptz, bigint) TO {role};

-- Webhook subscriptions: created, changed, paused and disabled, their secrets rotated and
-- resealed; never deleted (a deleted subscription is deactivated).
GRANT INSERT ON webhook_subscriptions TO {role};
GRANT UPDATE (name, webhook_url, event_types, secret_key_id, secret_nonce, secret_ciphertext,
    active, deactivated_at, previous_secret_key_id, previous_secret_nonce,
    previous_secret_ciphertext, previous_secret_expires_at, paused_at, disabled_at,
    disabled_reason, failing_since, version) ON webhook_subscriptions TO {role};

-- The outbox: deliveries and attempts are written, leased, retried and finally deleted by
-- the retention sweep.
GRANT INSERT, DELETE ON webhook_deliveries, webhook_attempts TO {role};
GRANT UPDATE (body, status, attempts, next_attempt_at, lease_until, leased_by, delivered_at,
    last_error, trigger, schedule_start, last_attempt_at, last_status_code)
    ON webhook_deliveries TO {role};
-- (The delivery log's totals are written by the deliveries' triggers, which run as the
-- owner: migration 000027. The runtime role only reads them.)
-- Each subscription's moving average latency, written with its attempts (migration 000028).
GRANT INSERT ON webhook_latency TO {role};
GRANT UPDATE (latency_ms, updated_at) ON webhook_latency TO {role};
-- The bodies deliveries share, kept by the first attempt of a chunk and deleted by the
-- retention sweep (migration 000029).
GRANT INSERT, DELETE ON webhook_bodies TO {role};

-- The console: single sign-on settings (replaced whole or removed), sign-ins and sessions.
GRANT INSERT, DELETE ON console_sso, console_sign_ins, console_sessions TO {role};
GRANT UPDATE (issuer, client_id, secret_key_id, secret_nonce, secret_ciphertext, admin_claim,
    admin_values, admin_subjects, updated_at, display_name, provisioning_claim, admin_group)
    ON console_sso TO {role};
GRANT UPDATE (last_seen_at, ended_at) ON console_sessions TO {role};

-- The events feed: written by passes, read by the API, the oldest deleted by workers.
GRANT INSERT, DELETE ON finding_events TO {role};

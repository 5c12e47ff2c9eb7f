//! Diesel's view of the tables in `migrations/`, generated from the migrated schema by
//! `cargo xtask schema` (do not edit: a test fails when it differs from the migrations).

diesel::table! {
    customers (id) {
        id -> Uuid,
        name -> Text,
        created_at -> Timestamptz,
        synced_through -> Nullable<Timestamptz>,
        inactivity_days -> Nullable<Integer>,
    }
}

diesel::table! {
    tenants (customer_id, cloud_tenant_id) {
        customer_id -> Uuid,
        cloud_tenant_id -> Uuid,
        display_name -> Text,
        primary_domain -> Nullable<Text>,
        connected_at -> Timestamptz,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Uuid,
        customer_id -> Uuid,
        name -> Text,
        prefix -> Text,
        key_hash -> Nullable<Bytea>,
        scopes -> Array<Text>,
        created_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
        last_used_at -> Nullable<Timestamptz>,
        created_by -> Text,
        kind -> Text,
        allow_from -> Array<Text>,
        last_used_from -> Nullable<Text>,
        last_used_user_agent -> Nullable<Text>,
    }
}

diesel::table! {
    analyzer_passes (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        started_at -> Timestamptz,
        finished_at -> Timestamptz,
        tenants -> Integer,
        identities -> Integer,
        findings -> Integer,
        new_findings -> Integer,
        role_recommendations -> Integer,
        upr_scores -> Integer,
        modified_at -> Timestamptz,
    }
}

diesel::table! {
    identities (customer_id, id) {
        customer_id -> Uuid,
        id -> Text,
        cloud_tenant_id -> Uuid,
        kind -> Text,
        display_name -> Text,
        principal_name -> Nullable<Text>,
        first_seen_at -> Timestamptz,
        last_seen_at -> Timestamptz,
        modified_at -> Timestamptz,
    }
}

diesel::table! {
    role_assignments (customer_id, identity_id, position) {
        customer_id -> Uuid,
        identity_id -> Text,
        position -> Integer,
        role_name -> Text,
        scope -> Text,
        assignment_type -> Text,
    }
}

diesel::table! {
    findings (customer_id, id) {
        customer_id -> Uuid,
        id -> Text,
        cloud_tenant_id -> Uuid,
        finding_type -> Text,
        severity -> Text,
        severity_rank -> SmallInt,
        status -> Text,
        title -> Text,
        description -> Nullable<Text>,
        identity_id -> Nullable<Text>,
        detected_at -> Timestamptz,
        updated_at -> Timestamptz,
        first_pass_id -> Uuid,
        last_pass_id -> Uuid,
        modified_at -> Timestamptz,
        triage_state -> Text,
        triage_reason -> Nullable<Text>,
        triage_comment -> Nullable<Text>,
        triage_expires_at -> Nullable<Timestamptz>,
        triage_updated_at -> Nullable<Timestamptz>,
        triage_key_id -> Nullable<Uuid>,
        triage_key_name -> Nullable<Text>,
        triage_change_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    finding_totals (customer_id, cloud_tenant_id, severity, status, finding_type) {
        customer_id -> Uuid,
        cloud_tenant_id -> Uuid,
        severity -> Text,
        status -> Text,
        finding_type -> Text,
        total -> Integer,
    }
}

diesel::table! {
    identity_totals (customer_id, cloud_tenant_id) {
        customer_id -> Uuid,
        cloud_tenant_id -> Uuid,
        total -> Integer,
    }
}

diesel::table! {
    role_recommendations (customer_id, id) {
        customer_id -> Uuid,
        id -> Text,
        cloud_tenant_id -> Uuid,
        identity_id -> Text,
        current_roles -> Array<Text>,
        recommended_role_name -> Text,
        recommended_actions -> Array<Text>,
        removed_actions -> Array<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        modified_at -> Timestamptz,
    }
}

diesel::table! {
    upr_scores (customer_id, identity_id, day) {
        customer_id -> Uuid,
        identity_id -> Text,
        day -> Date,
        cloud_tenant_id -> Uuid,
        score -> SmallInt,
        factors -> Jsonb,
        recorded_at -> Timestamptz,
        pass_id -> Uuid,
    }
}

diesel::table! {
    upr_latest (customer_id, identity_id) {
        customer_id -> Uuid,
        identity_id -> Text,
        cloud_tenant_id -> Uuid,
        score -> SmallInt,
        factors -> Jsonb,
        recorded_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_subscriptions (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        name -> Text,
        webhook_url -> Text,
        webhook_type -> Text,
        event_types -> Array<Text>,
        secret_key_id -> Text,
        secret_nonce -> Bytea,
        secret_ciphertext -> Bytea,
        active -> Bool,
        created_at -> Timestamptz,
        deactivated_at -> Nullable<Timestamptz>,
        previous_secret_key_id -> Nullable<Text>,
        previous_secret_nonce -> Nullable<Bytea>,
        previous_secret_ciphertext -> Nullable<Bytea>,
        previous_secret_expires_at -> Nullable<Timestamptz>,
        paused_at -> Nullable<Timestamptz>,
        disabled_at -> Nullable<Timestamptz>,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<Timestamptz>,
        version -> Integer,
    }
}

diesel::table! {
    webhook_deliveries (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        subscription_id -> Uuid,
        pass_id -> Nullable<Uuid>,
        event_type -> Text,
        chunk -> Integer,
        finding_ids -> Array<Text>,
        body -> Nullable<Bytea>,
        status -> Text,
        attempts -> Integer,
        next_attempt_at -> Timestamptz,
        lease_until -> Nullable<Timestamptz>,
        leased_by -> Nullable<Text>,
        created_at -> Timestamptz,
        delivered_at -> Nullable<Timestamptz>,
        last_error -> Nullable<Text>,
        changes -> Nullable<Jsonb>,
        trigger -> Text,
        schedule_start -> Integer,
        last_attempt_at -> Nullable<Timestamptz>,
        last_status_code -> Nullable<SmallInt>,
        event_ids -> Nullable<Array<Uuid>>,
    }
}

diesel::table! {
    webhook_attempts (customer_id, delivery_id, attempt) {
        customer_id -> Uuid,
        delivery_id -> Uuid,
        attempt -> Integer,
        started_at -> Timestamptz,
        latency_ms -> Integer,
        status_code -> Nullable<SmallInt>,
        error -> Nullable<Text>,
        response_excerpt -> Nullable<Text>,
        worker -> Text,
        detail -> Nullable<Text>,
    }
}

diesel::table! {
    console_sso (customer_id) {
        customer_id -> Uuid,
        issuer -> Text,
        client_id -> Text,
        secret_key_id -> Text,
        secret_nonce -> Bytea,
        secret_ciphertext -> Bytea,
        admin_claim -> Nullable<Text>,
        admin_values -> Array<Text>,
        admin_subjects -> Array<Text>,
        updated_at -> Timestamptz,
        display_name -> Nullable<Text>,
        provisioning_claim -> Nullable<Text>,
        admin_group -> Nullable<Text>,
    }
}

diesel::table! {
    console_sign_ins (customer_id, binding_hash) {
        customer_id -> Uuid,
        binding_hash -> Bytea,
        state -> Text,
        nonce -> Text,
        pkce_verifier -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    console_sessions (customer_id, id) {
        customer_id -> Uuid,
        token_hash -> Bytea,
        subject -> Text,
        display_name -> Text,
        csrf_token -> Text,
        created_at -> Timestamptz,
        last_seen_at -> Timestamptz,
        expires_at -> Timestamptz,
        ended_at -> Nullable<Timestamptz>,
        id -> Uuid,
        scim_user_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    console_audit (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        at -> Timestamptz,
        actor_kind -> Text,
        actor_subject -> Text,
        actor_name -> Text,
        action -> Text,
        key_id -> Nullable<Uuid>,
        key_name -> Nullable<Text>,
        key_prefix -> Nullable<Text>,
        detail -> Nullable<Text>,
        source_ip -> Nullable<Text>,
        target_id -> Nullable<Uuid>,
        target_name -> Nullable<Text>,
    }
}

diesel::table! {
    customer_data_versions (customer_id) {
        customer_id -> Uuid,
        version -> BigInt,
    }
}

diesel::table! {
    finding_events (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        seq -> BigInt,
        event_type -> Text,
        pass_id -> Uuid,
        finding_id -> Text,
        change -> Nullable<Jsonb>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    cloud_tenant_owners (cloud_tenant_id) {
        cloud_tenant_id -> Uuid,
        customer_id -> Uuid,
        connected_at -> Timestamptz,
    }
}

diesel::table! {
    customer_sync (customer_id) {
        customer_id -> Uuid,
        synced_through -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    finding_triage_history (customer_id, id) {
        customer_id -> Uuid,
        finding_id -> Text,
        id -> Uuid,
        created_at -> Timestamptz,
        key_id -> Nullable<Uuid>,
        key_name -> Nullable<Text>,
        from_state -> Text,
        from_reason -> Nullable<Text>,
        to_state -> Text,
        to_reason -> Nullable<Text>,
        comment -> Nullable<Text>,
        expires_at -> Nullable<Timestamptz>,
        change_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    idempotency_keys (customer_id, api_key_id, idempotency_key) {
        customer_id -> Uuid,
        api_key_id -> Uuid,
        idempotency_key -> Text,
        fingerprint -> Bytea,
        claim -> Uuid,
        running_until -> Nullable<Timestamptz>,
        kept_until -> Timestamptz,
        status -> Nullable<SmallInt>,
        headers -> Nullable<Jsonb>,
        body_key_id -> Nullable<Text>,
        body_nonce -> Nullable<Bytea>,
        body -> Nullable<Bytea>,
    }
}

diesel::table! {
    scim_users (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        user_name -> Text,
        user_name_key -> Text,
        external_id -> Nullable<Text>,
        display_name -> Nullable<Text>,
        active -> Nullable<Bool>,
        attributes -> Jsonb,
        version -> BigInt,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    scim_groups (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        display_name -> Text,
        display_name_key -> Text,
        external_id -> Nullable<Text>,
        version -> BigInt,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    scim_group_members (customer_id, group_id, user_id) {
        customer_id -> Uuid,
        group_id -> Uuid,
        user_id -> Uuid,
    }
}

diesel::table! {
    webhook_delivery_totals (customer_id, subscription_id, event_type, status) {
        customer_id -> Uuid,
        subscription_id -> Uuid,
        event_type -> Text,
        status -> Text,
        total -> BigInt,
    }
}

diesel::table! {
    webhook_latency (customer_id, subscription_id) {
        customer_id -> Uuid,
        subscription_id -> Uuid,
        latency_ms -> Integer,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_bodies (customer_id, pass_id, event_type, chunk) {
        customer_id -> Uuid,
        pass_id -> Uuid,
        event_type -> Text,
        chunk -> Integer,
        findings -> Bytea,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    triage_changes (customer_id, id) {
        customer_id -> Uuid,
        id -> Uuid,
        comment -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    client_credentials (id) {
        id -> Uuid,
        client -> Uuid,
        kind -> Text,
        label -> Text,
        secret_hash -> Nullable<Bytea>,
        algorithm -> Nullable<Text>,
        public_key -> Nullable<Jsonb>,
        created_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    client_assertions (client, jti) {
        client -> Uuid,
        jti -> Text,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    credential_addresses (customer_id, key_id, address) {
        customer_id -> Uuid,
        key_id -> Uuid,
        address -> Text,
        first_seen -> Timestamptz,
    }
}

diesel::allow_tables_to_appear_in_same_query! {
    customers, tenants, api_keys, analyzer_passes, identities, role_assignments, findings,
    finding_totals, identity_totals, role_recommendations, upr_scores, upr_latest,
    webhook_subscriptions, webhook_deliveries, webhook_attempts, console_sso, console_sign_ins,
    console_sessions, console_audit, customer_data_versions, finding_events,
    cloud_tenant_owners, customer_sync, finding_triage_history, idempotency_keys, scim_users,
    scim_groups, scim_group_members, webhook_delivery_totals, webhook_latency, webhook_bodies,
    triage_changes, client_credentials, client_assertions, credential_addresses,
}

-- SCIM 2.0 (`/scim/v2`, a key with `provision:scim`): the users and groups a customer's
-- identity provider provisions. `user_name_key` and `display_name_key` are the lowercased
-- names, unique per customer (SCIM's `userName` is unique case-insensitively). `attributes`
-- holds what posture keeps of a user besides its columns (name, emails). `version` is the
-- resource's `meta.version` (its ETag), raised by every change, a group's by every change
-- of its members too. `active` is NULL when the provider leaves it unassigned (only false
-- deactivates). On Citus `migrate` distributes the three tables by customer after the
-- migrations (`posture_distribute()`).
CREATE TABLE scim_users (
    customer_id   uuid NOT NULL REFERENCES customers (id),
    id            uuid NOT NULL,
    user_name     text NOT NULL CHECK (length(user_name) BETWEEN 1 AND 256),
    user_name_key text NOT NULL,
    external_id   text CHECK (length(external_id) <= 256),
    display_name  text CHECK (length(display_name) <= 256),
    active        boolean,
    attributes    jsonb NOT NULL,
    version       bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id),
    UNIQUE (customer_id, user_name_key)
);
CREATE INDEX scim_users_external_id_idx ON scim_users (customer_id, external_id);

CREATE TABLE scim_groups (
    customer_id      uuid NOT NULL REFERENCES customers (id),
    id               uuid NOT NULL,
    display_name     text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 256),
    display_name_key text NOT NULL,
    external_id      text CHECK (length(external_id) <= 256),
    version          bigint NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id),
    UNIQUE (customer_id, display_name_key)
);
CREATE INDEX scim_groups_external_id_idx ON scim_groups (customer_id, external_id);

CREATE TABLE scim_group_members (
    customer_id uuid NOT NULL,
    group_id    uuid NOT NULL,
    user_id     uuid NOT NULL,
    PRIMARY KEY (customer_id, group_id, user_id),
    FOREIGN KEY (customer_id, group_id) REFERENCES scim_groups (customer_id, id) ON DELETE CASCADE,
    FOREIGN KEY (customer_id, user_id) REFERENCES scim_users (customer_id, id) ON DELETE CASCADE
);
-- A user's groups (a deleted user's groups get a new version; an admin's rights).
CREATE INDEX scim_group_members_user_idx ON scim_group_members (customer_id, user_id);

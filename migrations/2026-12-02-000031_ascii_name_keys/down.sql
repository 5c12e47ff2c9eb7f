-- The keys about as the previous release made them (Unicode lowercasing; PostgreSQL's
-- lower() follows the database's locale, not Rust's rules exactly). Lossy: names the new rule
-- let in side by side (`Kate` and `\u212Aate`) share a key under the old one, and this
-- revert then fails on the unique key until one of them is renamed or deleted.
UPDATE scim_users SET user_name_key = lower(user_name)
WHERE user_name_key <> lower(user_name);
UPDATE scim_groups SET display_name_key = lower(display_name)
WHERE display_name_key <> lower(display_name);

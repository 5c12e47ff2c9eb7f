-- The keys as the previous release made them (Unicode lowercasing).
UPDATE scim_users SET user_name_key = lower(user_name)
WHERE user_name_key <> lower(user_name);
UPDATE scim_groups SET display_name_key = lower(display_name)
WHERE display_name_key <> lower(display_name);

-- A SCIM `userName` and a group's `displayName` are compared with only their ASCII letters
-- folded (every other character exactly): a key lowercased with Unicode's rules let a
-- look-alike (`\u212Aate@...`, KELVIN SIGN) match `kate@...` at a console sign-in. The keys
-- stored before are made again by the new rule. It only tells more names apart (two names
-- equal under it are equal under the old one), so no uniqueness breaks; rows whose key
-- already holds are left alone.
UPDATE scim_users
SET user_name_key = translate(user_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                         'abcdefghijklmnopqrstuvwxyz')
WHERE user_name_key <> translate(user_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                            'abcdefghijklmnopqrstuvwxyz');
UPDATE scim_groups
SET display_name_key = translate(display_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                               'abcdefghijklmnopqrstuvwxyz')
WHERE display_name_key <> translate(display_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
                                                  'abcdefghijklmnopqrstuvwxyz');

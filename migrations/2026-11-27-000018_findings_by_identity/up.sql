-- A finding and a role recommendation embed their identity (name, kind, tenant) as the API
-- serves it, so a pass that modifies an identity modifies them too (their `modified_at`,
-- which `modifiedSince` reads): these indexes find them without reading every row of the
-- customer. The one of findings also serves the check of its key to identities.
CREATE INDEX findings_identity_idx ON findings (customer_id, identity_id);
CREATE INDEX role_recommendations_identity_idx ON role_recommendations (customer_id, identity_id);

DROP INDEX role_recommendations_modified_idx;
DROP INDEX identities_modified_idx;
DROP INDEX findings_modified_idx;
ALTER TABLE role_recommendations DROP COLUMN modified_at;
ALTER TABLE identities DROP COLUMN modified_at;
ALTER TABLE findings DROP COLUMN modified_at;
ALTER TABLE analyzer_passes DROP COLUMN modified_at;
ALTER TABLE customers DROP COLUMN synced_through;

DROP INDEX IF EXISTS finding_triage_history_change_idx;
DROP INDEX IF EXISTS findings_triage_change_idx;
-- The comments of the marks and records that name a change are put back where they were.
UPDATE findings f SET triage_comment = c.comment
  FROM triage_changes c
 WHERE c.customer_id = f.customer_id AND c.id = f.triage_change_id;
UPDATE finding_triage_history h SET comment = c.comment
  FROM triage_changes c
 WHERE c.customer_id = h.customer_id AND c.id = h.change_id;
ALTER TABLE finding_triage_history DROP COLUMN IF EXISTS change_id;
ALTER TABLE findings DROP COLUMN IF EXISTS triage_change_id;
DROP TABLE IF EXISTS triage_changes;

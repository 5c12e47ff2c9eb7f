-- A triage write's comment is kept once, however many findings it writes: a bulk of 500
-- findings with a comment of 2,000 four-byte characters kept 8 kB in each finding and in
-- each history record (8 MB a request). The finding and its history record name the change
-- whose comment they carry; a finding written before keeps its own (`triage_comment`), read
-- as before. A finding's history keeps its newest 100 records; a change no finding and no
-- record names any more is deleted with the records that named it last.
--
-- Outside a transaction (metadata.toml), each statement safe to run again: the new columns
-- have no default (no rewrite of findings); the indexes cover only the rows that name a
-- change. Not CONCURRENTLY (no statement of a message of several may be): each build reads
-- its table once, writes waiting, and indexes nothing yet (no row names a change before).
CREATE TABLE IF NOT EXISTS triage_changes (
    customer_id  uuid NOT NULL,
    id           uuid NOT NULL,
    comment      text NOT NULL CHECK (length(comment) <= 8000),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id)
);
ALTER TABLE findings ADD COLUMN IF NOT EXISTS triage_change_id uuid;
ALTER TABLE finding_triage_history ADD COLUMN IF NOT EXISTS change_id uuid;
-- Whether a change is still named, when the records that named it are pruned.
CREATE INDEX IF NOT EXISTS findings_triage_change_idx
    ON findings (customer_id, triage_change_id) WHERE triage_change_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS finding_triage_history_change_idx
    ON finding_triage_history (customer_id, change_id) WHERE change_id IS NOT NULL;

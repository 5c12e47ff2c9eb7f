-- The worker exports how long the analyzer's passes take (posture_ingest_* gauges): it reads
-- the passes of every customer finished in the last hour, and when the last one finished.
-- A cross-customer index, like the outbox's (docs/scaling.md, "Sharding by customer").
CREATE INDEX analyzer_passes_finished_idx ON analyzer_passes (finished_at);

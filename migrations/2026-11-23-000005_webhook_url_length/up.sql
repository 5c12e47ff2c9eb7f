-- A receiver URL is at most 2,048 characters as the caller gives it; what is stored is its
-- normalised form, which can be one character longer (an empty path becomes "/"). The
-- service checks both before it writes; the database keeps the outer bound.

ALTER TABLE webhook_subscriptions
    DROP CONSTRAINT webhook_subscriptions_webhook_url_check,
    ADD CONSTRAINT webhook_subscriptions_webhook_url_check CHECK (length(webhook_url) <= 2049);

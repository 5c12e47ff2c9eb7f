DROP TABLE webhook_bodies;

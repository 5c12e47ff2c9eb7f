DROP FUNCTION posture_uuid_v7();

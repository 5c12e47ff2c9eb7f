DROP FUNCTION posture_analyze(text);

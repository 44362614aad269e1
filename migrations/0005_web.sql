-- PLACEHOLDER in branch obs only: keeps migration numbering contiguous so that 0006 can be
-- applied and tested here. The web branch owns the real 0005_web.sql; on merge, take
-- theirs (0006_observability.sql does not depend on anything in 0005).
SELECT 1;

-- A match's or a table's row in its read model now takes its times from its events: created
-- at the first event's time, last changed at the last's (service/store/rebuild.py makes
-- the read models again from the events alone). Rows written before had their
-- transaction's time instead, a moment earlier: they get their events'. Safe to run again.

UPDATE matches m SET created_at = e.first, updated_at = e.last
    FROM (SELECT stream_id, min(recorded_at) AS first, max(recorded_at) AS last
          FROM events GROUP BY stream_id) e
    WHERE e.stream_id = m.match_id
      AND (m.created_at, m.updated_at) IS DISTINCT FROM (e.first, e.last);

UPDATE tables t SET created_at = e.first, updated_at = e.last
    FROM (SELECT stream_id, min(recorded_at) AS first, max(recorded_at) AS last
          FROM events GROUP BY stream_id) e
    WHERE e.stream_id = t.table_id
      AND (t.created_at, t.updated_at) IS DISTINCT FROM (e.first, e.last);

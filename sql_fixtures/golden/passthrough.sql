-- Session, catalogue and unprotected statements: relayed to the upstream's passthrough role.
-- `passthrough-rewritten`: relayed with statistics of protected tables hidden (docs/sql.md).
-- Every case here is also executed as the passthrough role and must succeed.

-- title: SELECT 1
-- expect: passthrough
SELECT 1;

-- title: version
-- expect: passthrough
SELECT version();

-- title: SET / SHOW / RESET
-- expect: passthrough, passthrough, passthrough
SET search_path = public; SHOW search_path; RESET search_path;

-- title: asyncpg pool reset
-- expect: passthrough, passthrough, passthrough, passthrough
SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;

-- title: transaction control
-- expect: passthrough, passthrough, passthrough, passthrough
BEGIN; SAVEPOINT s; RELEASE SAVEPOINT s; COMMIT;

-- title: DBeaver session probe
-- expect: passthrough
SELECT current_database(), current_schema(), session_user;

-- title: has_table_privilege on the protected table: SELECT is reported as granted (aggregates are), so BI tools list it
-- expect: passthrough-rewritten
SELECT has_table_privilege(current_user, '"public"."adult"', 'select');

-- title: psql \d adult name filter
-- expect: passthrough
SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname OPERATOR(pg_catalog.~) '^(adult)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3;

-- title: information_schema columns of the protected table
-- expect: passthrough
SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'adult' ORDER BY ordinal_position;

-- title: Metabase table sync reads n_live_tup (rows of protected tables hidden)
-- expect: passthrough-rewritten
SELECT n.nspname AS schema, c.relname AS name, CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS type, d.description AS description, stat.n_live_tup AS estimated_row_count FROM pg_catalog.pg_class c INNER JOIN pg_catalog.pg_namespace n ON c.relnamespace = n.oid LEFT OUTER JOIN pg_catalog.pg_description d ON c.oid = d.objoid AND d.objsubid = 0 AND d.classoid = 'pg_class'::regclass LEFT JOIN pg_stat_user_tables stat ON n.nspname = stat.schemaname AND c.relname = stat.relname WHERE c.relnamespace = n.oid AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND c.relkind IN ('r', 'p', 'v', 'f', 'm') AND n.nspname IN ('public');

-- title: reltuples of a named table
-- expect: passthrough-rewritten
SELECT relname, reltuples, relpages FROM pg_catalog.pg_class WHERE relname = 'adult';

-- title: reltuples qualified
-- expect: passthrough-rewritten
SELECT c.relname, c.reltuples::bigint AS estimate FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public';

-- title: psql \dt+ style size column
-- expect: passthrough-rewritten
SELECT c.relname, pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) AS size FROM pg_catalog.pg_class c WHERE c.relkind = 'r';

-- title: pg_stat_user_tables directly
-- expect: passthrough-rewritten
SELECT relname, n_live_tup, n_dead_tup, seq_scan FROM pg_stat_user_tables;

-- title: pg_stats (hidden for protected tables, on top of PostgreSQL's own privilege filter)
-- expect: passthrough-rewritten
SELECT tablename, attname, n_distinct FROM pg_stats WHERE schemaname = 'public';

-- title: pg_statio_user_tables
-- expect: passthrough-rewritten
SELECT relname, heap_blks_read FROM pg_statio_user_tables;

-- title: pg_stat_get_live_tuples by oid
-- expect: passthrough-rewritten
SELECT c.relname, pg_stat_get_live_tuples(c.oid) FROM pg_class c WHERE c.relkind = 'r';

-- title: pg_stat_activity (Superset cancel) is not a table statistic
-- expect: passthrough
SELECT pid, state FROM pg_stat_activity WHERE pid = pg_backend_pid();

-- title: unprotected catalogue join with a CTE
-- expect: passthrough
WITH t AS (SELECT oid, relname FROM pg_class) SELECT count(*) FROM t;

-- title: a table whose name contains the protected name is another table
-- expect: passthrough
SELECT 1 FROM pg_class WHERE relname = 'adult_summary';

-- title: psql 15 \dt+ (sizes hidden for protected tables, the rest verbatim)
-- expect: passthrough-rewritten
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
  am.amname as "Access method",
  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;

-- title: the psql \d+ adult column statistics-target query (no statistics read)
-- expect: passthrough
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attstorage, CASE WHEN a.attstattarget=-1 THEN NULL ELSE a.attstattarget END AS attstattarget FROM pg_catalog.pg_attribute a WHERE a.attrelid = (SELECT oid FROM pg_catalog.pg_class WHERE relname = 'adult') AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;

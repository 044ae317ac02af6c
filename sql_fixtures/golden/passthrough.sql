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

-- title: pg_stats (PostgreSQL shows rows only for columns one may SELECT: none of a protected table)
-- expect: passthrough
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

-- title: pg_statistic (an empty relation or NULL statistics)
-- expect: passthrough-rewritten
SELECT * FROM pg_statistic;

-- title: pg_stat_database tuple counters (an empty relation or NULL statistics)
-- expect: passthrough-rewritten
SELECT tup_returned FROM pg_stat_database;

-- title: star over pg_class (an empty relation or NULL statistics)
-- expect: passthrough-rewritten
SELECT * FROM pg_class WHERE relname = 'adult';

-- title: qualified star over pg_class (an empty relation or NULL statistics)
-- expect: passthrough-rewritten
SELECT c.* FROM pg_class c;

-- title: database-level stat function (an empty relation or NULL statistics)
-- expect: passthrough-rewritten
SELECT pg_stat_get_db_tuples_returned(1);

-- title: pg_class as a whole row (its statistics read NULL)
-- expect: passthrough-rewritten
SELECT c FROM pg_class c WHERE relname = 'adult';

-- title: pg_class rows as text, JSON and through record functions
-- expect: passthrough-rewritten
SELECT c::text, row_to_json(c), to_jsonb(c)->>'reltuples', (c).reltuples, record_out(c) FROM pg_catalog.pg_class c WHERE relname = 'adult';

-- title: the table name as a whole-row value
-- expect: passthrough-rewritten
SELECT to_jsonb(pg_class) FROM pg_class WHERE relname = 'adult';

-- title: a whole row through a subquery alias
-- expect: passthrough-rewritten
SELECT (x).reltuples FROM (SELECT c AS x FROM pg_class c WHERE relname = 'adult') s;

-- title: a CTE that renames reltuples
-- expect: passthrough-rewritten
WITH t(a, b) AS (SELECT relname, reltuples FROM pg_class) SELECT b FROM t WHERE a = 'adult';

-- title: a LATERAL reading the statistics of an outer pg_class
-- expect: passthrough-rewritten
SELECT x.r FROM pg_class c, LATERAL (SELECT c.reltuples) x(r) WHERE c.relname = 'adult';

-- title: an oracle on reltuples in WHERE (no row: the statistic is NULL)
-- expect: passthrough-rewritten
SELECT 'leak' FROM pg_class WHERE relname = 'adult' AND reltuples > 30000;

-- title: a quoted statistics function name keeps its quotes
-- expect: passthrough-rewritten
SELECT "pg_stat_get_live_tuples"(c.oid) FROM pg_class c WHERE relname = 'adult';

-- title: a statistics function within another one
-- expect: passthrough-rewritten
SELECT pg_size_pretty(pg_total_relation_size(c.oid) + pg_indexes_size(c.oid)) FROM pg_class c;

-- title: pg_stat_get_activity in FROM (a session list, not a statistic) is relayed as written
-- expect: passthrough
SELECT pid FROM pg_stat_get_activity(NULL) AS s WHERE pid = pg_backend_pid();

-- title: database and tablespace sizes (psql \l+)
-- expect: passthrough-rewritten
SELECT d.datname, pg_catalog.pg_size_pretty(pg_catalog.pg_database_size(d.datname)) AS "Size", pg_tablespace_size('pg_default') FROM pg_catalog.pg_database d;

-- title: pg_locks reads as an empty relation (other sessions' locks)
-- expect: passthrough-rewritten
SELECT locktype, relation::regclass FROM pg_locks;

-- title: a cursor over pg_class rows (psqlODBC UseDeclareFetch) keeps the wrapper
-- expect: passthrough-rewritten
DECLARE lapras_c1 CURSOR WITH HOLD FOR SELECT c.* FROM pg_class c WHERE relname = 'adult';

-- title: SQL PREPARE of a catalogue query reading statistics
-- expect: passthrough-rewritten
PREPARE lapras_p1 (text) AS SELECT c::text FROM pg_class c WHERE relname = $1;

-- title: EXPLAIN of a catalogue query
-- expect: passthrough-rewritten
EXPLAIN (COSTS off) SELECT reltuples FROM pg_class WHERE relname = 'adult';

-- title: COPY of a catalogue query reading statistics
-- expect: passthrough-rewritten
COPY (SELECT relname, reltuples FROM pg_class WHERE relname = 'adult') TO STDOUT;

-- title: pgjdbc getSQLKeywords: a string array that lists words, not relations
-- expect: passthrough
select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,adult,zone}'::text[]);

-- Statements captured from real clients (pgwire-research.md, Appendix A), with the demo
-- table renamed to adult and its columns mapped to Adult's (diagnosis->sex, cost->hours_per_week,
-- admitted->age). Catalogue and session statements must pass through; statements over adult
-- are answered with DP, answered as probes, or refused.

-- title: A.1 psql 15 #1
-- expect: passthrough
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','v','m','S','f','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;

-- title: A.1 psql 15 #2
-- expect: passthrough
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;

-- title: A.1 psql 15 #3
-- expect: passthrough
SELECT d.datname as "Name",
       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
       d.datcollate as "Collate",
       d.datctype as "Ctype",
       d.daticulocale as "ICU Locale",
       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges"
FROM pg_catalog.pg_database d
ORDER BY 1;

-- title: A.1 psql 15 #4
-- expect: passthrough
SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(adult)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;

-- title: A.1 psql 15 #5
-- expect: passthrough
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '16389';

-- title: A.1 psql 15 #6
-- expect: passthrough
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16389' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- title: A.1 psql 15 #7
-- expect: passthrough
SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
WHERE c.oid = '16389' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
ORDER BY i.indisprimary DESC, c2.relname;

-- title: A.1 psql 15 #8
-- expect: passthrough
SELECT pol.polname, pol.polpermissive,
  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
  CASE pol.polcmd
    WHEN 'r' THEN 'SELECT'
    WHEN 'a' THEN 'INSERT'
    WHEN 'w' THEN 'UPDATE'
    WHEN 'd' THEN 'DELETE'
    END AS cmd
FROM pg_catalog.pg_policy pol
WHERE pol.polrelid = '16389' ORDER BY 1;

-- title: A.1 psql 15 #9
-- expect: passthrough
SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,
pg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,
  'd' = any(stxkind) AS ndist_enabled,
  'f' = any(stxkind) AS deps_enabled,
  'm' = any(stxkind) AS mcv_enabled,
stxstattarget
FROM pg_catalog.pg_statistic_ext
WHERE stxrelid = '16389'
ORDER BY nsp, stxname;

-- title: A.1 psql 15 #10
-- expect: passthrough
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='16389' and pg_catalog.pg_relation_is_publishable('16389')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '16389'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16389')
ORDER BY 1;

-- title: A.1 psql 15 #11
-- expect: passthrough
SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '16389'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno;

-- title: A.1 psql 15 #12
-- expect: passthrough
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '16389'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;

-- title: A.1 psql 15 #13
-- expect: passthrough
SELECT n.nspname AS "Name",
  pg_catalog.pg_get_userbyid(n.nspowner) AS "Owner"
FROM pg_catalog.pg_namespace n
WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
ORDER BY 1;

-- title: A.1 psql 15 #14
-- expect: passthrough
SELECT r.rolname, r.rolsuper, r.rolinherit,
  r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
  r.rolconnlimit, r.rolvaliduntil,
  ARRAY(SELECT b.rolname
        FROM pg_catalog.pg_auth_members m
        JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid)
        WHERE m.member = r.oid) as memberof
, r.rolreplication
, r.rolbypassrls
FROM pg_catalog.pg_roles r
WHERE r.rolname !~ '^pg_'
ORDER BY 1;

-- title: A.2 psycopg 3 #1
-- expect: passthrough
BEGIN;

-- title: A.2 psycopg 3 #2
-- expect: passthrough
SELECT 1;

-- title: A.2 psycopg 3 #3
-- expect: dp
-- params: [30, 'Male']
SELECT count(*), sum(hours_per_week) FROM adult WHERE age > $1 AND sex = $2;

-- title: A.2 psycopg 3 #4
-- expect: dp
-- params: [30]
SELECT count(*) FROM adult WHERE age > $1;

-- title: A.2 psycopg 3 #5
-- expect: dp
-- params: [30]
SELECT count(*), sum(hours_per_week) FROM adult WHERE age > $1;

-- title: A.2 psycopg 3 #6
-- expect: sqlstate 42501
DECLARE "ssc" CURSOR FOR SELECT id FROM adult WHERE age > $1;

-- title: A.2 psycopg 3 #7
-- expect: passthrough
FETCH FORWARD ALL FROM "ssc";

-- title: A.2 psycopg 3 #8
-- expect: passthrough
CLOSE "ssc";

-- title: A.2 psycopg 3 #9
-- expect: passthrough
SELECT * FROM nosuchtable;

-- title: A.2 psycopg 3 #10
-- expect: passthrough
ROLLBACK;

-- title: A.2 psycopg 3 #11
-- expect: passthrough
DEALLOCATE ALL;

-- title: A.2 psycopg 3 #12
-- expect: sqlstate 42501
COPY (SELECT id FROM adult LIMIT 3) TO STDOUT;

-- title: A.2 psycopg 3 #13
-- expect: passthrough, passthrough
SELECT 1; SELECT 2;

-- title: A.2 psycopg 3 #14
-- expect: passthrough
COMMIT;

-- title: A.3 asyncpg #1
-- expect: dp
-- params: [30]
SELECT avg(age) FROM adult WHERE age > $1;

-- title: A.3 asyncpg #2
-- expect: passthrough
SELECT
                            current_setting('jit') AS cur,
                            set_config('jit', 'off', false) AS new;

-- title: A.3 asyncpg #3
-- expect: passthrough
WITH RECURSIVE typeinfo_tree(
        oid, ns, name, kind, basetype, elemtype, elemdelim,
        range_subtype, attrtypoids, attrnames, depth)
    AS (
        SELECT
            ti.oid, ti.ns, ti.name, ti.kind, ti.basetype,
            ti.elemtype, ti.elemdelim, ti.range_subtype,
            ti.attrtypoids, ti.attrnames, 0
        FROM
                (
            SELECT
                t.oid                           AS oid,
                ns.nspname                      AS ns,
                t.typname                       AS name,
                t.typtype                       AS kind,
                (CASE WHEN t.typtype = 'd' THEN
                    (WITH RECURSIVE typebases(oid, depth) AS (
                        SELECT
                            t2.typbasetype      AS oid,
                            0                   AS depth
                        FROM
                            pg_type t2
                        WHERE
                            t2.oid = t.oid
    
                        UNION ALL
    
                        SELECT
                            t2.typbasetype      AS oid,
                            tb.depth + 1        AS depth
                        FROM
                            pg_type t2,
                            typebases tb
                        WHERE
                           tb.oid = t2.oid
                           AND t2.typbasetype != 0
                   ) SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1)
    
                   ELSE NULL
                END)                            AS basetype,
                t.typelem                       AS elemtype,
                elem_t.typdelim                 AS elemdelim,
                COALESCE(
                    range_t.rngsubtype,
                    multirange_t.rngsubtype)    AS range_subtype,
                (CASE WHEN t.typtype = 'c' THEN
                    (SELECT
                        array_agg(ia.atttypid ORDER BY ia.attnum)
                    FROM
                        pg_attribute ia
                        INNER JOIN pg_class c
                            ON (ia.attrelid = c.oid)
                    WHERE
                        ia.attnum > 0 AND NOT ia.attisdropped
                        AND c.reltype = t.oid)
    
                    ELSE NULL
                END)                            AS attrtypoids,
                (CASE WHEN t.typtype = 'c' THEN
                    (SELECT
                        array_agg(ia.attname::text ORDER BY ia.attnum)
                    FROM
                        pg_attribute ia
                        INNER JOIN pg_class c
                            ON (ia.attrelid = c.oid)
                    WHERE
                        ia.attnum > 0 AND NOT ia.attisdropped
                        AND c.reltype = t.oid)
    
                    ELSE NULL
                END)                            AS attrnames
            FROM
                pg_catalog.pg_type AS t
                INNER JOIN pg_catalog.pg_namespace ns ON (
                    ns.oid = t.typnamespace)
                LEFT JOIN pg_type elem_t ON (
                    t.typlen = -1 AND
                    t.typelem != 0 AND
                    t.typelem = elem_t.oid
                )
                LEFT JOIN pg_range range_t ON (
                    t.oid = range_t.rngtypid
                )
                LEFT JOIN pg_range multirange_t ON (
                    t.oid = multirange_t.rngmultitypid
                )
        )
     AS ti
        WHERE
            ti.oid = any($1::oid[])
    
        UNION ALL
    
        SELECT
            ti.oid, ti.ns, ti.name, ti.kind, ti.basetype,
            ti.elemtype, ti.elemdelim, ti.range_subtype,
            ti.attrtypoids, ti.attrnames, tt.depth + 1
        FROM
                (
            SELECT
                t.oid                           AS oid,
                ns.nspname                      AS ns,
                t.typname                       AS name,
                t.typtype                       AS kind,
                (CASE WHEN t.typtype = 'd' THEN
                    (WITH RECURSIVE typebases(oid, depth) AS (
                        SELECT
                            t2.typbasetype      AS oid,
                            0                   AS depth
                        FROM
                            pg_type t2
                        WHERE
                            t2.oid = t.oid
    
                        UNION ALL
    
                        SELECT
                            t2.typbasetype      AS oid,
                            tb.depth + 1        AS depth
                        FROM
                            pg_type t2,
                            typebases tb
                        WHERE
                           tb.oid = t2.oid
                           AND t2.typbasetype != 0
                   ) SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1)
    
                   ELSE NULL
                END)                            AS basetype,
                t.typelem                       AS elemtype,
                elem_t.typdelim                 AS elemdelim,
                COALESCE(
                    range_t.rngsubtype,
                    multirange_t.rngsubtype)    AS range_subtype,
                (CASE WHEN t.typtype = 'c' THEN
                    (SELECT
                        array_agg(ia.atttypid ORDER BY ia.attnum)
                    FROM
                        pg_attribute ia
                        INNER JOIN pg_class c
                            ON (ia.attrelid = c.oid)
                    WHERE
                        ia.attnum > 0 AND NOT ia.attisdropped
                        AND c.reltype = t.oid)
    
                    ELSE NULL
                END)                            AS attrtypoids,
                (CASE WHEN t.typtype = 'c' THEN
                    (SELECT
                        array_agg(ia.attname::text ORDER BY ia.attnum)
                    FROM
                        pg_attribute ia
                        INNER JOIN pg_class c
                            ON (ia.attrelid = c.oid)
                    WHERE
                        ia.attnum > 0 AND NOT ia.attisdropped
                        AND c.reltype = t.oid)
    
                    ELSE NULL
                END)                            AS attrnames
            FROM
                pg_catalog.pg_type AS t
                INNER JOIN pg_catalog.pg_namespace ns ON (
                    ns.oid = t.typnamespace)
                LEFT JOIN pg_type elem_t ON (
                    t.typlen = -1 AND
                    t.typelem != 0 AND
                    t.typelem = elem_t.oid
                )
                LEFT JOIN pg_range range_t ON (
                    t.oid = range_t.rngtypid
                )
                LEFT JOIN pg_range multirange_t ON (
                    t.oid = multirange_t.rngmultitypid
                )
        )
     ti,
            typeinfo_tree tt
        WHERE
            (tt.elemtype IS NOT NULL AND ti.oid = tt.elemtype)
            OR (tt.attrtypoids IS NOT NULL AND ti.oid = any(tt.attrtypoids))
            OR (tt.range_subtype IS NOT NULL AND ti.oid = tt.range_subtype)
            OR (tt.basetype IS NOT NULL AND ti.oid = tt.basetype)
    )
    
    SELECT DISTINCT
        *,
        basetype::regtype::text AS basetype_name,
        elemtype::regtype::text AS elemtype_name,
        range_subtype::regtype::text AS range_subtype_name
    FROM
        typeinfo_tree
    ORDER BY
        depth DESC;

-- title: A.3 asyncpg #4
-- expect: passthrough
SELECT
                        set_config('jit', $1, false);

-- title: A.3 asyncpg #5
-- expect: passthrough
SELECT $1::int[];

-- title: A.3 asyncpg #6
-- expect: dp
SELECT count(*) FROM adult;

-- title: A.4 SQLAlchemy+psycopg2 #1
-- expect: passthrough
SELECT t.oid, typarray
    FROM pg_type t JOIN pg_namespace ns
        ON typnamespace = ns.oid
    WHERE typname = 'hstore';

-- title: A.4 SQLAlchemy+psycopg2 #2
-- expect: passthrough
select pg_catalog.version();

-- title: A.4 SQLAlchemy+psycopg2 #3
-- expect: passthrough
select current_schema();

-- title: A.4 SQLAlchemy+psycopg2 #4
-- expect: passthrough
show transaction isolation level;

-- title: A.4 SQLAlchemy+psycopg2 #5
-- expect: passthrough
show standard_conforming_strings;

-- title: A.4 SQLAlchemy+psycopg2 #6
-- expect: dp
SELECT count(*) FROM adult WHERE age > 30;

-- title: A.4 SQLAlchemy+psycopg2 #7
-- expect: passthrough
SELECT pg_catalog.pg_namespace.nspname 
    FROM pg_catalog.pg_namespace 
    WHERE (pg_catalog.pg_namespace.nspname NOT LIKE 'pg/_' || '%' ESCAPE '/') ORDER BY pg_catalog.pg_namespace.nspname;

-- title: A.4 SQLAlchemy+psycopg2 #8
-- expect: passthrough
SELECT pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_namespace.nspname = 'public';

-- title: A.4 SQLAlchemy+psycopg2 #9
-- expect: passthrough
SELECT pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['v']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_namespace.nspname = 'public';

-- title: A.4 SQLAlchemy+psycopg2 #10
-- expect: passthrough
SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type, CASE WHEN pg_catalog.pg_attribute.atthasdef THEN (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1 
    FROM pg_catalog.pg_attrdef 
    WHERE pg_catalog.pg_attribute.atthasdef AND pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum) ELSE NULL END AS "default", pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, pg_catalog.pg_description.description AS comment, pg_catalog.pg_attribute.attgenerated AS generated, CASE WHEN (pg_catalog.pg_attribute.attidentity != '') THEN (SELECT json_build_object('always', pg_catalog.pg_attribute.attidentity = 'a', 'start', pg_catalog.pg_sequence.seqstart, 'increment', pg_catalog.pg_sequence.seqincrement, 'minvalue', pg_catalog.pg_sequence.seqmin, 'maxvalue', pg_catalog.pg_sequence.seqmax, 'cache', pg_catalog.pg_sequence.seqcache, 'cycle', pg_catalog.pg_sequence.seqcycle) AS json_build_object_1 
    FROM pg_catalog.pg_sequence 
    WHERE pg_catalog.pg_attribute.attidentity != '' AND pg_catalog.pg_sequence.seqrelid = CAST(CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(pg_catalog.pg_attribute.attrelid AS REGCLASS) AS TEXT), pg_catalog.pg_attribute.attname) AS REGCLASS) AS OID)) ELSE NULL END AS identity_options, CASE WHEN (pg_catalog.pg_attribute.attcollation != 0 AND (SELECT pg_catalog.pg_type.typcollation 
    FROM pg_catalog.pg_type 
    WHERE pg_catalog.pg_type.oid = pg_catalog.pg_attribute.atttypid) != pg_catalog.pg_attribute.attcollation) THEN (SELECT json_build_object('name', pg_catalog.pg_collation.collname, 'schema', CASE WHEN pg_catalog.pg_collation_is_visible(pg_catalog.pg_collation.oid) THEN NULL ELSE pg_catalog.pg_namespace.nspname END) AS json_build_object_9 
    FROM pg_catalog.pg_collation JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_collation.collnamespace 
    WHERE pg_catalog.pg_collation.oid = pg_catalog.pg_attribute.attcollation) ELSE NULL END AS collation 
    FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attribute.attnum > 0 AND NOT pg_catalog.pg_attribute.attisdropped LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_description.objsubid = pg_catalog.pg_attribute.attnum JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_namespace.nspname = 'public' AND pg_catalog.pg_class.relname IN ('adult') ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum;

-- title: A.4 SQLAlchemy+psycopg2 #11
-- expect: passthrough
SELECT pg_catalog.pg_class.oid, pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_namespace.nspname = 'public' AND pg_catalog.pg_class.relname IN ('adult');

-- title: A.4 SQLAlchemy+psycopg2 #12
-- expect: passthrough
SELECT attr.conrelid, array_agg(CAST(attr.attname AS TEXT) ORDER BY attr.ord) AS cols, attr.conname, min(attr.description) AS description, min(attr.indnkeyatts) AS indnkeyatts, bool_and(attr.indnullsnotdistinct) AS indnullsnotdistinct 
    FROM (SELECT con.conrelid AS conrelid, con.conname AS conname, con.description AS description, con.ord AS ord, con.indnkeyatts AS indnkeyatts, con.indnullsnotdistinct AS indnullsnotdistinct, pg_catalog.pg_attribute.attname AS attname 
    FROM pg_catalog.pg_attribute JOIN (SELECT pg_catalog.pg_constraint.conrelid AS conrelid, pg_catalog.pg_constraint.conname AS conname, unnest(pg_catalog.pg_index.indkey) AS attnum, generate_subscripts(pg_catalog.pg_index.indkey, 1) AS ord, pg_catalog.pg_index.indnkeyatts AS indnkeyatts, pg_catalog.pg_index.indnullsnotdistinct AS indnullsnotdistinct, pg_catalog.pg_description.description AS description 
    FROM pg_catalog.pg_constraint JOIN pg_catalog.pg_index ON pg_catalog.pg_constraint.conindid = pg_catalog.pg_index.indexrelid LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_constraint.oid AND pg_catalog.pg_description.classoid = CAST('pg_catalog.pg_constraint' AS REGCLASS) 
    WHERE pg_catalog.pg_constraint.contype = 'p' AND pg_catalog.pg_constraint.conrelid IN (16389)) AS con ON pg_catalog.pg_attribute.attnum = con.attnum AND pg_catalog.pg_attribute.attrelid = con.conrelid 
    WHERE con.conrelid IN (16389)) AS attr GROUP BY attr.conrelid, attr.conname ORDER BY attr.conrelid, attr.conname;

-- title: A.4 SQLAlchemy+psycopg2 #13
-- expect: passthrough
SELECT pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname, CASE WHEN (pg_catalog.pg_constraint.oid IS NOT NULL) THEN pg_catalog.pg_get_constraintdef(pg_catalog.pg_constraint.oid, true) END AS anon_1, nsp_ref.nspname, pg_catalog.pg_description.description 
    FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_constraint ON pg_catalog.pg_class.oid = pg_catalog.pg_constraint.conrelid AND pg_catalog.pg_constraint.contype = 'f' LEFT OUTER JOIN pg_catalog.pg_class AS cls_ref ON cls_ref.oid = pg_catalog.pg_constraint.confrelid LEFT OUTER JOIN pg_catalog.pg_namespace AS nsp_ref ON cls_ref.relnamespace = nsp_ref.oid LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_constraint.oid AND pg_catalog.pg_description.classoid = CAST('pg_catalog.pg_constraint' AS REGCLASS) JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_namespace.nspname = 'public' AND pg_catalog.pg_class.relname IN ('adult') ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname;

-- title: A.4 SQLAlchemy+psycopg2 #14
-- expect: passthrough
SELECT pg_catalog.pg_am.oid, pg_catalog.pg_am.amname 
    FROM pg_catalog.pg_am 
    WHERE pg_catalog.pg_am.amname = 'btree';

-- title: A.4 SQLAlchemy+psycopg2 #15
-- expect: passthrough
SELECT pg_catalog.pg_opclass.oid, pg_catalog.pg_opclass.opcname 
    FROM pg_catalog.pg_opclass 
    WHERE NOT pg_catalog.pg_opclass.opcdefault;

-- title: A.4 SQLAlchemy+psycopg2 #16
-- expect: passthrough
SELECT pg_catalog.pg_index.indrelid, pg_catalog.pg_class.relname, pg_catalog.pg_index.indisunique, pg_catalog.pg_index.indisvalid, pg_catalog.pg_constraint.conrelid IS NOT NULL AS has_constraint, pg_catalog.pg_index.indoption, pg_catalog.pg_class.reloptions, pg_catalog.pg_class.relam, CASE WHEN (pg_catalog.pg_index.indpred IS NOT NULL) THEN pg_catalog.pg_get_expr(pg_catalog.pg_index.indpred, pg_catalog.pg_index.indrelid) END AS filter_definition, pg_catalog.pg_index.indnkeyatts, pg_catalog.pg_index.indnullsnotdistinct, idx_cols.elements, idx_cols.elements_is_expr, idx_cols.elements_opclass 
    FROM pg_catalog.pg_index JOIN pg_catalog.pg_class ON pg_catalog.pg_index.indexrelid = pg_catalog.pg_class.oid LEFT OUTER JOIN (SELECT idx_attr.indexrelid AS indexrelid, min(idx_attr.indrelid) AS min_1, array_agg(idx_attr.element ORDER BY idx_attr.ord) AS elements, array_agg(idx_attr.is_expr ORDER BY idx_attr.ord) AS elements_is_expr, array_agg(idx_attr.att_opclass ORDER BY idx_attr.ord) AS elements_opclass 
    FROM (SELECT idx.indexrelid AS indexrelid, idx.indrelid AS indrelid, idx.ord AS ord, CASE WHEN (idx.attnum = 0) THEN pg_catalog.pg_get_indexdef(idx.indexrelid, idx.ord + 1, true) ELSE CAST(pg_catalog.pg_attribute.attname AS TEXT) END AS element, idx.attnum = 0 AS is_expr, CAST(idx.att_opclass AS BIGINT) AS att_opclass 
    FROM (SELECT pg_catalog.pg_index.indexrelid AS indexrelid, pg_catalog.pg_index.indrelid AS indrelid, unnest(pg_catalog.pg_index.indkey) AS attnum, unnest(pg_catalog.pg_index.indclass) AS att_opclass, generate_subscripts(pg_catalog.pg_index.indkey, 1) AS ord 
    FROM pg_catalog.pg_index 
    WHERE NOT pg_catalog.pg_index.indisprimary AND pg_catalog.pg_index.indrelid IN (16389)) AS idx LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_attribute.attnum = idx.attnum AND pg_catalog.pg_attribute.attrelid = idx.indrelid 
    WHERE idx.indrelid IN (16389)) AS idx_attr GROUP BY idx_attr.indexrelid) AS idx_cols ON pg_catalog.pg_index.indexrelid = idx_cols.indexrelid LEFT OUTER JOIN pg_catalog.pg_constraint ON pg_catalog.pg_index.indrelid = pg_catalog.pg_constraint.conrelid AND pg_catalog.pg_index.indexrelid = pg_catalog.pg_constraint.conindid AND pg_catalog.pg_constraint.contype = ANY (ARRAY['p', 'u', 'x']) 
    WHERE pg_catalog.pg_index.indrelid IN (16389) AND NOT pg_catalog.pg_index.indisprimary ORDER BY pg_catalog.pg_index.indrelid, pg_catalog.pg_class.relname;

-- title: A.5 SQLAlchemy+psycopg 3 #1
-- expect: passthrough
SAVEPOINT "_pg3_1";

-- title: A.5 SQLAlchemy+psycopg 3 #2
-- expect: passthrough
SELECT
        typname AS name, oid, typarray AS array_oid,
        oid::regtype::text AS regtype, typdelim AS delimiter
    FROM pg_type t
    WHERE t.oid = to_regtype($1)
    ORDER BY t.oid;

-- title: A.5 SQLAlchemy+psycopg 3 #3
-- expect: passthrough
RELEASE "_pg3_1";

-- title: A.5 SQLAlchemy+psycopg 3 #4
-- expect: passthrough
SELECT pg_catalog.pg_namespace.nspname 
    FROM pg_catalog.pg_namespace 
    WHERE (pg_catalog.pg_namespace.nspname NOT LIKE $1::VARCHAR || '%' ESCAPE '/') ORDER BY pg_catalog.pg_namespace.nspname;

-- title: A.5 SQLAlchemy+psycopg 3 #5
-- expect: passthrough
SELECT pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$1::VARCHAR, $2::VARCHAR]) AND pg_catalog.pg_class.relpersistence != $3::VARCHAR AND pg_catalog.pg_namespace.nspname = $4::VARCHAR;

-- title: A.5 SQLAlchemy+psycopg 3 #6
-- expect: passthrough
SELECT pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$1::VARCHAR]) AND pg_catalog.pg_class.relpersistence != $2::VARCHAR AND pg_catalog.pg_namespace.nspname = $3::VARCHAR;

-- title: A.5 SQLAlchemy+psycopg 3 #7
-- expect: passthrough
SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type, CASE WHEN pg_catalog.pg_attribute.atthasdef THEN (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1 
    FROM pg_catalog.pg_attrdef 
    WHERE pg_catalog.pg_attribute.atthasdef AND pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum) ELSE NULL END AS "default", pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, pg_catalog.pg_description.description AS comment, pg_catalog.pg_attribute.attgenerated AS generated, CASE WHEN (pg_catalog.pg_attribute.attidentity != $1::VARCHAR) THEN (SELECT json_build_object($2::VARCHAR, pg_catalog.pg_attribute.attidentity = $3::VARCHAR, $4::VARCHAR, pg_catalog.pg_sequence.seqstart, $5::VARCHAR, pg_catalog.pg_sequence.seqincrement, $6::VARCHAR, pg_catalog.pg_sequence.seqmin, $7::VARCHAR, pg_catalog.pg_sequence.seqmax, $8::VARCHAR, pg_catalog.pg_sequence.seqcache, $9::VARCHAR, pg_catalog.pg_sequence.seqcycle) AS json_build_object_1 
    FROM pg_catalog.pg_sequence 
    WHERE pg_catalog.pg_attribute.attidentity != $10::VARCHAR AND pg_catalog.pg_sequence.seqrelid = CAST(CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(pg_catalog.pg_attribute.attrelid AS REGCLASS) AS TEXT), pg_catalog.pg_attribute.attname) AS REGCLASS) AS OID)) ELSE NULL END AS identity_options, CASE WHEN (pg_catalog.pg_attribute.attcollation != $11::INTEGER AND (SELECT pg_catalog.pg_type.typcollation 
    FROM pg_catalog.pg_type 
    WHERE pg_catalog.pg_type.oid = pg_catalog.pg_attribute.atttypid) != pg_catalog.pg_attribute.attcollation) THEN (SELECT json_build_object($12::VARCHAR, pg_catalog.pg_collation.collname, $13::VARCHAR, CASE WHEN pg_catalog.pg_collation_is_visible(pg_catalog.pg_collation.oid) THEN NULL ELSE pg_catalog.pg_namespace.nspname END) AS json_build_object_9 
    FROM pg_catalog.pg_collation JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_collation.collnamespace 
    WHERE pg_catalog.pg_collation.oid = pg_catalog.pg_attribute.attcollation) ELSE NULL END AS collation 
    FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attribute.attnum > $14::SMALLINT AND NOT pg_catalog.pg_attribute.attisdropped LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_description.objsubid = pg_catalog.pg_attribute.attnum JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$15::VARCHAR, $16::VARCHAR, $17::VARCHAR, $18::VARCHAR, $19::VARCHAR]) AND pg_catalog.pg_namespace.nspname = $20::VARCHAR AND pg_catalog.pg_class.relname IN ($21::VARCHAR) ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum;

-- title: A.5 SQLAlchemy+psycopg 3 #8
-- expect: passthrough
SELECT pg_catalog.pg_class.oid, pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$1::VARCHAR, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, $5::VARCHAR]) AND pg_catalog.pg_namespace.nspname = $6::VARCHAR AND pg_catalog.pg_class.relname IN ($7::VARCHAR);

-- title: A.5 SQLAlchemy+psycopg 3 #9
-- expect: passthrough
SELECT attr.conrelid, array_agg(CAST(attr.attname AS TEXT) ORDER BY attr.ord) AS cols, attr.conname, min(attr.description) AS description, min(attr.indnkeyatts) AS indnkeyatts, bool_and(attr.indnullsnotdistinct) AS indnullsnotdistinct 
    FROM (SELECT con.conrelid AS conrelid, con.conname AS conname, con.description AS description, con.ord AS ord, con.indnkeyatts AS indnkeyatts, con.indnullsnotdistinct AS indnullsnotdistinct, pg_catalog.pg_attribute.attname AS attname 
    FROM pg_catalog.pg_attribute JOIN (SELECT pg_catalog.pg_constraint.conrelid AS conrelid, pg_catalog.pg_constraint.conname AS conname, unnest(pg_catalog.pg_index.indkey) AS attnum, generate_subscripts(pg_catalog.pg_index.indkey, $1::INTEGER) AS ord, pg_catalog.pg_index.indnkeyatts AS indnkeyatts, pg_catalog.pg_index.indnullsnotdistinct AS indnullsnotdistinct, pg_catalog.pg_description.description AS description 
    FROM pg_catalog.pg_constraint JOIN pg_catalog.pg_index ON pg_catalog.pg_constraint.conindid = pg_catalog.pg_index.indexrelid LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_constraint.oid AND pg_catalog.pg_description.classoid = CAST($2 AS REGCLASS) 
    WHERE pg_catalog.pg_constraint.contype = $3::VARCHAR AND pg_catalog.pg_constraint.conrelid IN ($4)) AS con ON pg_catalog.pg_attribute.attnum = con.attnum AND pg_catalog.pg_attribute.attrelid = con.conrelid 
    WHERE con.conrelid IN ($4)) AS attr GROUP BY attr.conrelid, attr.conname ORDER BY attr.conrelid, attr.conname;

-- title: A.5 SQLAlchemy+psycopg 3 #10
-- expect: passthrough
SELECT pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname, CASE WHEN (pg_catalog.pg_constraint.oid IS NOT NULL) THEN pg_catalog.pg_get_constraintdef(pg_catalog.pg_constraint.oid, $1) END AS anon_1, nsp_ref.nspname, pg_catalog.pg_description.description 
    FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_constraint ON pg_catalog.pg_class.oid = pg_catalog.pg_constraint.conrelid AND pg_catalog.pg_constraint.contype = $2::VARCHAR LEFT OUTER JOIN pg_catalog.pg_class AS cls_ref ON cls_ref.oid = pg_catalog.pg_constraint.confrelid LEFT OUTER JOIN pg_catalog.pg_namespace AS nsp_ref ON cls_ref.relnamespace = nsp_ref.oid LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_constraint.oid AND pg_catalog.pg_description.classoid = CAST($3 AS REGCLASS) JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$4::VARCHAR, $5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR]) AND pg_catalog.pg_namespace.nspname = $9::VARCHAR AND pg_catalog.pg_class.relname IN ($10::VARCHAR) ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname;

-- title: A.5 SQLAlchemy+psycopg 3 #11
-- expect: passthrough
SELECT pg_catalog.pg_am.oid, pg_catalog.pg_am.amname 
    FROM pg_catalog.pg_am 
    WHERE pg_catalog.pg_am.amname = $1::VARCHAR;

-- title: A.5 SQLAlchemy+psycopg 3 #12
-- expect: passthrough
SELECT pg_catalog.pg_index.indrelid, pg_catalog.pg_class.relname, pg_catalog.pg_index.indisunique, pg_catalog.pg_index.indisvalid, pg_catalog.pg_constraint.conrelid IS NOT NULL AS has_constraint, pg_catalog.pg_index.indoption, pg_catalog.pg_class.reloptions, pg_catalog.pg_class.relam, CASE WHEN (pg_catalog.pg_index.indpred IS NOT NULL) THEN pg_catalog.pg_get_expr(pg_catalog.pg_index.indpred, pg_catalog.pg_index.indrelid) END AS filter_definition, pg_catalog.pg_index.indnkeyatts, pg_catalog.pg_index.indnullsnotdistinct, idx_cols.elements, idx_cols.elements_is_expr, idx_cols.elements_opclass 
    FROM pg_catalog.pg_index JOIN pg_catalog.pg_class ON pg_catalog.pg_index.indexrelid = pg_catalog.pg_class.oid LEFT OUTER JOIN (SELECT idx_attr.indexrelid AS indexrelid, min(idx_attr.indrelid) AS min_1, array_agg(idx_attr.element ORDER BY idx_attr.ord) AS elements, array_agg(idx_attr.is_expr ORDER BY idx_attr.ord) AS elements_is_expr, array_agg(idx_attr.att_opclass ORDER BY idx_attr.ord) AS elements_opclass 
    FROM (SELECT idx.indexrelid AS indexrelid, idx.indrelid AS indrelid, idx.ord AS ord, CASE WHEN (idx.attnum = $1::INTEGER) THEN pg_catalog.pg_get_indexdef(idx.indexrelid, idx.ord + $2::INTEGER, $3) ELSE CAST(pg_catalog.pg_attribute.attname AS TEXT) END AS element, idx.attnum = $4::INTEGER AS is_expr, CAST(idx.att_opclass AS BIGINT) AS att_opclass 
    FROM (SELECT pg_catalog.pg_index.indexrelid AS indexrelid, pg_catalog.pg_index.indrelid AS indrelid, unnest(pg_catalog.pg_index.indkey) AS attnum, unnest(pg_catalog.pg_index.indclass) AS att_opclass, generate_subscripts(pg_catalog.pg_index.indkey, $5::INTEGER) AS ord 
    FROM pg_catalog.pg_index 
    WHERE NOT pg_catalog.pg_index.indisprimary AND pg_catalog.pg_index.indrelid IN ($6)) AS idx LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_attribute.attnum = idx.attnum AND pg_catalog.pg_attribute.attrelid = idx.indrelid 
    WHERE idx.indrelid IN ($6)) AS idx_attr GROUP BY idx_attr.indexrelid) AS idx_cols ON pg_catalog.pg_index.indexrelid = idx_cols.indexrelid LEFT OUTER JOIN pg_catalog.pg_constraint ON pg_catalog.pg_index.indrelid = pg_catalog.pg_constraint.conrelid AND pg_catalog.pg_index.indexrelid = pg_catalog.pg_constraint.conindid AND pg_catalog.pg_constraint.contype = ANY (ARRAY[$7::VARCHAR, $8::VARCHAR, $9::VARCHAR]) 
    WHERE pg_catalog.pg_index.indrelid IN ($6) AND NOT pg_catalog.pg_index.indisprimary ORDER BY pg_catalog.pg_index.indrelid, pg_catalog.pg_class.relname;

-- title: A.6 SQLAlchemy+asyncpg #1
-- expect: passthrough
SELECT pg_catalog.pg_class.relname 
    FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
    WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$1::VARCHAR, $2::VARCHAR]) AND pg_catalog.pg_class.relpersistence != $3::CHAR AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != $4::VARCHAR;

-- title: A.7 pgjdbc 42.7 #1
-- expect: passthrough
SET application_name = 'jdbc-test';

-- title: A.7 pgjdbc 42.7 #2
-- expect: passthrough
SELECT datname AS "TABLE_CAT" FROM pg_catalog.pg_database WHERE datallowconn = true ORDER BY datname;

-- title: A.7 pgjdbc 42.7 #3
-- expect: passthrough
SELECT nspname AS "TABLE_SCHEM", current_database() AS "TABLE_CATALOG" FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY "TABLE_SCHEM";

-- title: A.7 pgjdbc 42.7 #4
-- expect: passthrough
SELECT current_database() AS "TABLE_CAT", n.nspname AS "TABLE_SCHEM", c.relname AS "TABLE_NAME",  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS "TABLE_TYPE", d.description AS "REMARKS",  '' as "TYPE_CAT", '' as "TYPE_SCHEM", '' as "TYPE_NAME", '' AS "SELF_REFERENCING_COL_NAME", '' AS "REF_GENERATION"  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE $1 AND c.relname LIKE $2 AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'v' AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'm' )  OR ( c.relkind = 'f' )  OR ( c.relkind = 'p' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )  ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME";

-- title: A.7 pgjdbc 42.7 #5
-- expect: passthrough
select current_catalog;

-- title: A.7 pgjdbc 42.7 #6
-- expect: passthrough
SELECT * FROM (SELECT current_database() AS current_database, n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull  OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE $1 AND c.relname LIKE $2) c WHERE true  ORDER BY nspname,c.relname,attnum;

-- title: A.7 pgjdbc 42.7 #7
-- expect: passthrough
SELECT        result.TABLE_CAT AS "TABLE_CAT",        result.TABLE_SCHEM AS "TABLE_SCHEM",        result.TABLE_NAME AS "TABLE_NAME",        result.COLUMN_NAME AS "COLUMN_NAME",        result.KEY_SEQ AS "KEY_SEQ",        result.PK_NAME AS "PK_NAME"FROM      (SELECT current_database() AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,   (information_schema._pg_expandarray(con.conkey)).n AS KEY_SEQ, con.conname AS PK_NAME,   information_schema._pg_expandarray(con.conkey) AS KEYS, a.attnum AS A_ATTNUM FROM pg_catalog.pg_constraint con   JOIN pg_catalog.pg_class ct ON (con.conrelid = ct.oid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_attribute a ON (a.attrelid = ct.oid) WHERE con.contype = 'p'  AND n.nspname = $1 AND ct.relname = $2 ) result where  result.A_ATTNUM = (result.KEYS).x  ORDER BY result.table_name, result.pk_name, result.key_seq;

-- title: A.7 pgjdbc 42.7 #8
-- expect: dp
SELECT count(*), sum(hours_per_week) FROM adult;

-- title: A.7 pgjdbc 42.7 #9
-- expect: dp
-- params: [30, 'Male']
SELECT count(*) FROM adult WHERE age > $1 AND sex = $2;

-- title: A.7 pgjdbc 42.7 #10
-- expect: sqlstate 42501
SELECT id FROM adult;

-- title: A.8 pgjdbc 42.5 #1
-- expect: passthrough
SET extra_float_digits = 3;

-- title: A.8 pgjdbc 42.5 #2
-- expect: passthrough
SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY TABLE_SCHEM;

-- title: A.8 pgjdbc 42.5 #3
-- expect: passthrough
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE 'public' AND c.relname LIKE '%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'v' AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'm' )  OR ( c.relkind = 'f' )  OR ( c.relkind = 'p' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME;

-- title: A.8 pgjdbc 42.5 #4
-- expect: passthrough
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE 'public' AND c.relname LIKE 'adult') c WHERE true  ORDER BY nspname,c.relname,attnum;

-- title: A.8 pgjdbc 42.5 #5
-- expect: passthrough
SELECT        result.TABLE_CAT,        result.TABLE_SCHEM,        result.TABLE_NAME,        result.COLUMN_NAME,        result.KEY_SEQ,        result.PK_NAME FROM      (SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,   (information_schema._pg_expandarray(i.indkey)).n AS KEY_SEQ, ci.relname AS PK_NAME,   information_schema._pg_expandarray(i.indkey) AS KEYS, a.attnum AS A_ATTNUM FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_attribute a ON (ct.oid = a.attrelid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON ( a.attrelid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid) WHERE true  AND n.nspname = 'public' AND ct.relname = 'adult' AND i.indisprimary  ) result where  result.A_ATTNUM = (result.KEYS).x  ORDER BY result.table_name, result.pk_name, result.key_seq;

-- title: A.9 Metabase-like JDBC #1
-- expect: passthrough
SET application_name = 'Metabase v0.xx [test]';

-- title: A.9 Metabase-like JDBC #2
-- expect: passthrough
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;

-- title: A.9 Metabase-like JDBC #3
-- expect: passthrough
BEGIN READ ONLY;

-- title: A.9 Metabase-like JDBC #4
-- expect: passthrough
show timezone;

-- title: A.9 Metabase-like JDBC #5
-- expect: passthrough
SET SESSION TIMEZONE TO 'UTC';

-- title: A.9 Metabase-like JDBC #6
-- expect: dp
SELECT "public"."adult"."sex" AS "sex", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex" ORDER BY "public"."adult"."sex" ASC;

-- title: A.9 Metabase-like JDBC #7
-- expect: passthrough
SELECT c.oid, a.attnum, a.attname, c.relname, n.nspname, a.attnotnull OR (t.typtype = 'd' AND t.typnotnull), a.attidentity != '' OR pg_catalog.pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (c.oid = a.attrelid) JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid) LEFT JOIN pg_catalog.pg_attrdef d ON (d.adrelid = a.attrelid AND d.adnum = a.attnum) JOIN (SELECT 16389 AS oid , 4 AS attnum) vals ON (c.oid = vals.oid AND a.attnum = vals.attnum) where c.oid in (16389);

-- title: A.9 Metabase-like JDBC #8
-- expect: probe
SELECT TRUE AS "_" FROM "public"."adult" WHERE 1 <> 1 LIMIT 0;

-- title: A.9 Metabase-like JDBC #9
-- expect: sqlstate 42501
SELECT * FROM "public"."adult" LIMIT 1;

-- title: A.9 Metabase-like JDBC #10
-- expect: passthrough
SELECT c.oid, a.attnum, a.attname, c.relname, n.nspname, a.attnotnull OR (t.typtype = 'd' AND t.typnotnull), a.attidentity != '' OR pg_catalog.pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (c.oid = a.attrelid) JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid) LEFT JOIN pg_catalog.pg_attrdef d ON (d.adrelid = a.attrelid AND d.adnum = a.attnum) JOIN (SELECT 16389 AS oid , 1 AS attnum UNION ALL SELECT 16389, 2 UNION ALL SELECT 16389, 3 UNION ALL SELECT 16389, 5 UNION ALL SELECT 16389, 6) vals ON (c.oid = vals.oid AND a.attnum = vals.attnum) where c.oid in (16389);

-- title: A.10 node-postgres #1
-- expect: passthrough
SELECT 1 AS x;

-- title: A.11 pg8000 #1
-- expect: passthrough
begin transaction;

-- title: A.11 pg8000 #2
-- expect: passthrough
rollback;

-- title: A.12 pgcli #1
-- expect: passthrough
show time zone;

-- title: A.12 pgcli #2
-- expect: passthrough
SELECT d.datname as "Name",
                pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
                pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
                d.datcollate as "Collate",
                d.datctype as "Ctype",
                pg_catalog.array_to_string(d.datacl, E'
    ') AS "Access privileges"
            FROM pg_catalog.pg_database d
            ORDER BY 1;

-- Captured by the wire tap of tests/tools (the compatibility suite with real tools, issue 14),
-- from the tools themselves talking to `lapras demo`. OIDs (16390), cursor and statement names
-- are those of the run.

-- title: T.1 ibis 12 (psycopg 3) #1 t.count()
-- expect: dp view=() queries=1 columns=CountStar(adult):20
SELECT COUNT(*) AS "CountStar(adult)" FROM "adult" AS "t0";

-- title: T.1 ibis 12 (psycopg 3) #2 t.filter(...).count(): the filter is a derived table
-- expect: dp view=(age, sex) queries=1 columns=CountStar():20
SELECT COUNT(*) AS "CountStar()" FROM (SELECT * FROM "adult" AS "t0" WHERE "t0"."sex" = 'Female' AND "t0"."age" >= 30 AND "t0"."age" <= 39) AS "t1";

-- title: T.1 ibis 12 (psycopg 3) #3 group_by().aggregate()
-- expect: dp view=(age, sex) queries=4 columns=sex:25,n:20,mean_age:1700
SELECT "t0"."sex", COUNT(*) AS "n", AVG("t0"."age") AS "mean_age" FROM "adult" AS "t0" GROUP BY 1;

-- title: T.1 ibis 12 (psycopg 3) #4 top-k: order_by(desc).limit(3) around the aggregate
-- expect: dp view=(race) queries=5 columns=race:25,n:20
SELECT * FROM (SELECT "t0"."race", COUNT(*) AS "n" FROM "adult" AS "t0" GROUP BY 1) AS "t1" ORDER BY "t1"."n" DESC NULLS LAST LIMIT 3;

-- title: T.1 ibis 12 (psycopg 3) #5 t.head()
-- expect: sqlstate 42501
SELECT * FROM "adult" AS "t0" LIMIT 5;

-- title: T.2 pandas read_sql_table over SQLAlchemy 2
-- expect: sqlstate 42501
SELECT adult.age, adult.workclass, adult.fnlwgt, adult.education, adult.education_num, adult.marital_status, adult.occupation, adult.relationship, adult.race, adult.sex, adult.capital_gain, adult.capital_loss, adult.hours_per_week, adult.native_country, adult.income
FROM adult;

-- title: T.3 ADBC (adbc-driver-postgresql 1.13) #1
-- expect: passthrough
SELECT version();

-- title: T.3 ADBC (adbc-driver-postgresql 1.13) #2
-- expect: passthrough
SELECT
    attrelid,
    attname,
    atttypid
FROM
    pg_catalog.pg_attribute
ORDER BY
    attrelid, attnum;

-- title: T.3 ADBC (adbc-driver-postgresql 1.13) #3
-- expect: passthrough
SELECT oid, typname, typreceive, typbasetype, typrelid, typarray FROM pg_catalog.pg_type WHERE (typreceive != 0 OR typsend != 0) AND typtype != 'r' AND typreceive::TEXT != 'array_recv';

-- title: T.3 ADBC (adbc-driver-postgresql 1.13) #4 rows, read with binary COPY
-- expect: sqlstate 42501
COPY (SELECT * FROM adult) TO STDOUT (FORMAT binary);

-- title: T.4 connectorx 0.4 #1 the row count of a grouped result (before its binary COPY)
-- expect: dp view=() queries=0 columns=count:20
SELECT count(*) FROM (SELECT sex, count(*) AS n FROM adult GROUP BY sex) AS CXTMPTAB_COUNT;

-- title: T.4 connectorx 0.4 #2 the row count of SELECT *
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM (SELECT * FROM adult) AS CXTMPTAB_COUNT;

-- title: T.4 connectorx 0.4 #3 rows, read with binary COPY
-- expect: sqlstate 42501
COPY (SELECT * FROM adult) TO STDOUT WITH BINARY;

-- title: T.5 psqlODBC (odbc-postgresql 13) #1 connection set-up
-- expect: passthrough, passthrough, passthrough
SET DateStyle = 'ISO';SET extra_float_digits = 2;show transaction_isolation;

-- title: T.5 psqlODBC (odbc-postgresql 13) #2
-- expect: passthrough
select oid, typbasetype from pg_type where typname = 'lo';

-- title: T.5 psqlODBC (odbc-postgresql 13) #3 SQLExecute with parameters
-- expect: dp view=(age, sex) queries=2 columns=count:20,avg:1700
-- params: [40, 'Female']
SELECT count(*), avg(age) FROM adult WHERE age > $1 AND sex = $2;

-- title: T.5 psqlODBC (odbc-postgresql 13) #4 freeing a prepared plan
-- expect: passthrough
DEALLOCATE "_PLAN0x562b86c9c290";

-- title: T.5 psqlODBC (odbc-postgresql 13) #5 UseDeclareFetch=1: rows through a cursor
-- expect: passthrough, sqlstate 42501, passthrough
BEGIN;declare "SQL_CUR0x562b86ca68e0" cursor with hold for SELECT * FROM adult;fetch 2 in "SQL_CUR0x562b86ca68e0";

-- title: T.6 Perl DBD::Pg 3.16 #1 a freed server-side statement: SQL DEALLOCATE
-- expect: passthrough
DEALLOCATE dbdpg_p21347_1;

-- title: T.7 Ruby pg 1.4 #1 PG::BasicTypeMapForResults
-- expect: passthrough
				SELECT t.oid, t.typname, t.typelem, t.typdelim, ti.proname AS typinput
				FROM pg_type as t
				JOIN pg_proc as ti ON ti.oid = t.typinput;

-- title: T.7 Ruby pg 1.4 #2 SQL DEALLOCATE of a protocol-level statement
-- expect: passthrough
DEALLOCATE mean_age;

-- title: T.8 SQLAlchemy 2 stream_results=True (psycopg2) #1 rows through a server-side cursor
-- expect: sqlstate 42501
DECLARE "c_7f1289eb0410_2" CURSOR WITHOUT HOLD FOR SELECT * FROM adult;

-- title: T.8 SQLAlchemy 2 stream_results=True (psycopg2) #2
-- expect: passthrough
FETCH FORWARD 1 FROM "c_7f1289e9b410_1";

-- title: T.9 psycopg 3 named cursor #1 rows
-- expect: sqlstate 42501
DECLARE "rows" CURSOR FOR SELECT age, sex FROM adult;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #1 the Inspector's columns
-- expect: passthrough
            SELECT a.attname,
              pg_catalog.format_type(a.atttypid, a.atttypmod),
              (
                SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid)
                FROM pg_catalog.pg_attrdef d
                WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum
                AND a.atthasdef
              ) AS DEFAULT,
              a.attnotnull,
              a.attrelid as table_oid,
              pgd.description as comment,
              a.attgenerated as generated,
                              (SELECT json_build_object(
                    'always', a.attidentity = 'a',
                    'start', s.seqstart,
                    'increment', s.seqincrement,
                    'minvalue', s.seqmin,
                    'maxvalue', s.seqmax,
                    'cache', s.seqcache,
                    'cycle', s.seqcycle)
                FROM pg_catalog.pg_sequence s
                JOIN pg_catalog.pg_class c on s.seqrelid = c."oid"
                WHERE c.relkind = 'S'
                AND a.attidentity != ''
                AND s.seqrelid = pg_catalog.pg_get_serial_sequence(
                    a.attrelid::regclass::text, a.attname
                )::regclass::oid
                ) as identity_options
            FROM pg_catalog.pg_attribute a
            LEFT JOIN pg_catalog.pg_description pgd ON (
                pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum)
            WHERE a.attrelid = 16390
            AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #2 bar chart, COUNT(*) by sex
-- expect: dp view=(sex) queries=2 columns=sex:25,count:20
SELECT
  sex AS sex,
  COUNT(*) AS count
FROM public.adult
GROUP BY
  sex
ORDER BY
  count DESC
LIMIT 10000;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #3 big number, AVG(age)
-- expect: dp view=(age) queries=2 columns=AVG(age):1700
SELECT
  AVG(age) AS "AVG(age)"
FROM public.adult
LIMIT 10000;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #4 a filtered chart
-- expect: dp view=(age, sex) queries=1 columns=count:20
SELECT
  COUNT(*) AS count
FROM public.adult
WHERE
  sex = 'Female' AND age >= 30 AND age < 40
LIMIT 10000;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #5 a native filter's value list
-- expect: dp view=() queries=0 columns=sex:25
SELECT
  sex AS sex
FROM public.adult
GROUP BY
  sex
ORDER BY
  sex ASC
LIMIT 1000;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #6 the explore view's column values
-- expect: dp view=() queries=0 columns=column_values:25
SELECT DISTINCT sex AS column_values
FROM public.adult
 LIMIT 10000;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #7 SQL Lab, an aggregate (its LIMIT added)
-- expect: dp view=(age, sex) queries=4 columns=sex:25,n:20,mean_age:1700
SELECT
  sex,
  COUNT(*) AS n,
  AVG(age) AS mean_age
FROM adult
GROUP BY
  sex
LIMIT 1001;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #8 SQL Lab, rows
-- expect: sqlstate 42501
SELECT
  *
FROM adult
LIMIT 1001;

-- title: T.10 Superset 6.1 (SQLAlchemy 1.4, psycopg2) #9 a chart's samples pane
-- expect: sqlstate 42501
SELECT
  age AS age,
  workclass AS workclass,
  fnlwgt AS fnlwgt,
  education AS education,
  education_num AS education_num,
  marital_status AS marital_status,
  occupation AS occupation,
  relationship AS relationship,
  race AS race,
  sex AS sex,
  capital_gain AS capital_gain,
  capital_loss AS capital_loss,
  hours_per_week AS hours_per_week,
  native_country AS native_country,
  income AS income
FROM public.adult
LIMIT 100;

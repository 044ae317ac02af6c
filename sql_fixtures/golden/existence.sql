-- Probes tools send (rewriter/probes.py; docs/sql.md §3): existence checks and limited row
-- counts answered from a noisy count, zero-row probes inside wrappers. Each accepted case with a
-- view is run on PostgreSQL and diffed against the rewriter's answer on the exact histogram.

-- title: Django's QuerySet.exists(): a row of constants when a row exists
-- expect: dp view=(age) queries=1 columns=a:23
SELECT 1 AS "a" FROM "adult" WHERE "adult"."age" > 80 LIMIT 1;

-- title: Django's exists() when no row exists: no row
-- expect: dp view=(age, race, sex) queries=1 columns=a:23
SELECT (1) AS "a" FROM "adult" WHERE "adult"."age" > 89 AND "adult"."sex" = 'Female' AND "adult"."race" = 'Other' LIMIT 1;

-- title: peewee's exists() with a table alias
-- expect: dp view=(sex) queries=1 columns=?column?:23
SELECT 1 FROM "adult" AS "t1" WHERE ("t1"."sex" = 'Female') LIMIT 1;

-- title: SQLAlchemy's select(exists().where(...))
-- expect: dp view=(native_country) queries=1 columns=anon_1:16
SELECT EXISTS (SELECT * FROM adult WHERE adult.native_country = 'Holand-Netherlands') AS anon_1;

-- title: EXISTS that is false
-- expect: dp view=() queries=1 columns=exists:16
SELECT EXISTS (SELECT 1 FROM adult WHERE age > 90);

-- title: NOT EXISTS, named as PostgreSQL names it
-- expect: dp view=(age) queries=2 columns=none_at_90:16,?column?:16
SELECT NOT EXISTS (SELECT 1 FROM adult WHERE age = 90) AS none_at_90, NOT EXISTS (SELECT 1 FROM adult WHERE age = 17);

-- title: several existence checks and a constant in one select list
-- expect: dp view=(age, workclass) queries=2 columns=exists:16,exists:16,l:25
SELECT EXISTS (SELECT 1 FROM adult a WHERE a.age = 90 LIMIT 1), EXISTS (SELECT 1 FROM adult b WHERE b.workclass = 'Never-worked' AND b.age > 60), 'label' AS l;

-- title: Superset's raw-records row count of a limited subquery
-- expect: dp view=() queries=1 columns=rowcount:20
SELECT COUNT(*) AS rowcount FROM (SELECT age AS age, sex AS sex FROM public.adult LIMIT 10000) AS rowcount_qry;

-- title: a limited row count with a filter, below its limit
-- expect: dp view=(education) queries=1 columns=rowcount:20
SELECT COUNT(*) AS rowcount FROM (SELECT age AS age, education AS education FROM public.adult WHERE education = 'Doctorate' LIMIT 1000) AS rowcount_qry;

-- title: a limited row count with ORDER BY, LIMIT and OFFSET
-- expect: dp view=(age) queries=1 columns=count:20
SELECT count(*) FROM (SELECT * FROM adult WHERE age > 80 ORDER BY age LIMIT 50 OFFSET 20) q;

-- title: psqlODBC's zero-row probe in a cursor (UseDeclareFetch=1: Excel, MS Query)
-- expect: dp
DECLARE "SQL_CUR0x55d0c8" CURSOR WITH HOLD FOR SELECT * FROM "public"."adult" WHERE 1=0;

-- title: COPY of a zero-row probe: its columns, no row
-- expect: dp
COPY (SELECT * FROM adult LIMIT 0) TO STDOUT;

-- title: an existence check over rows of several tables stays refused
-- expect: sqlstate 42501
SELECT 1 FROM adult a, adult b LIMIT 1;

-- title: LIMIT 2 of constants reads rows: refused
-- expect: sqlstate 42501
SELECT 1 FROM adult WHERE age > 30 LIMIT 2;


-- title: an existence check written with FETCH FIRST 1 ROWS ONLY (the SQL standard's LIMIT)
-- expect: dp view=(age) queries=1 columns=?column?:23
SELECT 1 FROM adult WHERE age > 30 FETCH FIRST 1 ROWS ONLY;

-- title: an EXISTS test inside an expression (SQLAlchemy's case((exists(...), 1), else_=0))
-- expect: dp view=(age) queries=1 columns=case:23
SELECT CASE WHEN EXISTS (SELECT 1 FROM adult WHERE age > 80) THEN 1 ELSE 0 END;

-- title: a row of constants WHERE EXISTS: one row when rows exist
-- expect: dp view=(age) queries=1 columns=found:23
SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM adult WHERE age > 80);

-- title: a row of constants WHERE EXISTS: no row when none does
-- expect: dp view=() queries=1 columns=found:23
SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM adult WHERE age > 90);

-- title: EXISTS tests combined with AND and NOT in one expression
-- expect: dp view=(age) queries=2 columns=both_:16
SELECT NOT EXISTS (SELECT 1 FROM adult a WHERE a.age = 90) AND EXISTS (SELECT 1 FROM adult WHERE age = 17) AS both_;

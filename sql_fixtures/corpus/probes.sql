-- Probes tools send (issue 40, "Probes tools send").

-- id: probe.django_exists
-- source: Django 5 QuerySet.exists()
SELECT 1 AS "a" FROM "adult" WHERE "adult"."age" > 80 LIMIT 1;

-- id: probe.peewee_exists
-- source: peewee 3 .exists()
SELECT 1 FROM "adult" AS "t1" WHERE ("t1"."sex" = 'Female') LIMIT 1;

-- id: probe.exists_function
-- source: SQLAlchemy select(exists().where(...))
SELECT EXISTS (SELECT * FROM adult WHERE adult.native_country = 'Holand-Netherlands') AS anon_1;

-- id: probe.exists_empty
-- source: analyst, an existence check that is false
SELECT EXISTS (SELECT 1 FROM adult WHERE age > 90);

-- id: probe.not_exists
-- source: analyst
SELECT NOT EXISTS (SELECT 1 FROM checkins WHERE hour = 3) AS none_at_three;

-- id: probe.superset_rowcount
-- source: Superset 6.1 table chart in raw-records mode, the pagination count
SELECT COUNT(*) AS rowcount FROM (SELECT age AS age, sex AS sex FROM public.adult LIMIT 10000) AS rowcount_qry;

-- id: probe.superset_rowcount_filtered
-- source: Superset 6.1 raw-records count with a filter
SELECT COUNT(*) AS rowcount FROM (SELECT age AS age, education AS education FROM public.adult WHERE education = 'Doctorate' LIMIT 1000) AS rowcount_qry;

-- id: probe.odbc_cursor_zero_rows
-- source: psqlODBC UseDeclareFetch=1 (Excel / MS Query) zero-row probe inside a cursor
-- setup: BEGIN; declare "SQL_CUR0x55d0c8" cursor with hold for SELECT * FROM "public"."adult" WHERE 1=0
fetch 100 in "SQL_CUR0x55d0c8";

-- id: probe.limit_zero
-- source: Tableau column probe
SELECT * FROM "public"."checkins" "checkins" LIMIT 0;

-- id: probe.metabase_false
-- source: Metabase sync probe
SELECT TRUE AS "_" FROM "public"."checkins" WHERE 1 <> 1 LIMIT 0;

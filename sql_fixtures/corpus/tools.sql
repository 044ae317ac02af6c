-- SQL exactly as BI tools, ORMs and dataframe libraries generate it over Adult.

-- id: tool.metabase.avg_by_group
-- source: Metabase 0.50, average of hours_per_week by education
SELECT "public"."adult"."education" AS "education", AVG("public"."adult"."hours_per_week") AS "avg" FROM "public"."adult" GROUP BY "public"."adult"."education" ORDER BY "public"."adult"."education" ASC;

-- id: tool.metabase.auto_bin
-- source: Metabase 0.50, count by age: Auto binned
SELECT ((FLOOR((("public"."adult"."age" - 15.0) / 5.0)) * 5.0) + 15.0) AS "age", COUNT(*) AS "count" FROM "public"."adult" GROUP BY ((FLOOR((("public"."adult"."age" - 15.0) / 5.0)) * 5.0) + 15.0) ORDER BY ((FLOOR((("public"."adult"."age" - 15.0) / 5.0)) * 5.0) + 15.0) ASC;

-- id: tool.metabase.distinct
-- source: Metabase 0.50, number of distinct values of occupation
SELECT COUNT(DISTINCT "public"."adult"."occupation") AS "count" FROM "public"."adult";

-- id: tool.metabase.contains
-- source: Metabase 0.50, filter "contains" (case-insensitive)
SELECT COUNT(*) AS "count" FROM "public"."adult" WHERE (LOWER("public"."adult"."occupation") LIKE '%serv%');

-- id: tool.metabase.two_breakouts
-- source: Metabase 0.50, count by sex and income
SELECT "public"."adult"."sex" AS "sex", "public"."adult"."income" AS "income", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex", "public"."adult"."income" ORDER BY "public"."adult"."sex" ASC, "public"."adult"."income" ASC;

-- id: tool.metabase.sum_and_cumsum
-- source: Metabase 0.50, cumulative sum of count by education_num
SELECT "public"."adult"."education_num" AS "education_num", SUM(COUNT(*)) OVER (ORDER BY "public"."adult"."education_num" ASC ROWS UNBOUNDED PRECEDING) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."education_num" ORDER BY "public"."adult"."education_num" ASC;

-- id: tool.metabase.stddev
-- source: Metabase 0.50, standard deviation of age
SELECT STDDEV_POP("public"."adult"."age") AS "stddev" FROM "public"."adult";

-- id: tool.metabase.nested
-- source: Metabase 0.50, a question built on a saved question (nested source query)
SELECT "source"."sex" AS "sex", COUNT(*) AS "count" FROM (SELECT "public"."adult"."sex" AS "sex", "public"."adult"."age" AS "age" FROM "public"."adult" WHERE "public"."adult"."age" >= 40) AS "source" GROUP BY "source"."sex" ORDER BY "source"."sex" ASC;

-- id: tool.tableau.records
-- source: Tableau 2024, Number of Records by sex
SELECT "adult"."sex" AS "sex", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: tool.tableau.sum_bigint
-- source: Tableau 2024, SUM(hours_per_week)
SELECT "adult"."workclass" AS "workclass", SUM(CAST("adult"."hours_per_week" AS BIGINT)) AS "sum:hours_per_week:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: tool.tableau.avg_double
-- source: Tableau 2024, AVG(age) by race
SELECT "adult"."race" AS "race", AVG(CAST("adult"."age" AS DOUBLE PRECISION)) AS "avg:age:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: tool.tableau.countd
-- source: Tableau 2024, COUNTD(education)
SELECT COUNT(DISTINCT "adult"."education") AS "ctd:education:ok" FROM "public"."adult" "adult" HAVING (COUNT(1) > 0);

-- id: tool.tableau.filter_in
-- source: Tableau 2024, categorical filter
SELECT "adult"."marital_status" AS "marital_status", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" WHERE ("adult"."relationship" IN ('Husband', 'Wife')) GROUP BY 1;

-- id: tool.tableau.bins
-- source: Tableau 2024, bins of age of size 10
SELECT (CAST(FLOOR(CAST("adult"."age" AS DOUBLE PRECISION) / 10) AS BIGINT) * 10) AS "age (bin)", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: tool.tableau.median
-- source: Tableau 2024, MEDIAN(age)
SELECT "adult"."sex" AS "sex", PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY "adult"."age") AS "med:age:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: tool.looker.count
-- source: Looker explore, count by sex
SELECT adult.sex AS "adult.sex", COUNT(*) AS "adult.count" FROM public.adult AS adult GROUP BY 1 ORDER BY 2 DESC FETCH NEXT 500 ROWS ONLY;

-- id: tool.looker.tiers
-- source: Looker tier dimension of age
SELECT CASE WHEN adult.age < 20 THEN '0' WHEN adult.age >= 20 AND adult.age < 30 THEN '1' WHEN adult.age >= 30 AND adult.age < 40 THEN '2' WHEN adult.age >= 40 AND adult.age < 50 THEN '3' WHEN adult.age >= 50 THEN '4' ELSE '5' END AS "adult.age_tier__sort_", CASE WHEN adult.age < 20 THEN 'Below 20' WHEN adult.age >= 20 AND adult.age < 30 THEN '20 to 29' WHEN adult.age >= 30 AND adult.age < 40 THEN '30 to 39' WHEN adult.age >= 40 AND adult.age < 50 THEN '40 to 49' WHEN adult.age >= 50 THEN '50 or Above' ELSE 'Undefined' END AS "adult.age_tier", COUNT(*) AS "adult.count" FROM public.adult AS adult GROUP BY 1, 2 ORDER BY 1 FETCH NEXT 500 ROWS ONLY;

-- id: tool.looker.measures
-- source: Looker explore with sum and average measures
SELECT adult.income AS "adult.income", COALESCE(SUM(adult.hours_per_week ), 0) AS "adult.total_hours", AVG(adult.age ) AS "adult.average_age" FROM public.adult AS adult GROUP BY 1 ORDER BY 2 DESC FETCH NEXT 500 ROWS ONLY;

-- id: tool.looker.totals
-- source: Looker row totals query
SELECT COUNT(*) AS "adult.count" FROM public.adult AS adult WHERE (adult.sex ) = 'Female' FETCH NEXT 1 ROWS ONLY;

-- id: tool.powerbi.count
-- source: Power BI DirectQuery, count by race
select "_"."race", "_"."a0" from (select "rows"."race" as "race", count(1) as "a0" from (select "_"."race" from "public"."adult" "_") "rows" group by "race") "_" where not "_"."a0" is null limit 1000001;

-- id: tool.powerbi.sum_filter
-- source: Power BI DirectQuery with a slicer
select "_"."sex", "_"."a0" from (select "rows"."sex" as "sex", sum(cast("rows"."hours_per_week" as numeric)) as "a0" from (select "_"."sex", "_"."hours_per_week" from "public"."adult" "_" where "_"."income" = '>50K') "rows" group by "sex") "_" where not "_"."a0" is null limit 1000001;

-- id: tool.superset.pie
-- source: Superset 6.1 pie chart
SELECT relationship AS relationship, COUNT(*) AS count FROM public.adult GROUP BY relationship ORDER BY count DESC LIMIT 100;

-- id: tool.superset.avg_metric
-- source: Superset 6.1 bar chart, AVG metric, adhoc filter
SELECT education AS education, AVG(hours_per_week) AS "AVG(hours_per_week)" FROM public.adult WHERE race IN ('White', 'Black') GROUP BY education ORDER BY "AVG(hours_per_week)" DESC LIMIT 10000;

-- id: tool.superset.big_number
-- source: Superset 6.1 big number
SELECT COUNT(*) AS count FROM public.adult WHERE age >= 18 LIMIT 50000;

-- id: tool.superset.custom_sql_metric
-- source: Superset 6.1 custom SQL metric
SELECT sex AS sex, SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) * 1.0 / COUNT(*) AS high_income_rate FROM public.adult GROUP BY sex ORDER BY high_income_rate DESC LIMIT 10000;

-- id: tool.superset.virtual_dataset
-- source: Superset 6.1 chart over a virtual dataset
SELECT workclass AS workclass, COUNT(*) AS count FROM (SELECT * FROM public.adult WHERE hours_per_week > 40) AS virtual_table GROUP BY workclass ORDER BY count DESC LIMIT 10000;

-- id: tool.redash.counts
-- source: Redash dashboard widget
SELECT occupation, COUNT(*) AS people FROM adult GROUP BY occupation ORDER BY people DESC;

-- id: tool.pandas.read_sql
-- source: pandas read_sql_query
SELECT sex, income, count(*) AS n FROM adult GROUP BY sex, income;

-- id: tool.pandas.describe_like
-- source: a pandas-style describe over SQL
SELECT count(age) AS count, avg(age) AS mean, stddev_samp(age) AS std, min(age) AS min, percentile_cont(0.25) WITHIN GROUP (ORDER BY age) AS q1, percentile_cont(0.5) WITHIN GROUP (ORDER BY age) AS median, percentile_cont(0.75) WITHIN GROUP (ORDER BY age) AS q3, max(age) AS max FROM adult;

-- id: tool.ibis.value_counts
-- source: ibis 10 value_counts
SELECT "t0"."race", COUNT(*) AS "race_count" FROM "adult" AS "t0" GROUP BY 1;

-- id: tool.ibis.group_agg
-- source: ibis 10 group_by().aggregate()
SELECT "t0"."education", AVG("t0"."hours_per_week") AS "mean_hours", COUNT(*) AS "n" FROM "adult" AS "t0" WHERE "t0"."age" >= 30 GROUP BY 1;

-- id: tool.ibis.topk
-- source: ibis 10 topk
SELECT "t1"."native_country", "t1"."CountStar(adult)" FROM (SELECT "t0"."native_country", COUNT(*) AS "CountStar(adult)" FROM "adult" AS "t0" GROUP BY 1) AS "t1" ORDER BY "t1"."CountStar(adult)" DESC LIMIT 5;

-- id: tool.sqlalchemy.core
-- source: SQLAlchemy 2.0 select(adult.c.sex, func.count()).group_by(...) with literal binds
SELECT adult.sex, count(*) AS count_1 FROM adult WHERE adult.age > 25 GROUP BY adult.sex;

-- id: tool.sqlalchemy.orm_subquery
-- source: SQLAlchemy 2.0 ORM query counted with Query.count()
SELECT count(*) AS count_1 FROM (SELECT adult.age AS adult_age, adult.sex AS adult_sex FROM adult WHERE adult.sex = 'Female' AND adult.age < 30) AS anon_1;

-- id: tool.sqlalchemy.case
-- source: SQLAlchemy 2.0 case() in a group
SELECT CASE WHEN (adult.hours_per_week > 40) THEN 'overtime' ELSE 'regular' END AS anon_1, count(*) AS count_1 FROM adult GROUP BY CASE WHEN (adult.hours_per_week > 40) THEN 'overtime' ELSE 'regular' END;

-- id: tool.grafana.table
-- source: Grafana table panel (no time column)
SELECT race AS "metric", count(*) AS "value" FROM adult GROUP BY 1 ORDER BY 2 DESC;

-- id: tool.dbeaver.count
-- source: DBeaver "Calculate row count" of a filtered result
SELECT COUNT(*) FROM (SELECT * FROM public.adult a WHERE a.sex = 'Male') dbvrcnt;

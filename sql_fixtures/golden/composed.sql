-- Composed questions (issue 40): statements made of several DP aggregates over adult, answered
-- as a plan of releases (each an accepted DP statement, charged and stored on its own) and
-- post-processing over their rows (rewriter/compose.py). Each case is run with every release
-- answered exactly (noise off) and diffed against PostgreSQL: rows, values (numerics with
-- PostgreSQL's scale) and result types. `releases=` counts the distinct releases of its plan.

-- title: a CTE of counts read by an outer aggregate
-- expect: composed releases=1 columns=big:20,people:1700
WITH by_edu AS (SELECT education, count(*) AS n FROM adult GROUP BY 1) SELECT count(*) AS big, sum(n) AS people FROM by_edu WHERE n > 1000;

-- title: shares of a CTE's total through a scalar subquery over the CTE (one release)
-- expect: composed releases=1 columns=race:25,pct:1700
WITH by_race AS (SELECT race, count(*) AS n FROM adult GROUP BY race) SELECT race, round(100.0 * n / (SELECT sum(n) FROM by_race), 1) AS pct FROM by_race ORDER BY pct DESC;

-- title: men vs women per education, two grouped aggregates joined USING the key
-- expect: composed releases=2 columns=education:25,men:20,women:20
SELECT m.education, m.n AS men, w.n AS women FROM (SELECT education, count(*) AS n FROM adult WHERE sex = 'Male' GROUP BY education) m JOIN (SELECT education, count(*) AS n FROM adult WHERE sex = 'Female' GROUP BY education) w USING (education) ORDER BY m.education;

-- title: one CTE referenced twice, joined with itself on the key (one release)
-- expect: composed releases=1 columns=sex:25,rate:1700
WITH c AS (SELECT sex, income, count(*) AS n FROM adult GROUP BY sex, income) SELECT hi.sex, hi.n * 1.0 / (hi.n + lo.n) AS rate FROM c hi JOIN c lo ON hi.sex = lo.sex AND hi.income = '>50K' AND lo.income = '<=50K' ORDER BY hi.sex;

-- title: the average of per-occupation counts
-- expect: composed releases=1 columns=avg:1700
SELECT avg(n) FROM (SELECT occupation, count(*) AS n FROM adult GROUP BY occupation) t;

-- title: max, min and sum over per-education counts
-- expect: composed releases=1 columns=max:20,min:20,sum:1700
SELECT max(n), min(n), sum(n) FROM (SELECT education, count(*) AS n FROM adult GROUP BY education) t;

-- title: an aggregate grouped over grouped aggregates, with FILTER
-- expect: composed releases=1 columns=sex:25,big:20,avg:1700
SELECT sex, count(*) FILTER (WHERE n > 1000) AS big, avg(n) FROM (SELECT sex, race, count(*) AS n FROM adult GROUP BY sex, race) t GROUP BY sex ORDER BY sex;

-- title: the median and the spread of group sizes
-- expect: composed releases=1 columns=median:701,stddev:1700,var:1700
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY n) AS median, stddev(n), variance(n) AS var FROM (SELECT marital_status, count(*) AS n FROM adult GROUP BY 1) t;

-- title: a scalar DP subquery as a threshold: released first, then a public constant
-- expect: composed releases=2 columns=count:20
SELECT count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult);

-- title: a threshold on another column, grouped
-- expect: composed releases=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE hours_per_week > (SELECT avg(hours_per_week) FROM adult) GROUP BY sex ORDER BY sex;

-- title: a scalar subquery in the select list: a share of the total
-- expect: composed releases=2 columns=sex:25,share:1700
SELECT sex, count(*)::numeric / (SELECT count(*) FROM adult) AS share FROM adult GROUP BY sex ORDER BY sex;

-- title: two scalar subqueries without FROM
-- expect: composed releases=2 columns=difference:20
SELECT (SELECT count(*) FROM adult WHERE sex = 'Male') - (SELECT count(*) FROM adult WHERE sex = 'Female') AS difference;

-- title: the gap between two averages
-- expect: composed releases=2 columns=gap:1700
SELECT (SELECT avg(age) FROM adult WHERE sex = 'Male') - (SELECT avg(age) FROM adult WHERE sex = 'Female') AS gap;

-- title: two counts side by side (a comma join of two released rows)
-- expect: composed releases=2 columns=high:20,total:20,pct:1700
SELECT a.n AS high, b.n AS total, round(a.n * 100.0 / b.n, 2) AS pct FROM (SELECT count(*) AS n FROM adult WHERE income = '>50K') a, (SELECT count(*) AS n FROM adult) b;

-- title: a scalar subquery in HAVING
-- expect: composed releases=2 columns=education:25,count:20
SELECT education, count(*) FROM adult GROUP BY education HAVING count(*) > (SELECT count(*) / 16 FROM adult) ORDER BY 2 DESC;

-- title: a scalar subquery compared with an aggregate in the select list (the same batch: one release)
-- expect: composed releases=1 columns=race:25,above:16
SELECT race, count(*) > (SELECT avg(n) FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t) AS above FROM adult GROUP BY race ORDER BY race;

-- title: LIMIT computed from a released count
-- expect: composed releases=2 columns=race:25,count:20
SELECT race, count(*) FROM adult GROUP BY race ORDER BY 2 DESC LIMIT (SELECT count(*) FROM adult) / 10000;

-- title: dbt's test wrapper around a grouped aggregate with HAVING
-- expect: composed releases=1 columns=failures:20,should_warn:16,should_error:16
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select education from adult group by education having count(*) < 100 ) dbt_internal_test;

-- title: dbt's accepted_values test (a CTE inside the wrapped subquery)
-- expect: composed releases=1 columns=failures:20,should_warn:16,should_error:16
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( with all_values as ( select race as value_field, count(*) as n_records from "public"."adult" group by race ) select * from all_values where value_field not in ( 'White','Black' ) ) dbt_internal_test;

-- title: Tableau's top N: the table joined to its own grouped, limited subquery
-- expect: composed releases=2 columns=race:25,sum:Number_of_Records:ok:20
SELECT "adult"."race" AS "race", SUM(1) AS "sum:Number_of_Records:ok" FROM "public"."adult" "adult" INNER JOIN (SELECT "adult"."race" AS "race", SUM(1) AS "$__alias__0" FROM "public"."adult" "adult" GROUP BY 1 ORDER BY 2 DESC, 1 ASC LIMIT 3) "t0" ON ("adult"."race" = "t0"."race") GROUP BY 1;

-- title: Tableau's top N joined IS NOT DISTINCT FROM
-- expect: composed releases=2 columns=education:25,n:20
SELECT a.education, count(*) AS n FROM adult a JOIN (SELECT education FROM adult GROUP BY education ORDER BY count(*) DESC LIMIT 4) t ON (a.education IS NOT DISTINCT FROM t.education) GROUP BY 1 ORDER BY 2 DESC;

-- title: Superset's series limit (the inner's key renamed)
-- expect: composed releases=2 columns=race:25,sex:25,count:20
SELECT race AS race, sex AS sex, COUNT(*) AS count FROM public.adult JOIN (SELECT race AS race__, COUNT(*) AS mme_inner__ FROM public.adult GROUP BY race ORDER BY mme_inner__ DESC LIMIT 2) AS series_limit ON race = race__ GROUP BY race, sex ORDER BY count DESC LIMIT 10000;

-- title: a top N on two keys, USING
-- expect: composed releases=2 columns=sex:25,income:25,avg:1700
SELECT sex, income, avg(age) FROM adult JOIN (SELECT sex, income FROM adult GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT 2) t USING (sex, income) GROUP BY sex, income ORDER BY 1, 2;

-- title: IN a grouped, limited subquery
-- expect: composed releases=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE race IN (SELECT race FROM adult GROUP BY race ORDER BY count(*) DESC LIMIT 2) GROUP BY sex ORDER BY sex;

-- title: NOT IN a subquery of groups over a threshold
-- expect: composed releases=2 columns=count:20
SELECT count(*) FROM adult WHERE occupation NOT IN (SELECT occupation FROM adult GROUP BY occupation HAVING count(*) > 3000);

-- title: a row value IN a subquery of two keys
-- expect: composed releases=2 columns=count:20
SELECT count(*) FROM adult WHERE (sex, income) IN (SELECT sex, income FROM adult GROUP BY 1, 2 HAVING count(*) > 5000);

-- title: INTERSECT of two grouped aggregates
-- expect: composed releases=2 columns=education:25
SELECT education FROM adult WHERE sex = 'Male' GROUP BY education HAVING count(*) > 1000 INTERSECT SELECT education FROM adult WHERE sex = 'Female' GROUP BY education HAVING count(*) > 500 ORDER BY 1;

-- title: EXCEPT of two grouped aggregates
-- expect: composed releases=2 columns=occupation:25
SELECT occupation FROM adult GROUP BY occupation HAVING count(*) > 3000 EXCEPT SELECT occupation FROM adult WHERE age > 50 GROUP BY occupation HAVING count(*) > 600 ORDER BY 1;

-- title: CTEs chained: counts, ranks over them, a filter
-- expect: composed releases=1 columns=marital_status:25,n:20
WITH c AS (SELECT marital_status, count(*) AS n FROM adult GROUP BY marital_status), r AS (SELECT marital_status, n, rank() OVER (ORDER BY n DESC) AS rk FROM c) SELECT marital_status, n FROM r WHERE rk <= 3 ORDER BY rk;

-- title: two CTE aggregates unioned (one batch: one release)
-- expect: composed releases=1 columns=who:25,avg_age:1700
WITH a AS (SELECT 'men' AS who, avg(age) AS avg_age FROM adult WHERE sex = 'Male'), b AS (SELECT 'women' AS who, avg(age) AS avg_age FROM adult WHERE sex = 'Female') SELECT * FROM a UNION ALL SELECT * FROM b ORDER BY who;

-- title: UNION ALL of an aggregate over aggregates and a count (types resolved as PostgreSQL)
-- expect: composed releases=2 columns=what:25,value:1700
SELECT 'average race size' AS what, avg(n) AS value FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t UNION ALL SELECT 'people', count(*) FROM adult ORDER BY 1;

-- title: window functions over a released relation
-- expect: composed releases=1 columns=race:25,n:20,rank:20,share:1700
SELECT race, n, rank() OVER (ORDER BY n DESC), round(n * 100.0 / sum(n) OVER (), 2) AS share FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t ORDER BY n DESC;

-- title: a released relation joined to a VALUES list of labels
-- expect: composed releases=1 columns=sex:25,label:25,n:20
SELECT sex, v.label, t.n FROM (SELECT sex, count(*) AS n FROM adult GROUP BY sex) t JOIN (VALUES ('Male', 'men'), ('Female', 'women')) AS v(sex, label) USING (sex) ORDER BY 1;

-- title: DISTINCT ON over a released relation: the largest race per sex
-- expect: composed releases=1 columns=sex:25,race:25,n:20
SELECT DISTINCT ON (sex) sex, race, n FROM (SELECT sex, race, count(*) AS n FROM adult GROUP BY 1, 2) t ORDER BY sex, n DESC;

-- title: a LEFT JOIN of two grouped aggregates with a condition, coalesced
-- expect: composed releases=2 columns=workclass:25,n:20,rich:20
SELECT a.workclass, a.n, coalesce(b.n, 0) AS rich FROM (SELECT workclass, count(*) AS n FROM adult GROUP BY 1) a LEFT JOIN (SELECT workclass, count(*) AS n FROM adult WHERE income = '>50K' GROUP BY 1 HAVING count(*) > 1000) b ON a.workclass = b.workclass ORDER BY a.n DESC;

-- title: a FULL JOIN of two thresholded aggregates
-- expect: composed releases=2 columns=race:25,men:20,women:20
SELECT race, m.n AS men, w.n AS women FROM (SELECT race, count(*) AS n FROM adult WHERE sex = 'Male' GROUP BY 1 HAVING count(*) > 1000) m FULL JOIN (SELECT race, count(*) AS n FROM adult WHERE sex = 'Female' GROUP BY 1 HAVING count(*) > 1000) w USING (race) ORDER BY race;

-- title: count(DISTINCT) and bool_and over a released relation
-- expect: composed releases=1 columns=levels:20,all_big:16
SELECT count(DISTINCT n / 1000) AS levels, bool_and(n > 10) AS all_big FROM (SELECT education, count(*) AS n FROM adult GROUP BY 1) t;

-- title: a scalar subquery of an aggregate alone (was refused before issue 40)
-- expect: composed releases=1 columns=n:20
SELECT (SELECT count(*) FROM adult) AS n;

-- title: HAVING with a constant subquery
-- expect: composed releases=1 columns=sex:25,count:20
SELECT sex, count(*) FROM adult GROUP BY sex HAVING count(*) > (SELECT 1);

-- title: a derived table that only filters, with a threshold released first
-- expect: composed releases=2 columns=count:20
SELECT count(*) FROM (SELECT * FROM adult WHERE age > (SELECT avg(age) FROM adult)) t;

-- title: a CTE that filters with a threshold, grouped by the outer query
-- expect: composed releases=2 columns=sex:25,n:20
WITH older AS (SELECT * FROM adult WHERE age > (SELECT avg(age) FROM adult WHERE sex = 'Female')) SELECT sex, count(*) AS n FROM older GROUP BY sex ORDER BY sex;

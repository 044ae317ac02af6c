-- Composed questions: statements made of several DP aggregates combined by post-processing
-- (issue 40, "Composed questions").

-- id: compose.cte.filter_outer
-- source: analyst, a CTE of counts read by an outer query
WITH by_edu AS (SELECT education, count(*) AS n FROM adult GROUP BY education) SELECT education, n FROM by_edu WHERE n > 1000 ORDER BY n DESC;

-- id: compose.cte.share
-- source: analyst, shares of a CTE's total
WITH by_race AS (SELECT race, count(*) AS n FROM adult GROUP BY race) SELECT race, round(100.0 * n / (SELECT sum(n) FROM by_race), 1) AS pct FROM by_race ORDER BY pct DESC;

-- id: compose.join.men_women
-- source: analyst, men vs women per education, two aggregates joined on the group key
SELECT m.education, m.n AS men, w.n AS women FROM (SELECT education, count(*) AS n FROM adult WHERE sex = 'Male' GROUP BY education) m JOIN (SELECT education, count(*) AS n FROM adult WHERE sex = 'Female' GROUP BY education) w USING (education) ORDER BY m.education;

-- id: compose.join.cte_twice
-- source: analyst, one CTE referenced twice
WITH c AS (SELECT sex, income, count(*) AS n FROM adult GROUP BY sex, income) SELECT hi.sex, hi.n * 1.0 / (hi.n + lo.n) AS rate FROM c hi JOIN c lo ON hi.sex = lo.sex AND hi.income = '>50K' AND lo.income = '<=50K' ORDER BY hi.sex;

-- id: compose.agg.avg_of_counts
-- source: analyst, the average size of an occupation
SELECT avg(n) FROM (SELECT occupation, count(*) AS n FROM adult GROUP BY occupation) t;

-- id: compose.agg.max_min_of_counts
-- source: analyst, the largest and smallest education groups
SELECT max(n), min(n), sum(n) FROM (SELECT education, count(*) AS n FROM adult GROUP BY education) t;

-- id: compose.agg.count_groups_over
-- source: analyst, how many countries have more than 100 people
SELECT count(*) FROM (SELECT native_country FROM adult GROUP BY native_country HAVING count(*) > 100) t;

-- id: compose.agg.grouped_over_grouped
-- source: analyst, per sex the number of occupations with over 1000 people
SELECT sex, count(*) FILTER (WHERE n > 1000) AS big, avg(n) FROM (SELECT sex, occupation, count(*) AS n FROM adult GROUP BY sex, occupation) t GROUP BY sex ORDER BY sex;

-- id: compose.scalar.threshold_avg
-- source: analyst, people older than the average age
SELECT count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult);

-- id: compose.scalar.threshold_grouped
-- source: analyst, by sex, people who work more hours than the overall average
SELECT sex, count(*) FROM adult WHERE hours_per_week > (SELECT avg(hours_per_week) FROM adult) GROUP BY sex ORDER BY sex;

-- id: compose.scalar.share_select
-- source: analyst, a share with a scalar subquery in the select list
SELECT sex, count(*)::numeric / (SELECT count(*) FROM adult) AS share FROM adult GROUP BY sex ORDER BY sex;

-- id: compose.scalar.difference
-- source: analyst, two scalar subqueries without FROM
SELECT (SELECT count(*) FROM adult WHERE sex = 'Male') - (SELECT count(*) FROM adult WHERE sex = 'Female') AS difference;

-- id: compose.cross.two_counts
-- source: analyst, two counts side by side
SELECT a.n AS high, b.n AS total, round(a.n * 100.0 / b.n, 2) AS pct FROM (SELECT count(*) AS n FROM adult WHERE income = '>50K') a, (SELECT count(*) AS n FROM adult) b;

-- id: compose.dbt.test_wrapper
-- source: dbt 1.8 singular test
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select education from adult group by education having count(*) < 10 ) dbt_internal_test;

-- id: compose.dbt.accepted_values
-- source: dbt 1.8 accepted_values test
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( with all_values as ( select sex as value_field, count(*) as n_records from "lapras_test"."public"."adult" group by sex ) select * from all_values where value_field not in ( 'Male','Female' ) ) dbt_internal_test;

-- id: compose.dbt.not_null
-- source: dbt 1.8 not_null test
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select education from "lapras_test"."public"."adult" where education is null ) dbt_internal_test;

-- id: compose.tableau.top_n
-- source: Tableau top-3 filter on race by count
SELECT "adult"."race" AS "race", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" INNER JOIN (SELECT "adult"."race" AS "race", SUM(1) AS "$__alias__0" FROM "public"."adult" "adult" GROUP BY 1 ORDER BY 2 DESC, 1 ASC LIMIT 3) "t0" ON ("adult"."race" = "t0"."race") GROUP BY 1;

-- id: compose.superset.series_limit
-- source: Superset 6.1 time-series with series limit 2 on sex, here by race
SELECT race AS race, sex AS sex, COUNT(*) AS count FROM public.adult JOIN (SELECT sex AS sex__, COUNT(*) AS mme_inner__ FROM public.adult GROUP BY sex ORDER BY mme_inner__ DESC LIMIT 2) AS series_limit ON sex = sex__ GROUP BY race, sex ORDER BY count DESC LIMIT 10000;

-- id: compose.limit.expression
-- source: analyst, LIMIT with an expression
SELECT education, count(*) FROM adult GROUP BY education ORDER BY 2 DESC LIMIT 2 + 3;

-- id: compose.limit.fetch_first
-- source: SQL standard FETCH FIRST with OFFSET
SELECT occupation, count(*) AS n FROM adult GROUP BY occupation ORDER BY n DESC OFFSET 2 ROWS FETCH FIRST 4 ROWS ONLY;

-- id: compose.window.lag
-- source: analyst, difference to the previous age group
SELECT floor(age / 10) * 10 AS decade, count(*) AS n, count(*) - lag(count(*)) OVER (ORDER BY floor(age / 10) * 10) AS change FROM adult GROUP BY 1 ORDER BY 1;

-- id: compose.window.lead
-- source: analyst, next education level's size
SELECT education_num, count(*) AS n, lead(count(*), 1, 0::bigint) OVER (ORDER BY education_num) AS next_n FROM adult GROUP BY education_num ORDER BY education_num;

-- id: compose.window.ntile
-- source: analyst, quartiles of occupations by size
SELECT occupation, count(*) AS n, ntile(4) OVER (ORDER BY count(*)) AS quartile FROM adult GROUP BY occupation ORDER BY n;

-- id: compose.window.percent_rank
-- source: analyst, percent rank and cumulative distribution of countries by size
SELECT native_country, percent_rank() OVER (ORDER BY count(*)) AS pr, cume_dist() OVER (ORDER BY count(*)) AS cd FROM adult GROUP BY native_country ORDER BY pr DESC, native_country LIMIT 5;

-- id: compose.window.first_value
-- source: analyst, each workclass's size against the largest
SELECT workclass, count(*) AS n, first_value(count(*)) OVER (ORDER BY count(*) DESC) AS largest FROM adult GROUP BY workclass ORDER BY n DESC;

-- id: compose.window.running_total
-- source: analyst, cumulative count by age
SELECT age, sum(count(*)) OVER (ORDER BY age) AS cumulative FROM adult WHERE age < 25 GROUP BY age ORDER BY age;

-- id: compose.mode
-- source: analyst, the most common education per sex
SELECT sex, mode() WITHIN GROUP (ORDER BY education) AS common_education FROM adult GROUP BY sex ORDER BY sex;

-- id: compose.grouping
-- source: analyst, ROLLUP with GROUPING()
SELECT race, GROUPING(race) AS is_total, count(*) FROM adult GROUP BY ROLLUP (race) ORDER BY 2, 1;

-- id: compose.grouping.two
-- source: analyst, CUBE with GROUPING of two columns
SELECT sex, income, GROUPING(sex, income) AS level, count(*) FROM adult GROUP BY CUBE (sex, income) ORDER BY 3, 1, 2;

-- id: compose.intersect
-- source: analyst, educations large among both men and women
SELECT education FROM adult WHERE sex = 'Male' GROUP BY education HAVING count(*) > 1000 INTERSECT SELECT education FROM adult WHERE sex = 'Female' GROUP BY education HAVING count(*) > 500 ORDER BY 1;

-- id: compose.except
-- source: analyst, occupations large overall but not among those over 50
SELECT occupation FROM adult GROUP BY occupation HAVING count(*) > 3000 EXCEPT SELECT occupation FROM adult WHERE age > 50 GROUP BY occupation HAVING count(*) > 600 ORDER BY 1;

-- id: compose.cte.chain
-- source: analyst, CTEs chained: counts, then ranks, then a filter
WITH c AS (SELECT marital_status, count(*) AS n FROM adult GROUP BY marital_status), r AS (SELECT marital_status, n, rank() OVER (ORDER BY n DESC) AS rk FROM c) SELECT marital_status, n FROM r WHERE rk <= 3 ORDER BY rk;

-- id: compose.union.of_ctes
-- source: analyst, two CTE aggregates unioned
WITH a AS (SELECT 'men' AS who, avg(age) AS avg_age FROM adult WHERE sex = 'Male'), b AS (SELECT 'women' AS who, avg(age) AS avg_age FROM adult WHERE sex = 'Female') SELECT * FROM a UNION ALL SELECT * FROM b ORDER BY who;

-- id: compose.case_over_aggs
-- source: analyst, a label from two aggregates of one group
SELECT education, CASE WHEN count(*) FILTER (WHERE income = '>50K') * 2 > count(*) THEN 'mostly high' ELSE 'mostly low' END AS label FROM adult GROUP BY education ORDER BY education;

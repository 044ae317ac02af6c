-- Hold-out compositions, lookups and questions about units (issue 40), written after the corpus
-- above was answered: CTEs nested and reused, joins of two or three aggregates, scalar and IN
-- subqueries, UNION ALL then an outer aggregate, windows over CTEs, dbt tests, tools' top-N and
-- series limits, the public table in a CTE, IN (VALUES ...), per-unit histograms. The ids start
-- with `holdcomp.`.

-- id: holdcomp.cte.nested_filter
-- source: analyst, nested CTEs: counts, shares, filter
WITH c AS (SELECT occupation, count(*) AS n FROM adult GROUP BY occupation), t AS (SELECT sum(n) AS total FROM c), s AS (SELECT occupation, n, n * 100.0 / total AS pct FROM c, t) SELECT occupation, round(pct, 2) FROM s WHERE pct >= 5 ORDER BY pct DESC;

-- id: holdcomp.cte.reuse_max
-- source: analyst, a CTE read twice: groups equal to the largest
WITH c AS (SELECT race, count(*) AS n FROM adult GROUP BY race) SELECT race FROM c WHERE n = (SELECT max(n) FROM c);

-- id: holdcomp.cte.reuse_above_avg
-- source: analyst, groups above the average group size
WITH c AS (SELECT education, avg(hours_per_week) AS h FROM adult GROUP BY education) SELECT education, round(h, 2) AS h FROM c WHERE h > (SELECT avg(h) FROM c) ORDER BY h DESC;

-- id: holdcomp.join.left_two_aggs
-- source: analyst, LEFT JOIN of two aggregates on a key
SELECT a.workclass, a.n, b.n AS rich FROM (SELECT workclass, count(*) AS n FROM adult GROUP BY workclass) a LEFT JOIN (SELECT workclass, count(*) AS n FROM adult WHERE income = '>50K' GROUP BY workclass) b ON a.workclass = b.workclass ORDER BY a.workclass;

-- id: holdcomp.join.full_two_aggs
-- source: analyst, FULL JOIN of two filtered aggregates
SELECT coalesce(y.race, o.race) AS race, y.n AS young, o.n AS old FROM (SELECT race, count(*) AS n FROM adult WHERE age < 30 GROUP BY race) y FULL JOIN (SELECT race, count(*) AS n FROM adult WHERE age >= 60 GROUP BY race) o ON y.race = o.race ORDER BY 1;

-- id: holdcomp.join.two_keys
-- source: analyst, two aggregates joined on two keys
SELECT a.sex, a.income, a.n, b.h FROM (SELECT sex, income, count(*) AS n FROM adult GROUP BY sex, income) a JOIN (SELECT sex, income, avg(hours_per_week) AS h FROM adult GROUP BY sex, income) b ON a.sex = b.sex AND a.income = b.income ORDER BY 1, 2;

-- id: holdcomp.join.using_two_keys
-- source: analyst, USING on two keys
SELECT sex, race, m.n, w.n AS married FROM (SELECT sex, race, count(*) AS n FROM adult GROUP BY sex, race) m JOIN (SELECT sex, race, count(*) AS n FROM adult WHERE marital_status = 'Married-civ-spouse' GROUP BY sex, race) w USING (sex, race) ORDER BY sex, race;

-- id: holdcomp.join.three_aggs
-- source: analyst, three aggregates joined on one key
SELECT a.income, a.n, b.avg_age, c.avg_hours FROM (SELECT income, count(*) AS n FROM adult GROUP BY income) a JOIN (SELECT income, avg(age) AS avg_age FROM adult GROUP BY income) b ON a.income = b.income JOIN (SELECT income, avg(hours_per_week) AS avg_hours FROM adult GROUP BY income) c ON c.income = a.income ORDER BY a.income;

-- id: holdcomp.join.cte_pair_ratio
-- source: analyst, two CTEs joined, a ratio
WITH tot AS (SELECT relationship, count(*) AS n FROM adult GROUP BY relationship), rich AS (SELECT relationship, count(*) AS r FROM adult WHERE income = '>50K' GROUP BY relationship) SELECT tot.relationship, round(100.0 * rich.r / tot.n, 1) AS pct FROM tot JOIN rich ON rich.relationship = tot.relationship ORDER BY pct DESC;

-- id: holdcomp.scalar.select_avg_diff
-- source: analyst, each group's average minus the overall average
SELECT sex, avg(age) - (SELECT avg(age) FROM adult) AS diff FROM adult GROUP BY sex ORDER BY sex;

-- id: holdcomp.scalar.having_threshold
-- source: analyst, groups whose count exceeds a tenth of the total
SELECT occupation, count(*) FROM adult GROUP BY occupation HAVING count(*) > (SELECT count(*) / 10 FROM adult) ORDER BY 2 DESC;

-- id: holdcomp.scalar.where_hours
-- source: analyst, people who work more than the women's average
SELECT income, count(*) FROM adult WHERE hours_per_week > (SELECT avg(hours_per_week) FROM adult WHERE sex = 'Female') GROUP BY income ORDER BY income;

-- id: holdcomp.scalar.two_in_select
-- source: analyst, three scalars side by side
SELECT (SELECT count(*) FROM adult) AS n, (SELECT avg(age) FROM adult) AS avg_age, (SELECT max(age) FROM adult WHERE age < 80) AS max_age;

-- id: holdcomp.in.aggregate_subquery
-- source: analyst, IN of a grouped HAVING subquery
SELECT income, count(*) FROM adult WHERE occupation IN (SELECT occupation FROM adult GROUP BY occupation HAVING avg(hours_per_week) > 42) GROUP BY income ORDER BY income;

-- id: holdcomp.in.not_in_aggregate
-- source: analyst, NOT IN of a grouped subquery
SELECT count(*) FROM adult WHERE race NOT IN (SELECT race FROM adult GROUP BY race HAVING count(*) > 3000);

-- id: holdcomp.exists.public_table
-- source: analyst, EXISTS over the public table, grouped
SELECT sex, count(*) FROM adult a WHERE EXISTS (SELECT 1 FROM public.country_region cr WHERE cr.country = a.native_country AND cr.region = 'Europe') GROUP BY sex ORDER BY sex;

-- id: holdcomp.exists.not_public_table
-- source: analyst, NOT EXISTS over the public table (countries without a region)
SELECT count(*) FROM adult a WHERE NOT EXISTS (SELECT 1 FROM country_region cr WHERE cr.country = a.native_country);

-- id: holdcomp.union.outer_sum
-- source: analyst, UNION ALL of grouped aggregates then an outer aggregate
SELECT sex, sum(n) AS n FROM (SELECT sex, count(*) AS n FROM adult WHERE income = '>50K' GROUP BY sex UNION ALL SELECT sex, count(*) FROM adult WHERE age > 70 GROUP BY sex) u GROUP BY sex ORDER BY sex;

-- id: holdcomp.union.labels
-- source: analyst, UNION ALL of labelled totals ordered
SELECT 'men' AS who, count(*) AS n FROM adult WHERE sex = 'Male' UNION ALL SELECT 'women', count(*) FROM adult WHERE sex = 'Female' UNION ALL SELECT 'all', count(*) FROM adult ORDER BY n DESC;

-- id: holdcomp.union.max_over
-- source: analyst, the larger of two counts from a union
SELECT max(n) FROM (SELECT count(*) AS n FROM adult WHERE age < 30 UNION ALL SELECT count(*) FROM adult WHERE age > 50) u;

-- id: holdcomp.window.lag_cte
-- source: analyst, lag over a CTE's rows
WITH c AS (SELECT education_num, count(*) AS n FROM adult GROUP BY education_num) SELECT education_num, n, n - lag(n) OVER (ORDER BY education_num) AS delta FROM c ORDER BY education_num;

-- id: holdcomp.window.running_cte
-- source: analyst, running total and share over a CTE
WITH c AS (SELECT age / 10 * 10 AS decade, count(*) AS n FROM adult GROUP BY 1) SELECT decade, n, sum(n) OVER (ORDER BY decade) AS running, round(100.0 * sum(n) OVER (ORDER BY decade) / sum(n) OVER (), 1) AS cum_pct FROM c ORDER BY decade;

-- id: holdcomp.window.rank_filter
-- source: analyst, top 2 occupations per sex by rank over a CTE
WITH c AS (SELECT sex, occupation, count(*) AS n FROM adult GROUP BY sex, occupation), r AS (SELECT sex, occupation, n, row_number() OVER (PARTITION BY sex ORDER BY n DESC, occupation) AS rn FROM c) SELECT sex, occupation, n FROM r WHERE rn <= 2 ORDER BY sex, rn;

-- id: holdcomp.window.percent_share
-- source: analyst, percent of total over the grouped result
SELECT marital_status, count(*) AS n, round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct FROM adult GROUP BY marital_status ORDER BY n DESC;

-- id: holdcomp.window.partition_share
-- source: analyst, share within each sex
SELECT sex, income, count(*) AS n, round(count(*) * 1.0 / sum(count(*)) OVER (PARTITION BY sex), 4) AS share FROM adult GROUP BY sex, income ORDER BY sex, income;

-- id: holdcomp.window.ntile_cte
-- source: analyst, ntile over a CTE of averages
WITH c AS (SELECT native_country, avg(age) AS a FROM adult GROUP BY native_country) SELECT ntile(3) OVER (ORDER BY a, native_country) AS tier, native_country FROM c ORDER BY tier, native_country LIMIT 8;

-- id: holdcomp.window.dense_rank
-- source: analyst, dense rank of education groups by average hours
SELECT education, dense_rank() OVER (ORDER BY avg(hours_per_week) DESC) AS rk FROM adult GROUP BY education ORDER BY rk, education;

-- id: holdcomp.limit.inner_offset
-- source: analyst, LIMIT/OFFSET inside a subquery, outer sum
SELECT sum(n) FROM (SELECT occupation, count(*) AS n FROM adult GROUP BY occupation ORDER BY n DESC LIMIT 3 OFFSET 1) t;

-- id: holdcomp.limit.outer_of_cte
-- source: analyst, LIMIT outside a CTE
WITH c AS (SELECT native_country, count(*) AS n FROM adult GROUP BY native_country) SELECT native_country, n FROM c ORDER BY n DESC, native_country LIMIT 5 OFFSET 1;

-- id: holdcomp.order.outer_by_agg
-- source: analyst, outer query ordered by an aggregate of an aggregate
SELECT sex, max(n) AS biggest FROM (SELECT sex, education, count(*) AS n FROM adult GROUP BY sex, education) t GROUP BY sex ORDER BY max(n) DESC;

-- id: holdcomp.agg.stddev_of_counts
-- source: analyst, spread of group sizes
SELECT count(*) AS groups, round(stddev_samp(n), 3) AS sd FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t;

-- id: holdcomp.agg.count_over_having_avg
-- source: analyst, how many occupations average more than 40 hours
SELECT count(*) FROM (SELECT occupation FROM adult GROUP BY occupation HAVING avg(hours_per_week) > 40) t;

-- id: holdcomp.agg.sum_over_grouped_filter
-- source: analyst, grouped over grouped with a WHERE on the inner count
SELECT income, count(*) AS big_educations, sum(n) AS people FROM (SELECT income, education, count(*) AS n FROM adult GROUP BY income, education) t WHERE n > 500 GROUP BY income ORDER BY income;

-- id: holdcomp.dbt.unique
-- source: dbt 1.8 unique test on a grouped model
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select unique_field, count(*) as n_records from (select sex as unique_field from "lapras_test"."public"."adult" where sex is not null) dbt_subquery group by unique_field having count(*) > 1 ) dbt_internal_test;

-- id: holdcomp.dbt.not_null_age
-- source: dbt 1.8 not_null test on age
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select age from "lapras_test"."public"."adult" where age is null ) dbt_internal_test;

-- id: holdcomp.dbt.accepted_values_race
-- source: dbt 1.8 accepted_values on race
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( with all_values as ( select race as value_field, count(*) as n_records from "lapras_test"."public"."adult" group by race ) select * from all_values where value_field not in ( 'White','Black','Asian-Pac-Islander','Amer-Indian-Eskimo' ) ) dbt_internal_test;

-- id: holdcomp.dbt.relationships
-- source: dbt 1.8 relationships test against the public table
-- expect: refused 42501 dbt's relationships test reads the rows of the protected table in a CTE (child) before counting them; not folded yet: write select count(*) from adult a where not exists (select 1 from country_region p where p.country = a.native_country)
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( with child as ( select native_country as from_field from "lapras_test"."public"."adult" where native_country is not null ), parent as ( select country as to_field from "lapras_test"."public"."country_region" ) select from_field from child left join parent on child.from_field = parent.to_field where parent.to_field is null ) dbt_internal_test;

-- id: holdcomp.dbt.expression_is_true
-- source: dbt_utils expression_is_true
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( select * from "lapras_test"."public"."adult" where not(hours_per_week >= 1) ) dbt_internal_test;

-- id: holdcomp.tableau.topn_avg
-- source: Tableau top-4 on education by average age
SELECT "adult"."education" AS "education", AVG(CAST("adult"."age" AS DOUBLE PRECISION)) AS "avg:age:ok" FROM "public"."adult" "adult" INNER JOIN (SELECT "adult"."education" AS "education", AVG(CAST("adult"."age" AS DOUBLE PRECISION)) AS "$__alias__0" FROM "public"."adult" "adult" GROUP BY 1 ORDER BY 2 DESC LIMIT 4) "t0" ON ("adult"."education" = "t0"."education") GROUP BY 1;

-- id: holdcomp.superset.series_limit_two
-- source: Superset 6 bar chart, series limit 3 on occupation, grouped by income
SELECT occupation AS occupation, income AS income, COUNT(*) AS count FROM public.adult JOIN (SELECT occupation AS occupation__, COUNT(*) AS mme_inner__ FROM public.adult GROUP BY occupation ORDER BY mme_inner__ DESC LIMIT 3) AS series_limit ON occupation = occupation__ GROUP BY occupation, income ORDER BY count DESC LIMIT 10000;

-- id: holdcomp.looker.ndt
-- source: Looker native derived table joined back
WITH edu_facts AS (SELECT adult.education AS education, COUNT(*) AS n, AVG(adult.age) AS avg_age FROM public.adult AS adult GROUP BY 1) SELECT edu_facts.education AS "edu_facts.education", edu_facts.n AS "edu_facts.n", edu_facts.avg_age AS "edu_facts.avg_age" FROM edu_facts ORDER BY 2 DESC LIMIT 500;

-- id: holdcomp.metabase.nested_question
-- source: Metabase question built on a saved question
SELECT "source"."sex" AS "sex", SUM("source"."count") AS "sum" FROM (SELECT "public"."adult"."sex" AS "sex", "public"."adult"."race" AS "race", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex", "public"."adult"."race") AS "source" WHERE "source"."count" > 100 GROUP BY "source"."sex" ORDER BY "source"."sex" ASC;

-- id: holdcomp.powerbi.join_aggs
-- source: Power BI DirectQuery, two grouped subqueries joined
select "$Outer"."sex", "$Outer"."a0", "$Inner"."a1" from (select "sex", count(1) as "a0" from "public"."adult" group by "sex") "$Outer" left outer join (select "sex", avg("age") as "a1" from "public"."adult" group by "sex") "$Inner" on ("$Outer"."sex" = "$Inner"."sex") order by "$Outer"."sex";

-- id: holdcomp.redash.cte_pct
-- source: Redash dashboard query
WITH totals AS (SELECT income, count(*) AS n FROM adult GROUP BY income) SELECT income, n, round(n * 100.0 / (SELECT sum(n) FROM totals), 2) AS pct FROM totals ORDER BY income;

-- id: holdcomp.mode.compare_cte
-- source: Mode report, men vs women hours by education, difference
WITH m AS (SELECT education, avg(hours_per_week) AS h FROM adult WHERE sex = 'Male' GROUP BY education), w AS (SELECT education, avg(hours_per_week) AS h FROM adult WHERE sex = 'Female' GROUP BY education) SELECT m.education, round(m.h - w.h, 2) AS gap FROM m JOIN w USING (education) ORDER BY gap DESC, m.education;

-- id: holdcomp.lookup.left_coalesce_table
-- source: analyst, LEFT JOIN to the public table with COALESCE
SELECT coalesce(cr.region, 'Unknown') AS region, count(*) AS n, avg(a.age) AS avg_age FROM adult a LEFT JOIN public.country_region cr ON cr.country = a.native_country GROUP BY 1 ORDER BY 1;

-- id: holdcomp.lookup.values_multi_col
-- source: analyst, multi-column VALUES join (sex, income) to a label and a weight
SELECT v.label, sum(v.w) AS weighted, count(*) FROM adult a JOIN (VALUES ('Male', '<=50K', 'm-low', 1), ('Male', '>50K', 'm-high', 2), ('Female', '<=50K', 'f-low', 1), ('Female', '>50K', 'f-high', 2)) AS v(sex, income, label, w) ON (a.sex, a.income) = (v.sex, v.income) GROUP BY v.label ORDER BY v.label;

-- id: holdcomp.lookup.cte_public_table
-- source: analyst, the public table in a CTE
WITH eu AS (SELECT country FROM public.country_region WHERE region = 'Europe') SELECT a.native_country, count(*) FROM adult a JOIN eu ON eu.country = a.native_country GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5;

-- id: holdcomp.lookup.cte_const_region
-- source: analyst, a CTE of constants with a LEFT JOIN and COALESCE
WITH m(country, grp) AS (VALUES ('United-States', 'US'), ('Mexico', 'MX')) SELECT coalesce(m.grp, 'rest') AS grp, a.income, count(*) FROM adult a LEFT JOIN m ON m.country = a.native_country GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdcomp.lookup.table_and_agg
-- source: analyst, region counts then a share over the regions
-- expect: refused 0A000 a join with a declared public table inside a part of a composed statement (its rows are bound when the statement runs, after planning); the same join as a statement of its own with sum(count(*)) OVER () is answered, and a CTE of VALUES is answered inside a composition
WITH r AS (SELECT cr.region, count(*) AS n FROM adult a JOIN country_region cr ON cr.country = a.native_country GROUP BY cr.region) SELECT region, n, round(100.0 * n / sum(n) OVER (), 2) AS pct FROM r ORDER BY n DESC;

-- id: holdcomp.lookup.values_in_where
-- source: analyst, IN of the public table and IN of a VALUES list
SELECT education, count(*) FROM adult WHERE native_country IN (SELECT country FROM country_region WHERE region IN ('Asia', 'Europe')) AND education IN (VALUES ('Bachelors'), ('Masters')) GROUP BY education ORDER BY education;

-- id: holdcomp.lookup.region_sex_pivot
-- source: analyst, pivot by region with FILTER
SELECT cr.region, count(*) FILTER (WHERE a.sex = 'Male') AS men, count(*) FILTER (WHERE a.sex = 'Female') AS women FROM adult a JOIN country_region cr ON a.native_country = cr.country GROUP BY cr.region ORDER BY cr.region;

-- id: holdcomp.units.distinct_beside_count
-- source: analyst, check-ins and users per month
SELECT date_trunc('month', checkin_date)::date AS month, count(*) AS checkins, count(DISTINCT user_id) AS users FROM checkins WHERE checkin_date >= '2010-05-01' GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.distinct_by_lat_band
-- source: analyst, users per latitude hemisphere
SELECT CASE WHEN lat >= 0 THEN 'north' ELSE 'south' END AS hemi, count(DISTINCT user_id) AS users FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.tiers_case
-- source: analyst, per-user histogram with CASE tiers
SELECT CASE WHEN n < 25 THEN '1: <25' WHEN n < 100 THEN '2: 25-99' WHEN n < 400 THEN '3: 100-399' ELSE '4: 400+' END AS tier, count(*) AS users FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.having_cte
-- source: analyst, per-unit counts filtered by HAVING in a CTE
WITH active AS (SELECT user_id FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY user_id HAVING count(*) >= 50) SELECT count(*) AS active_users FROM active;

-- id: holdcomp.units.hours_hist
-- source: analyst, distinct hours per user histogram in 4 bands
SELECT (h - 1) / 6 AS band, count(*) FROM (SELECT user_id, count(DISTINCT hour) AS h FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.width_bucket_cte
-- source: analyst, width_bucket of per-user counts in a CTE, with an outer share
WITH per_user AS (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id), b AS (SELECT width_bucket(n, 0, 1000, 5) AS bucket, count(*) AS users FROM per_user GROUP BY 1) SELECT bucket, users, round(100.0 * users / sum(users) OVER (), 1) AS pct FROM b ORDER BY bucket;

-- id: holdcomp.units.active_2010_filtered
-- source: analyst, per-user counts of 2010 check-ins, bucketed by 100
SELECT n / 100 * 100 AS hundreds, count(*) FROM (SELECT user_id, count(*) AS n FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.distinct_hour_bands
-- source: Superset, COUNT_DISTINCT per hour band and weekday flag
SELECT CASE WHEN extract(isodow FROM checkin_date) >= 6 THEN 'weekend' ELSE 'weekday' END AS part, COUNT(DISTINCT user_id) AS "COUNT_DISTINCT(user_id)" FROM public.checkins GROUP BY 1 ORDER BY 1 LIMIT 10000;

-- id: holdcomp.units.users_with_evening
-- source: analyst, users who ever checked in after 20:00
SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id HAVING max(hour) >= 20) t;

-- id: holdcomp.units.distinct_metabase_filtered
-- source: Metabase distinct users with a filter
SELECT COUNT(DISTINCT "public"."checkins"."user_id") AS "count" FROM "public"."checkins" WHERE "public"."checkins"."hour" BETWEEN 9 AND 17;

-- id: holdcomp.units.avg_per_user_cte
-- source: analyst, average check-ins per user over a CTE, with a total
WITH u AS (SELECT user_id, count(*) AS n FROM checkins WHERE hour < 12 GROUP BY user_id) SELECT count(*) AS users, sum(n) AS checkins FROM u;

-- id: holdcomp.units.days_tiers
-- source: analyst, active-day tiers per user
SELECT CASE WHEN days >= 100 THEN 'daily-ish' WHEN days >= 20 THEN 'weekly-ish' ELSE 'rare' END AS tier, count(*) FROM (SELECT user_id, count(DISTINCT checkin_date) AS days FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.cohort_first_year
-- source: analyst, users by year of first check-in
SELECT extract(year FROM first_day) AS y, count(*) FROM (SELECT user_id, min(checkin_date) AS first_day FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdcomp.units.distinct_ratio
-- source: analyst, distinct users in the morning over all users
-- expect: refused 0A000 count(DISTINCT user_id) FILTER (WHERE ...) is not answered; the refusal gives the per-unit form, answered: count(*) FILTER (WHERE n > 0) over (SELECT user_id, count(*) FILTER (WHERE ...) AS n ... GROUP BY user_id)
SELECT count(DISTINCT user_id) FILTER (WHERE hour < 12) * 1.0 / count(DISTINCT user_id) AS morning_share FROM checkins;

-- id: holdcomp.lookup.values_cte_window
-- source: analyst, region counts from a CTE of VALUES in a CTE, then a share over the regions
WITH regions(country, region) AS (VALUES ('United-States', 'North America'), ('Canada', 'North America'), ('Mexico', 'Latin America'), ('Germany', 'Europe'), ('England', 'Europe')), r AS (SELECT g.region, count(*) AS n FROM adult a JOIN regions g ON g.country = a.native_country GROUP BY g.region) SELECT region, n, round(100.0 * n / sum(n) OVER (), 2) AS pct FROM r ORDER BY n DESC;

-- id: holdcomp.lookup.table_window_single
-- source: analyst, the same share with the public table in one statement
SELECT cr.region, count(*) AS n, round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct FROM adult a JOIN country_region cr ON cr.country = a.native_country GROUP BY cr.region ORDER BY n DESC;

-- id: holdcomp.units.filtered_users_share
-- source: analyst, the share of users with a morning check-in, as the refusal of count(DISTINCT user_id) FILTER suggests
SELECT count(*) FILTER (WHERE n > 0) * 1.0 / count(*) AS morning_share FROM (SELECT user_id, count(*) FILTER (WHERE hour < 12) AS n FROM checkins GROUP BY user_id) t;

-- id: holdcomp.dbt.public_cte_inside
-- source: dbt 1.8 singular test whose model reads the public table in its own CTE
-- expect: refused 0A000 dbt's wrapper (count(*), count(*) != 0) is a composed statement, and a declared public table inside its part is refused by name (its rows are bound when the statement runs, after planning); select count(*) from (...) alone, or the lookup as a CTE of VALUES, is answered
select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error from ( with europe as ( select country from "lapras_test"."public"."country_region" where region = 'Europe' ) select a.age from "lapras_test"."public"."adult" a join europe on europe.country = a.native_country where a.age > 85 ) dbt_internal_test;

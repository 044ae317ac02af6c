-- Hold-out style cases written after the corpus above was answered (issue 40): SQL of the
-- same kinds, not the same statements (tools' time grains and nesting, text and date
-- functions, per-unit questions, compositions, DISTINCT ON, lookups, probes). The ids start
-- with `holdout.`, so the sessions benchmark (sql_fixtures/sessions) does not draw them.

-- id: holdout.time.date_part
-- source: analyst, date_part
SELECT date_part('year', checkin_date) AS y, date_part('quarter', checkin_date) AS q, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdout.time.iso_week
-- source: analyst, ISO year-week labels
SELECT to_char(checkin_date, 'IYYY-"W"IW') AS wk, count(*) FROM checkins WHERE checkin_date >= '2010-09-01' GROUP BY 1 ORDER BY 1;

-- id: holdout.time.doy
-- source: analyst, day of year
SELECT extract(doy FROM checkin_date)::int / 30 AS block, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.time.date_bin
-- source: analyst, date_bin 14 days
SELECT date_bin('14 days', checkin_date::timestamp, TIMESTAMP '2009-02-01') AS fortnight, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.time.tz_setup
-- source: analyst, timestamptz under a session time zone
-- setup: SET TimeZone = 'America/New_York'
SELECT date_trunc('week', checkin_date::timestamptz) AS w, count(*) FROM checkins WHERE checkin_date < '2009-05-01' GROUP BY 1 ORDER BY 1;

-- id: holdout.time.at_time_zone
-- source: analyst, AT TIME ZONE
SELECT date_trunc('month', checkin_date::timestamp AT TIME ZONE 'UTC') AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.time.make_date
-- source: analyst, make_date from year and month
SELECT make_date(extract(year FROM checkin_date)::int, extract(month FROM checkin_date)::int, 1) AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.time.date_plus
-- source: analyst, shifted dates
SELECT (checkin_date + 1) AS next_day, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-10-01' AND '2010-10-07' GROUP BY 1 ORDER BY 1;

-- id: holdout.time.interval_filter
-- source: analyst, timestamp plus interval
SELECT count(*) FROM checkins WHERE checkin_date::timestamp + interval '12 hours' * 0 >= timestamp '2010-10-01 00:00';

-- id: holdout.time.epoch_ms
-- source: Grafana, epoch milliseconds
SELECT extract(epoch FROM date_trunc('month', checkin_date)) * 1000 AS time_ms, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.time.hour_timestamp
-- source: analyst, combining date and hour into a timestamp
SELECT date_trunc('day', checkin_date + make_interval(hours => hour)) AS d, count(*) FROM checkins WHERE checkin_date = '2010-05-05' GROUP BY 1;

-- id: holdout.time.to_char_dy
-- source: analyst, weekday abbreviations
SELECT to_char(checkin_date, 'Dy') AS dy, count(*) FROM checkins GROUP BY 1, extract(isodow FROM checkin_date) ORDER BY extract(isodow FROM checkin_date);

-- id: holdout.text.upper
-- source: analyst, upper-cased labels
SELECT upper(sex) AS s, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.text.left
-- source: analyst, education prefix
SELECT left(education, 2) AS p, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.text.ilike
-- source: analyst, ILIKE filter
SELECT count(*) FROM adult WHERE occupation ILIKE '%serv%';

-- id: holdout.text.concat
-- source: analyst, concatenated key
SELECT sex || ' / ' || income AS k, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.text.distinct_from
-- source: analyst, IS DISTINCT FROM
SELECT count(*) FROM adult WHERE workclass IS DISTINCT FROM '?';

-- id: holdout.text.not_in
-- source: analyst, NOT IN
SELECT race, count(*) FROM adult WHERE race NOT IN ('White', 'Black') GROUP BY race ORDER BY race;

-- id: holdout.agg.bool_or
-- source: analyst, bool_or per group
-- expect: refused 0A000 bool_or/every are not answered (the hint gives count(*) FILTER (WHERE x) > 0)
SELECT sex, bool_or(age > 85) AS any_old, every(age >= 17) AS all_adult FROM adult GROUP BY sex ORDER BY sex;

-- id: holdout.agg.mode
-- source: analyst, most common education per sex
SELECT sex, mode() WITHIN GROUP (ORDER BY education) AS edu FROM adult GROUP BY sex ORDER BY sex;

-- id: holdout.agg.greatest
-- source: analyst, greatest over aggregates
SELECT greatest(count(*) FILTER (WHERE sex = 'Male'), count(*) FILTER (WHERE sex = 'Female')) AS bigger FROM adult;

-- id: holdout.agg.percentile_cont
-- source: analyst, quartiles
-- expect: refused 0A000 a percentile of an ARRAY of fractions (one percentile per fraction is answered)
SELECT percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY age) AS q FROM adult;

-- id: holdout.agg.sum_case
-- source: analyst, sum of CASE
SELECT sum(CASE WHEN hours_per_week > 40 THEN 1 ELSE 0 END) AS overtime, sum(CASE WHEN hours_per_week > 40 THEN hours_per_week - 40 ELSE 0 END) AS extra_hours FROM adult;

-- id: holdout.units.count_distinct_where
-- source: analyst, users active in 2010
SELECT count(DISTINCT user_id) FROM checkins WHERE checkin_date >= '2010-01-01';

-- id: holdout.units.heavy_users
-- source: analyst, users with at least 20 check-ins
SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id HAVING count(*) >= 20) t;

-- id: holdout.units.per_user_max_hour
-- source: analyst, users by their latest hour
SELECT last_hour, count(*) FROM (SELECT user_id, max(hour) AS last_hour FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdout.units.median_per_user
-- source: analyst, median check-ins per user
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY n) FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t;

-- id: holdout.units.cte_per_user
-- source: analyst, per-user counts in a CTE
WITH per_user AS (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) SELECT CASE WHEN n < 10 THEN 'light' WHEN n < 40 THEN 'medium' ELSE 'heavy' END AS tier, count(*) FROM per_user GROUP BY 1 ORDER BY 1;

-- id: holdout.units.distinct_per_hour_band
-- source: analyst, distinct users per part of day
SELECT hour / 6 AS band, count(DISTINCT user_id) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.compose.join_two_aggs
-- source: analyst, men vs women per race
SELECT m.race, m.n AS men, w.n AS women FROM (SELECT race, count(*) AS n FROM adult WHERE sex = 'Male' GROUP BY race) m JOIN (SELECT race, count(*) AS n FROM adult WHERE sex = 'Female' GROUP BY race) w ON m.race = w.race ORDER BY m.race;

-- id: holdout.compose.total_scalar
-- source: analyst, scalar subquery for the total
SELECT income, count(*) AS n, (SELECT count(*) FROM adult) AS total FROM adult GROUP BY income ORDER BY income;

-- id: holdout.compose.max_of_counts
-- source: analyst, largest occupation size
SELECT max(n) AS biggest, avg(n) AS mean FROM (SELECT occupation, count(*) AS n FROM adult GROUP BY occupation) t;

-- id: holdout.compose.tableau_topn
-- source: Tableau, top-N filter as a join to a limited subquery
SELECT "adult"."occupation" AS "occupation", SUM("adult"."hours_per_week") AS "sum:hours:ok" FROM "public"."adult" "adult" INNER JOIN (SELECT "adult"."occupation" AS "occupation", COUNT(*) AS "$__alias__0" FROM "public"."adult" "adult" GROUP BY 1 ORDER BY 2 DESC LIMIT 5) "t0" ON ("adult"."occupation" = "t0"."occupation") GROUP BY 1;

-- id: holdout.compose.two_ctes_ratio
-- source: analyst, high earners share by sex from two CTEs
WITH hi AS (SELECT sex, count(*) AS n FROM adult WHERE income = '>50K' GROUP BY sex), al AS (SELECT sex, count(*) AS n FROM adult GROUP BY sex) SELECT al.sex, round(hi.n * 100.0 / al.n, 1) AS pct FROM al JOIN hi USING (sex) ORDER BY al.sex;

-- id: holdout.compose.threshold_median
-- source: analyst, above the median age
SELECT income, count(*) FROM adult WHERE age > (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM adult) GROUP BY income ORDER BY income;

-- id: holdout.compose.union_then_agg
-- source: analyst, aggregate over a UNION ALL of two filters
SELECT g, sum(n) FROM (SELECT 'a' AS g, count(*) AS n FROM adult WHERE age < 25 UNION ALL SELECT 'b', count(*) FROM adult WHERE age > 60) u GROUP BY g ORDER BY g;

-- id: holdout.compose.superset_series_limit
-- source: Superset, series limit on a time series
SELECT DATE_TRUNC('month', checkin_date) AS __timestamp, hour AS hour, COUNT(*) AS count FROM public.checkins JOIN (SELECT hour AS hour__, COUNT(*) AS mme_inner__ FROM public.checkins GROUP BY hour ORDER BY mme_inner__ DESC LIMIT 3) AS anon_1 ON hour = hour__ GROUP BY DATE_TRUNC('month', checkin_date), hour ORDER BY count DESC LIMIT 10000;

-- id: holdout.lookup.generate_series
-- source: analyst, a calendar from generate_series left-joined to counts
-- expect: refused 0A000 a join with generate_series (the groups are public: no calendar is needed for gaps)
SELECT d::date AS day, count(c.checkin_date) AS n FROM generate_series(DATE '2010-10-01', DATE '2010-10-07', INTERVAL '1 day') AS d LEFT JOIN checkins c ON c.checkin_date = d::date GROUP BY 1 ORDER BY 1;

-- id: holdout.lookup.values_range
-- source: analyst, buckets from VALUES with ranges on a clamped column
SELECT b.label, count(*) FROM checkins c JOIN (VALUES ('south', -90, 0), ('north', 0, 90)) AS b(label, lo, hi) ON c.lat >= b.lo AND c.lat < b.hi GROUP BY b.label ORDER BY b.label;

-- id: holdout.lookup.public_in
-- source: analyst, IN over the public table
SELECT count(*) FROM adult WHERE native_country IN (SELECT country FROM public.country_region WHERE region = 'Europe');

-- id: holdout.probe.exists
-- source: Django, exists()
SELECT (1) AS "a" FROM "adult" WHERE "adult"."sex" = 'Female' LIMIT 1;

-- id: holdout.probe.count_limited
-- source: Superset, raw records count
SELECT COUNT(*) AS rowcount FROM (SELECT age FROM public.adult LIMIT 1000) AS rowcount_qry;

-- id: holdout.metabase.bin_age
-- source: Metabase, auto-binning of a number
SELECT (FLOOR((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 AS "age", count(*) AS "count" FROM "public"."adult" GROUP BY (FLOOR((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 ORDER BY (FLOOR((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 ASC;

-- id: holdout.metabase.distinct_count
-- source: Metabase, distinct count metric
SELECT count(distinct "public"."adult"."occupation") AS "count" FROM "public"."adult";

-- id: holdout.metabase.avg_filter_nested
-- source: Metabase, nested question (source query)
SELECT "source"."sex" AS "sex", avg("source"."hours_per_week") AS "avg" FROM (SELECT "public"."adult"."sex" AS "sex", "public"."adult"."hours_per_week" AS "hours_per_week" FROM "public"."adult" WHERE "public"."adult"."age" > 40) AS "source" GROUP BY "source"."sex" ORDER BY "source"."sex" ASC;

-- id: holdout.tableau.custom_sql
-- source: Tableau, custom SQL wrapped
SELECT "Custom SQL Query"."income" AS "income", SUM(1) AS "Number of Records" FROM (SELECT income, age FROM adult WHERE age BETWEEN 25 AND 54) "Custom SQL Query" GROUP BY 1;

-- id: holdout.tableau.sum_1
-- source: Tableau, SUM(1) record count
SELECT SUM(1) AS "sum:Number of Records:ok", "adult"."race" AS "race" FROM "public"."adult" "adult" GROUP BY 2;

-- id: holdout.powerbi.nested
-- source: Power BI, DirectQuery nested select
select "_"."sex", "_"."a0" from (select "rows"."sex" as "sex", sum("rows"."hours_per_week") as "a0" from (select "_"."sex", "_"."hours_per_week" from "public"."adult" "_" where "_"."age" >= 30) "rows" group by "sex") "_" where not "_"."a0" is null limit 1000001;

-- id: holdout.powerbi.count_rows
-- source: Power BI, count of rows
select count(1) as "a0" from (select "_"."age" from "public"."adult" "_") "rows";

-- id: holdout.grafana.macro_bounds
-- source: Grafana, expanded $__timeFilter and $__timeGroupAlias
SELECT floor(extract(epoch from checkin_date)/86400)*86400 AS "time", count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '2010-02-01T00:00:00Z' AND '2010-02-28T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- id: holdout.grafana.multi_series
-- source: Grafana, one series per hour band
SELECT date_trunc('week', checkin_date) AS "time", CASE WHEN hour < 12 THEN 'am' ELSE 'pm' END AS metric, count(*) AS value FROM checkins GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdout.redash.pivot_month_hour
-- source: Redash, month x hour counts
SELECT to_char(checkin_date, 'YYYY-MM') AS month, hour, count(*) FROM checkins WHERE checkin_date >= '2010-06-01' GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdout.analyst.yoy
-- source: analyst, year over year by month
SELECT extract(month FROM checkin_date) AS m, count(*) FILTER (WHERE extract(year FROM checkin_date) = 2009) AS y2009, count(*) FILTER (WHERE extract(year FROM checkin_date) = 2010) AS y2010 FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.analyst.first_half
-- source: analyst, filter on a half year with a timestamp literal
SELECT count(*) FROM checkins WHERE checkin_date >= TIMESTAMP '2010-01-01 00:00:00' AND checkin_date < TIMESTAMPTZ '2010-07-01 00:00:00+00';

-- id: holdout.analyst.units_days
-- source: analyst, users with at least 5 active days
SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id HAVING count(DISTINCT checkin_date) >= 5) t;

-- id: holdout.analyst.units_avg_hour
-- source: analyst, average of per-user average hour
-- expect: refused 0A000 a per-unit value is an integer (count, sum, min, max of an integer column); avg(hour) per user is not
SELECT avg(h) FROM (SELECT user_id, avg(hour) AS h FROM checkins GROUP BY user_id) t;

-- id: holdout.analyst.units_max_lat
-- source: analyst, users by their northernmost band
-- expect: refused 0A000 a per-unit max of a column declared in bins is not answered (its value is known by bin only)
SELECT width_bucket(m, -90, 90, 6) AS band, count(*) FROM (SELECT user_id, max(lat) AS m FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdout.analyst.units_share_2010
-- source: analyst, share of users active in 2010
SELECT count(*) FILTER (WHERE n2010 > 0) * 1.0 / count(*) AS share FROM (SELECT user_id, count(*) FILTER (WHERE checkin_date >= '2010-01-01') AS n2010 FROM checkins GROUP BY user_id) t;

-- id: holdout.analyst.checkins_per_active_user
-- source: analyst, check-ins per active user per month (two releases)
SELECT to_char(checkin_date, 'YYYY-MM') AS month, count(*)::numeric / nullif(count(DISTINCT user_id), 0) AS per_user FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.analyst.lat_avg_band
-- source: analyst, average longitude by latitude band
SELECT floor(lat / 30) * 30 AS band, round(avg(lon)::numeric, 2) AS lon FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.analyst.capital_flags
-- source: analyst, people with capital gains
SELECT income, count(*) FILTER (WHERE capital_gain > 0) AS with_gain, avg(capital_gain) FILTER (WHERE capital_gain > 0) AS avg_gain FROM adult GROUP BY income ORDER BY income;

-- id: holdout.analyst.net_capital
-- source: analyst, net capital
SELECT sex, sum(capital_gain - capital_loss) AS net FROM adult GROUP BY sex ORDER BY sex;

-- id: holdout.analyst.avg_weighted
-- source: analyst, hours weighted by education number
SELECT sum(hours_per_week * education_num)::float / sum(education_num) AS w FROM adult;

-- id: holdout.analyst.coalesce_group
-- source: analyst, coalesce of unknown workclass
SELECT coalesce(nullif(workclass, '?'), 'Unknown') AS wc, count(*) FROM adult GROUP BY 1 ORDER BY 2 DESC;

-- id: holdout.analyst.case_in_agg
-- source: analyst, ratio of married
SELECT race, round(100.0 * sum(CASE WHEN marital_status LIKE 'Married%' THEN 1 ELSE 0 END) / count(*), 1) AS pct_married FROM adult GROUP BY race ORDER BY race;

-- id: holdout.analyst.having_avg
-- source: analyst, occupations with long hours
SELECT occupation, avg(hours_per_week) AS h FROM adult GROUP BY occupation HAVING avg(hours_per_week) > 42 ORDER BY h DESC;

-- id: holdout.analyst.ntile
-- source: analyst, quartiles of occupations by size
SELECT occupation, count(*) AS n, ntile(4) OVER (ORDER BY count(*)) AS q FROM adult GROUP BY occupation ORDER BY n;

-- id: holdout.analyst.cte_chain
-- source: analyst, chained CTEs
WITH base AS (SELECT * FROM adult WHERE age >= 25), agg AS (SELECT education, count(*) AS n, avg(hours_per_week) AS h FROM base GROUP BY education) SELECT education, n, round(h, 1) FROM agg WHERE n > 500 ORDER BY n DESC;

-- id: holdout.analyst.scalar_ratio
-- source: analyst, share with scalar subqueries
SELECT (SELECT count(*) FROM adult WHERE income = '>50K')::float / (SELECT count(*) FROM adult) AS share;

-- id: holdout.analyst.in_aggregate_sub
-- source: analyst, education levels with more than 1000 people
SELECT sex, count(*) FROM adult WHERE education IN (SELECT education FROM adult GROUP BY education HAVING count(*) > 1000) GROUP BY sex ORDER BY sex;

-- id: holdout.analyst.distinct_on
-- source: analyst, DISTINCT ON top group per sex
SELECT DISTINCT ON (sex) sex, race, count(*) FROM adult GROUP BY sex, race ORDER BY sex, count(*) DESC;

-- id: holdout.lookup.public_dim_where
-- source: analyst, filter through the public dimension table
SELECT r.region, avg(a.hours_per_week) FROM adult a, public.country_region r WHERE a.native_country = r.country AND r.region <> 'North America' GROUP BY 1 ORDER BY 1;

-- id: holdout.lookup.values_weight_avg
-- source: analyst, averages of a public score
SELECT a.sex, avg(v.score) AS score FROM adult a JOIN (VALUES ('<=50K', 0.0), ('>50K', 1.0)) v(income, score) ON v.income = a.income GROUP BY a.sex ORDER BY a.sex;

-- id: holdout.probe.zero_rows
-- source: psql \d style probe
SELECT * FROM adult WHERE false;

-- id: holdout.probe.limit0
-- source: JDBC metadata probe
SELECT * FROM public.adult LIMIT 0;

-- id: holdout.probe.exists_select
-- source: SQLAlchemy exists
SELECT EXISTS (SELECT 1 FROM adult WHERE education = 'Doctorate') AS anon_1;

-- id: holdout.don.top_race
-- source: analyst
SELECT DISTINCT ON (sex) sex, race, count(*) FROM adult GROUP BY sex, race ORDER BY sex, count(*) DESC;

-- id: holdout.don.positions
-- source: analyst
SELECT DISTINCT ON (1) sex AS s, race, count(*) AS n FROM adult GROUP BY 1, 2 ORDER BY 1, n DESC, 2 LIMIT 1;

-- id: holdout.don.alias_group
-- source: analyst
SELECT DISTINCT ON (s) sex AS s, education AS e, avg(hours_per_week) AS h FROM adult GROUP BY s, e ORDER BY s, h DESC, e;

-- id: holdout.don.two_keys
-- source: analyst
SELECT DISTINCT ON (income, sex) income, sex, race, count(*) AS n FROM adult GROUP BY income, sex, race ORDER BY sex, income, n DESC, race OFFSET 1;

-- id: holdout.don.month_top_hour
-- source: analyst, busiest hour per month
SELECT DISTINCT ON (date_trunc('month', checkin_date)) date_trunc('month', checkin_date)::date AS month, hour, count(*) AS n FROM checkins GROUP BY date_trunc('month', checkin_date), hour ORDER BY date_trunc('month', checkin_date), n DESC, hour;

-- id: holdout.don.mismatch
-- source: analyst
-- expect: refused 42P10 as PostgreSQL
SELECT DISTINCT ON (sex) sex, race, count(*) FROM adult GROUP BY sex, race ORDER BY count(*) DESC;

-- id: holdout.compose.cte_two_levels
-- source: analyst, CTE of a CTE
WITH a AS (SELECT education, sex, count(*) AS n FROM adult GROUP BY education, sex), b AS (SELECT education, sum(n) AS total, max(n) AS biggest FROM a GROUP BY education) SELECT education, biggest * 1.0 / total AS share FROM b ORDER BY share DESC, education LIMIT 5;

-- id: holdout.compose.pivot_case_outer
-- source: analyst, pivot from an inner grouped query
SELECT race, max(CASE WHEN sex = 'Male' THEN n END) AS male, max(CASE WHEN sex = 'Female' THEN n END) AS female FROM (SELECT race, sex, count(*) AS n FROM adult GROUP BY race, sex) t GROUP BY race ORDER BY race;

-- id: holdout.compose.diff_from_avg
-- source: analyst, each group vs the overall average
SELECT occupation, avg(hours_per_week) - (SELECT avg(hours_per_week) FROM adult) AS diff FROM adult GROUP BY occupation ORDER BY occupation;

-- id: holdout.compose.cross_join_totals
-- source: analyst, share via a cross join with the total
SELECT g.income, g.n * 100.0 / t.total AS pct FROM (SELECT income, count(*) AS n FROM adult GROUP BY income) g CROSS JOIN (SELECT count(*) AS total FROM adult) t ORDER BY g.income;

-- id: holdout.compose.left_join_aggs
-- source: analyst, left join of two aggregates
SELECT a.education, a.n, b.rich FROM (SELECT education, count(*) AS n FROM adult GROUP BY education) a LEFT JOIN (SELECT education, count(*) AS rich FROM adult WHERE income = '>50K' GROUP BY education) b ON a.education = b.education ORDER BY a.education;

-- id: holdout.compose.exists_filter_groups
-- source: analyst, groups kept by HAVING on a ratio
SELECT workclass, count(*) FROM adult GROUP BY workclass HAVING sum(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) * 4 > count(*) ORDER BY workclass;

-- id: holdout.compose.union_grouped
-- source: analyst, union of two grouped aggregates
SELECT 'sex' AS dim, sex AS val, count(*) FROM adult GROUP BY sex UNION ALL SELECT 'income', income, count(*) FROM adult GROUP BY income ORDER BY 1, 2;

-- id: holdout.compose.avg_of_avgs
-- source: analyst, average of per-group averages
SELECT avg(h) FROM (SELECT occupation, avg(hours_per_week) AS h FROM adult GROUP BY occupation) t;

-- id: holdout.compose.count_groups_having
-- source: analyst, how many occupations have over 1000 people
SELECT count(*) FROM (SELECT occupation FROM adult GROUP BY occupation HAVING count(*) > 1000) t;

-- id: holdout.compose.rank_filter_cte
-- source: analyst, top education per race via rank
WITH r AS (SELECT race, education, count(*) AS n, rank() OVER (PARTITION BY race ORDER BY count(*) DESC, education) AS rk FROM adult GROUP BY race, education) SELECT race, education, n FROM r WHERE rk = 1 ORDER BY race;

-- id: holdout.compose.lead_lag
-- source: analyst, next age's count
SELECT age, count(*) AS n, lead(count(*)) OVER (ORDER BY age) AS next_n FROM adult WHERE age BETWEEN 20 AND 25 GROUP BY age ORDER BY age;

-- id: holdout.compose.first_value
-- source: analyst, first_value over groups
SELECT sex, race, count(*), first_value(race) OVER (PARTITION BY sex ORDER BY count(*) DESC, race) AS top FROM adult GROUP BY sex, race ORDER BY sex, race;

-- id: holdout.compose.scalar_in_select_twice
-- source: analyst, two scalar subqueries
SELECT (SELECT avg(age) FROM adult WHERE sex = 'Male') AS men, (SELECT avg(age) FROM adult WHERE sex = 'Female') AS women;

-- id: holdout.compose.in_list_subquery_values
-- source: analyst, filter through a CTE of constants
WITH wanted(e) AS (VALUES ('Bachelors'), ('Masters')) SELECT education, avg(age) FROM adult WHERE education IN (SELECT e FROM wanted) GROUP BY education ORDER BY education;

-- id: holdout.units.hist_cte
-- source: analyst, histogram of per-user active hours
WITH u AS (SELECT user_id, count(DISTINCT hour) AS hours FROM checkins GROUP BY user_id) SELECT hours, count(*) FROM u GROUP BY hours ORDER BY hours;

-- id: holdout.units.sum_per_user
-- source: analyst, total of per-user counts
SELECT sum(n) FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t;

-- id: holdout.units.max_per_user
-- source: analyst, the largest per-user count (bucketed)
SELECT max(n) / 100 AS hundreds FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t;

-- id: holdout.units.distinct_where_lat
-- source: analyst, users in the north
SELECT count(DISTINCT user_id) AS users FROM checkins WHERE lat >= 0;

-- id: holdout.units.distinct_and_count
-- source: analyst, users and check-ins per hour band
SELECT hour / 6 AS band, count(*) AS checkins, count(DISTINCT user_id) AS users FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdout.units.per_user_min_date
-- source: analyst, users by first month
SELECT date_trunc('month', first)::date AS cohort, count(*) FROM (SELECT user_id, min(checkin_date) AS first FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdout.units.having_filter
-- source: analyst, users with check-ins in the evening only
SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id HAVING min(hour) >= 18) t;

-- id: holdout.units.avg_days_active
-- source: analyst, average active days
SELECT round(avg(days), 1) FROM (SELECT user_id, count(DISTINCT checkin_date) AS days FROM checkins GROUP BY user_id) t;

-- id: holdout.lookup.values_three_cols
-- source: analyst, lookup with three columns
SELECT l.grp, l.ord, count(*) FROM adult a JOIN (VALUES ('Private', 'private', 1), ('Self-emp-inc', 'self', 2), ('Self-emp-not-inc', 'self', 2), ('Federal-gov', 'gov', 3), ('Local-gov', 'gov', 3), ('State-gov', 'gov', 3)) AS l(wc, grp, ord) ON a.workclass = l.wc GROUP BY l.grp, l.ord ORDER BY l.ord;

-- id: holdout.lookup.values_using
-- source: analyst, USING join to VALUES
SELECT label, count(*) FROM adult JOIN (VALUES ('Male', 'M'), ('Female', 'F')) AS s(sex, label) USING (sex) GROUP BY label ORDER BY label;

-- id: holdout.lookup.public_table_count
-- source: Metabase, count by the public table's region with a filter
SELECT "country_region"."region" AS "region", count(*) AS "count" FROM "public"."adult" INNER JOIN "public"."country_region" AS "country_region" ON "public"."adult"."native_country" = "country_region"."country" WHERE "public"."adult"."age" > 30 GROUP BY "country_region"."region" ORDER BY "count" DESC, "country_region"."region" ASC;

-- id: holdout.lookup.not_exists_values
-- source: analyst, NOT EXISTS against a VALUES list
SELECT count(*) FROM adult a WHERE NOT EXISTS (SELECT 1 FROM (VALUES ('United-States'), ('Mexico')) v(c) WHERE v.c = a.native_country);

-- id: holdout.lookup.values_numeric_band
-- source: analyst, BETWEEN bands from VALUES on hours
SELECT b.name, avg(a.age) FROM adult a JOIN (VALUES ('part', 1, 34), ('full', 35, 45), ('over', 46, 99)) b(name, lo, hi) ON a.hours_per_week BETWEEN b.lo AND b.hi GROUP BY b.name ORDER BY b.name;

-- id: holdout.tool.metabase_filter_not_in
-- source: Metabase, not-in filter and null handling
SELECT "public"."adult"."race" AS "race", count(*) AS "count" FROM "public"."adult" WHERE ("public"."adult"."race" <> 'White' OR "public"."adult"."race" IS NULL) GROUP BY "public"."adult"."race" ORDER BY "public"."adult"."race" ASC;

-- id: holdout.tool.superset_adhoc_sql_metric
-- source: Superset, ad-hoc SQL metric
SELECT education AS education, SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) * 1.0 / COUNT(*) AS "share_rich" FROM public.adult GROUP BY education ORDER BY "share_rich" DESC LIMIT 10000;

-- id: holdout.tool.superset_having_metric
-- source: Superset, HAVING on a metric
SELECT occupation AS occupation, COUNT(*) AS count FROM public.adult GROUP BY occupation HAVING COUNT(*) > 1000 ORDER BY count DESC LIMIT 10000;

-- id: holdout.tool.tableau_countd_by
-- source: Tableau, COUNTD by dimension
SELECT "adult"."sex" AS "sex", COUNT(DISTINCT "adult"."education") AS "ctd:education:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: holdout.tool.tableau_avg_int
-- source: Tableau, AVG of integer with cast
SELECT AVG(CAST("adult"."age" AS DOUBLE PRECISION)) AS "avg:age:ok" FROM "public"."adult" "adult" HAVING (COUNT(1) > 0);

-- id: holdout.tool.looker_percentile
-- source: Looker, median measure
SELECT adult.sex AS "adult.sex", PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY adult.age) AS "adult.median_age" FROM public.adult AS adult GROUP BY 1 ORDER BY 2 DESC LIMIT 500;

-- id: holdout.tool.powerbi_distinctcount
-- source: Power BI, distinct count
select count(distinct("_"."occupation")) + max(case when "_"."occupation" is null then 1 else 0 end) as "a0" from "public"."adult" as "_";

-- id: holdout.tool.powerbi_topn_agg
-- source: Power BI, aggregation with rows and limit
select "rows"."race" as "race", count(1) as "a0" from (select "_"."race" as "race" from "public"."adult" as "_" where ("_"."age" >= 20 and "_"."age" <= 40)) as "rows" group by "race" limit 1000001;

-- id: holdout.tool.sqlalchemy_label
-- source: SQLAlchemy, func.count with label and group_by
SELECT adult.marital_status AS adult_marital_status, count(adult.marital_status) AS n FROM adult GROUP BY adult.marital_status ORDER BY n DESC;

-- id: holdout.tool.django_annotate
-- source: Django, values().annotate()
SELECT "adult"."relationship", COUNT("adult"."relationship") AS "c", AVG("adult"."hours_per_week") AS "h" FROM "adult" GROUP BY "adult"."relationship" ORDER BY "adult"."relationship" ASC;

-- id: holdout.tool.pandas_read_sql_group
-- source: pandas read_sql, groupby-style SQL
SELECT income, sex, COUNT(*) AS size FROM adult GROUP BY income, sex ORDER BY income, sex;

-- id: holdout.analyst.null_aware
-- source: analyst, nullif division
SELECT sex, sum(capital_gain)::float / nullif(sum(capital_loss), 0) AS ratio FROM adult GROUP BY sex ORDER BY sex;

-- id: holdout.analyst.bool_group
-- source: analyst, boolean groups
SELECT age >= 65 AS retired, income = '>50K' AS rich, count(*) FROM adult GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdout.analyst.cast_text_group
-- source: analyst, age as text
SELECT age::text AS a, count(*) FROM adult WHERE age < 20 GROUP BY 1 ORDER BY 1;

-- id: holdout.analyst.order_by_agg_not_selected
-- source: analyst, order by an aggregate not selected
SELECT education FROM adult GROUP BY education ORDER BY avg(age) DESC LIMIT 3;

-- id: holdout.analyst.filter_on_two_aggs
-- source: analyst, count and sum filtered
SELECT count(*) FILTER (WHERE sex = 'Female') AS women, sum(hours_per_week) FILTER (WHERE sex = 'Female') AS women_hours FROM adult;

-- id: holdout.analyst.mode
-- source: analyst, mode per group
SELECT income, mode() WITHIN GROUP (ORDER BY occupation) FROM adult GROUP BY income ORDER BY income;

-- id: holdout.analyst.grouping_fn
-- source: analyst, cube with GROUPING()
SELECT CASE WHEN GROUPING(sex) = 1 THEN 'all' ELSE sex END AS sex, count(*) FROM adult GROUP BY CUBE (sex) ORDER BY 1;

-- id: holdout.analyst.checkins_lat_lon_grid
-- source: analyst, grid of 30 degree cells
SELECT floor(lat / 30) * 30 AS lat0, floor(lon / 30) * 30 AS lon0, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10;

-- id: holdout.analyst.lat_between_edges
-- source: analyst, inclusive bounds at edges
-- expect: refused 0A000 BETWEEN 30 AND 39.999999 cuts the declared bin [30, 40) of lat (the message names the bin)
SELECT count(*) FROM checkins WHERE lat BETWEEN 30 AND 39.999999;

-- id: holdout.analyst.sum_lat_sign
-- source: analyst, mean absolute latitude (not affine: refused?)
-- expect: refused 0A000 abs() of a clamped column is not affine in its value (SUM/AVG of the clamped value itself are answered)
SELECT avg(abs(lat)) FROM checkins;

-- id: holdout.probe.count_star_limit
-- source: tool, count rows of a limited subquery
SELECT count(*) FROM (SELECT * FROM adult LIMIT 500) t;

-- id: holdout.probe.select_one_where
-- source: tool, connection check through the table
SELECT 1 FROM adult LIMIT 0;

-- id: holdout.cohort.by_month_text
-- source: analyst, cohort label
SELECT to_char(first, 'YYYY-MM') AS cohort, count(*) AS users FROM (SELECT user_id, min(checkin_date) AS first FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdout.cohort.last_seen_2010
-- source: analyst, users last seen in 2010
SELECT count(*) FROM (SELECT user_id, max(checkin_date) AS last FROM checkins GROUP BY user_id) t WHERE last >= DATE '2010-01-01';

-- id: holdout.cohort.span
-- source: analyst, days between first and last check-in, bucketed
SELECT (last - first) / 100 AS span100, count(*) FROM (SELECT user_id, min(checkin_date) AS first, max(checkin_date) AS last FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: holdout.cohort.first_month_trunc
-- source: analyst, first month via date_trunc inside
SELECT m, count(*) FROM (SELECT user_id, min(date_trunc('month', checkin_date)::date) AS m FROM checkins GROUP BY user_id) t GROUP BY m ORDER BY m;

-- id: holdout.cohort.first_quarter_cte
-- source: analyst, CTE cohort by quarter
WITH f AS (SELECT user_id, min(checkin_date) AS d FROM checkins GROUP BY user_id) SELECT extract(year FROM d) AS y, extract(quarter FROM d) AS q, count(*) FROM f GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdout.forms.table_col_alias
-- source: analyst
SELECT count(*) FROM adult AS a WHERE a.age > 60;

-- id: holdout.forms.only
-- source: tool
SELECT count(*) AS "Count" FROM ONLY public.adult;

-- id: holdout.forms.any_array
-- source: asyncpg style with constants
SELECT count(*) FROM adult WHERE age = ANY (ARRAY[30, 40, 50]);

-- id: holdout.forms.any_array_text
-- source: asyncpg style with constants
SELECT sex, count(*) FROM adult WHERE education = ANY ('{Bachelors,Masters}'::text[]) GROUP BY sex ORDER BY sex;

-- id: holdout.forms.all_array
-- source: analyst
SELECT count(*) FROM adult WHERE age <> ALL (ARRAY[30, 40]);

-- id: holdout.forms.count_one
-- source: tool
SELECT count(1), count(0) FROM adult;

-- id: holdout.forms.count_or_null
-- source: analyst idiom
SELECT count(age > 60 OR NULL) AS seniors FROM adult;

-- id: holdout.forms.avg_bool_int
-- source: analyst
SELECT avg((income = '>50K')::int) AS share FROM adult;

-- id: holdout.forms.row_in
-- source: analyst
SELECT count(*) FROM adult WHERE (age, sex) IN ((30, 'Male'), (40, 'Female'));

-- id: holdout.forms.not_between
-- source: analyst
SELECT count(*) FROM adult WHERE age NOT BETWEEN 30 AND 40;

-- id: holdout.forms.like_any
-- source: analyst
SELECT count(*) FROM adult WHERE education LIKE ANY (ARRAY['B%', 'M%']);

-- id: holdout.forms.where_true
-- source: tool
SELECT count(*) FROM adult WHERE true;

-- id: holdout.forms.having_no_group
-- source: analyst
SELECT count(*) FROM adult HAVING count(*) > 0;

-- id: holdout.forms.group_dup
-- source: tool
SELECT sex, count(*) FROM adult GROUP BY sex, sex ORDER BY sex;

-- id: holdout.forms.group_alias_expr
-- source: analyst
SELECT upper(sex) AS s, count(*) FROM adult GROUP BY s ORDER BY s;

-- id: holdout.forms.group_const
-- source: tool
SELECT 1 AS one, count(*) FROM adult GROUP BY 1;

-- id: holdout.forms.decade
-- source: analyst
SELECT age / 10 * 10 AS decade, count(*) FROM adult GROUP BY decade ORDER BY decade;

-- id: holdout.forms.share_within
-- source: analyst
SELECT sex, race, count(*) * 100.0 / sum(count(*)) OVER (PARTITION BY sex) AS pct FROM adult GROUP BY sex, race ORDER BY sex, race;

-- id: holdout.forms.percent_rank
-- source: analyst
SELECT occupation, percent_rank() OVER (ORDER BY count(*)) AS pr FROM adult GROUP BY occupation ORDER BY occupation;

-- id: holdout.forms.multi_filter
-- source: analyst
SELECT count(*) FILTER (WHERE age BETWEEN 20 AND 29) AS "20s", count(*) FILTER (WHERE age BETWEEN 30 AND 39) AS "30s", count(*) FILTER (WHERE age >= 40) AS "40+" FROM adult;

-- id: holdout.forms.values_cast_cte
-- source: analyst
WITH m(code, label) AS (VALUES ('Male'::text, 'men'::text), ('Female', 'women')) SELECT m.label, count(*) FROM adult JOIN m ON adult.sex = m.code GROUP BY m.label ORDER BY 1;

-- id: holdout.forms.case_simple_group
-- source: analyst
SELECT CASE race WHEN 'White' THEN 'white' WHEN 'Black' THEN 'black' ELSE 'other' END AS r, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.forms.nulls_last
-- source: analyst
SELECT workclass, avg(hours_per_week) FROM adult GROUP BY workclass ORDER BY 2 DESC NULLS LAST, 1;

-- id: holdout.forms.in_select_distinct
-- source: analyst
SELECT count(*) FROM adult WHERE occupation IN (SELECT DISTINCT occupation FROM adult WHERE occupation LIKE 'P%');

-- id: holdout.forms.sum_distinct
-- source: analyst
SELECT count(DISTINCT age), count(DISTINCT sex) FROM adult WHERE age > 80;

-- id: holdout.forms.min_max_text
-- source: analyst
SELECT min(education), max(education) FROM adult;

-- id: holdout.forms.stddev_pop_group
-- source: analyst
SELECT sex, round(stddev_pop(hours_per_week)::numeric, 3) FROM adult GROUP BY sex ORDER BY sex;

-- id: holdout.forms.var_samp
-- source: analyst
SELECT var_samp(age) FROM adult WHERE race = 'Other';

-- id: holdout.forms.limit_all
-- source: tool
SELECT sex, count(*) FROM adult GROUP BY sex ORDER BY sex LIMIT ALL;

-- id: holdout.forms.limit_null
-- source: tool
SELECT sex, count(*) FROM adult GROUP BY sex ORDER BY sex LIMIT NULL OFFSET 1;

-- id: holdout.forms.subquery_alias_cols
-- source: analyst
SELECT s, n FROM (SELECT sex, count(*) FROM adult GROUP BY sex) AS t(s, n) ORDER BY s;

-- id: holdout.forms.exists_correlated_public
-- source: analyst
SELECT count(*) FROM adult a WHERE EXISTS (SELECT 1 FROM public.country_region r WHERE r.country = a.native_country AND r.region = 'Asia');

-- id: holdout.forms.cast_numeric_avg
-- source: analyst
SELECT CAST(AVG(age) AS NUMERIC(5,1)) AS a FROM adult;

-- id: holdout.forms.concat_group
-- source: analyst
SELECT concat(sex, '-', income) AS k, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.forms.is_true
-- source: analyst
SELECT (age > 50) IS TRUE AS old, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: holdout.forms.order_by_expr_not_selected
-- source: analyst
SELECT sex FROM adult GROUP BY sex ORDER BY count(*) DESC;

-- id: holdout.forms.union_distinct_counts
-- source: analyst
SELECT count(*) FROM adult WHERE sex = 'Male' UNION SELECT count(*) FROM adult WHERE sex = 'Male';

-- id: holdout.forms.intersect
-- source: analyst
SELECT education FROM adult GROUP BY education HAVING count(*) > 1000 INTERSECT SELECT education FROM adult GROUP BY education HAVING avg(age) > 38;

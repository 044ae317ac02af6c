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

-- Questions about privacy units on the user-level check-ins (issue 40, "Questions about
-- units"): each unit (user) contributes one value to a histogram over units.

-- id: units.count_distinct
-- source: analyst, the number of users
SELECT count(DISTINCT user_id) FROM checkins;

-- id: units.count_distinct_filtered
-- source: analyst, users with a check-in in 2010
SELECT count(DISTINCT user_id) AS users FROM checkins WHERE checkin_date >= '2010-01-01';

-- id: units.metabase_distinct
-- source: Metabase 0.50 "Number of distinct values of User ID"
SELECT COUNT(DISTINCT "public"."checkins"."user_id") AS "count" FROM "public"."checkins";

-- id: units.per_user_histogram
-- source: analyst, distribution of check-ins per user
SELECT width_bucket(n, 0, 2000, 20) AS bucket, count(*) AS users FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: units.per_user_case_buckets
-- source: analyst, users by activity level
SELECT activity, count(*) FROM (SELECT user_id, CASE WHEN count(*) < 50 THEN 'light' WHEN count(*) < 200 THEN 'regular' ELSE 'heavy' END AS activity FROM checkins GROUP BY user_id) t GROUP BY activity ORDER BY activity;

-- id: units.avg_per_user
-- source: analyst, the average number of check-ins per user
SELECT avg(n) FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t;

-- id: units.cte_per_user
-- source: analyst, a CTE of per-user counts
WITH per_user AS (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) SELECT count(*) FILTER (WHERE n >= 100) AS active, count(*) AS users FROM per_user;

-- id: units.having_users
-- source: analyst, users with at least 500 check-ins
SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id HAVING count(*) >= 500) t;

-- id: units.active_days
-- source: analyst, distribution of active days per user
SELECT floor(days / 50) * 50 AS days_bucket, count(*) AS users FROM (SELECT user_id, count(DISTINCT checkin_date) AS days FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: units.avg_days
-- source: analyst, average active days per user
SELECT avg(days) FROM (SELECT user_id, count(DISTINCT checkin_date) AS days FROM checkins GROUP BY user_id) t;

-- id: units.evening_users
-- source: analyst, users by their share of evening check-ins
-- expect: refused 54000 at the corpus's bound of 2,000 rows per user the CASE over two per-unit counts spans 2,001 x 2,001 values, above the cell limit; at the declared bound of 50 it is answered
SELECT CASE WHEN evening * 2 > n THEN 'evening person' ELSE 'day person' END AS kind, count(*) FROM (SELECT user_id, count(*) FILTER (WHERE hour >= 18) AS evening, count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1;

-- id: units.distinct_by_hour
-- source: analyst, distinct users per hour of day
SELECT hour, count(DISTINCT user_id) AS users FROM checkins GROUP BY hour ORDER BY hour;

-- id: units.distinct_by_month
-- source: Superset, distinct users per month (COUNT_DISTINCT metric)
SELECT DATE_TRUNC('month', checkin_date) AS checkin_date, COUNT(DISTINCT user_id) AS "COUNT_DISTINCT(user_id)" FROM public.checkins GROUP BY DATE_TRUNC('month', checkin_date) ORDER BY "COUNT_DISTINCT(user_id)" DESC LIMIT 10000;

-- id: units.max_per_user
-- source: analyst, the busiest user's count, bucketed
SELECT width_bucket(n, 0, 2000, 10) AS bucket FROM (SELECT max(n) AS n FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t) m;

-- id: units.north_users
-- source: analyst, users who checked in north of 40 degrees
SELECT count(DISTINCT user_id) FROM checkins WHERE lat >= 40;

-- id: units.rows_per_user_overall
-- source: analyst, check-ins per user overall (two aggregates)
SELECT count(*)::numeric / count(DISTINCT user_id) AS per_user FROM checkins;

-- Analysts' own SQL over Adult and the check-ins.

-- id: analyst.rate_by_education
-- source: analyst, high-income rate by education, ordered
SELECT education, round(avg(CASE WHEN income = '>50K' THEN 1.0 ELSE 0 END), 3) AS rate, count(*) AS n FROM adult GROUP BY education ORDER BY rate DESC;

-- id: analyst.filter_agg_avg
-- source: analyst, average hours of the over-50s built from FILTERed aggregates
SELECT sum(hours_per_week) FILTER (WHERE age > 50) * 1.0 / count(*) FILTER (WHERE age > 50) AS avg_hours_over_50 FROM adult;

-- id: analyst.sum_per_group
-- source: analyst, total hours per occupation
SELECT occupation, SUM(hours_per_week) AS total_hours FROM adult GROUP BY occupation ORDER BY occupation;

-- id: analyst.age_percentiles_by_income
-- source: analyst
SELECT income, percentile_disc(0.9) WITHIN GROUP (ORDER BY age) AS p90 FROM adult GROUP BY income ORDER BY income;

-- id: analyst.max_age_having
-- source: analyst, groups whose oldest member is over 80
SELECT race, max(age) FROM adult GROUP BY race HAVING max(age) > 80 ORDER BY race;

-- id: analyst.min_hours
-- source: analyst
SELECT workclass, min(hours_per_week), max(hours_per_week) FROM adult GROUP BY workclass ORDER BY workclass;

-- id: analyst.count_distinct_country
-- source: analyst
SELECT count(DISTINCT native_country) FROM adult;

-- id: analyst.variance_by_sex
-- source: analyst
SELECT sex, var_samp(hours_per_week) AS var, stddev(age) AS sd FROM adult GROUP BY sex ORDER BY sex;

-- id: analyst.nested_case
-- source: analyst, a two-level CASE
SELECT CASE WHEN age < 30 THEN CASE WHEN education_num >= 13 THEN 'young graduate' ELSE 'young' END ELSE 'older' END AS grp, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: analyst.like_pattern
-- source: analyst
SELECT count(*) FROM adult WHERE marital_status LIKE 'Married%' AND occupation NOT LIKE '%-%';

-- id: analyst.coalesce_nullif
-- source: analyst, ratio with nullif
SELECT sex, count(*) FILTER (WHERE income = '>50K')::numeric / nullif(count(*), 0) AS rate FROM adult GROUP BY sex ORDER BY sex;

-- id: analyst.grouping_sets
-- source: analyst
SELECT sex, race, count(*) FROM adult GROUP BY GROUPING SETS ((sex), (race), ()) ORDER BY 1, 2;

-- id: analyst.derived_filter
-- source: analyst, a derived table that only filters
SELECT count(*) FROM (SELECT * FROM adult WHERE age BETWEEN 30 AND 39 AND sex = 'Female') t;

-- id: analyst.cte_filter
-- source: analyst, a CTE that only filters
WITH workers AS (SELECT * FROM adult WHERE hours_per_week >= 40) SELECT income, count(*) FROM workers GROUP BY income ORDER BY income;

-- id: analyst.top_countries
-- source: analyst
SELECT native_country, count(*) AS n FROM adult WHERE native_country <> 'United-States' GROUP BY 1 ORDER BY n DESC LIMIT 5;

-- id: analyst.union_all
-- source: analyst
SELECT 'all' AS who, count(*) FROM adult UNION ALL SELECT 'over 60', count(*) FROM adult WHERE age > 60;

-- id: analyst.hours_bins
-- source: analyst, hours in bins of 10
SELECT width_bucket(hours_per_week, 0, 100, 10) AS bin, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: analyst.age_edu_avg
-- source: analyst, average education number by decade
SELECT (age / 10) * 10 AS decade, round(avg(education_num), 2) FROM adult GROUP BY 1 ORDER BY 1;

-- id: analyst.checkins_by_hour
-- source: analyst, check-ins by hour of day
SELECT hour, count(*) FROM checkins GROUP BY hour ORDER BY hour;

-- id: analyst.checkins_avg_hour
-- source: analyst, average hour by latitude band
SELECT floor(lat / 10) * 10 AS band, avg(hour) FROM checkins WHERE lat >= 20 AND lat < 60 GROUP BY 1 ORDER BY 1;

-- id: analyst.checkins_night
-- source: analyst
SELECT count(*) FILTER (WHERE hour < 6) AS night, count(*) AS total FROM checkins;

-- id: analyst.checkins_percentile_hour
-- source: analyst
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY hour) AS median_hour FROM checkins;

-- id: analyst.checkins_cte_window
-- source: analyst, share of check-ins per hour with a window
SELECT hour, count(*) * 100.0 / sum(count(*)) OVER () AS pct FROM checkins GROUP BY hour ORDER BY hour;

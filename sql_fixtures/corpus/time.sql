-- Time series over the check-ins, as BI tools and analysts write them (issue 40, "Time").
-- Each case: `-- id:`, `-- source:`, optional `-- setup:` (statements run first, on both sides),
-- optional `-- expect: refused <SQLSTATE> <reason>`; otherwise the answer must be exact.

-- id: time.superset.day
-- source: Superset 6.1 time-series line chart, time grain P1D, no time range
SELECT DATE_TRUNC('day', checkin_date) AS checkin_date, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('day', checkin_date) ORDER BY count DESC LIMIT 10000;

-- id: time.superset.week_range
-- source: Superset 6.1 time-series bar chart, grain P1W, time range with TO_TIMESTAMP bounds
SELECT DATE_TRUNC('week', checkin_date) AS checkin_date, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= TO_TIMESTAMP('2010-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND checkin_date < TO_TIMESTAMP('2010-07-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') GROUP BY DATE_TRUNC('week', checkin_date) ORDER BY count DESC LIMIT 10000;

-- id: time.superset.month
-- source: Superset 6.1 time-series chart, grain P1M, metric COUNT(*)
SELECT DATE_TRUNC('month', checkin_date) AS checkin_date, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('month', checkin_date) ORDER BY count DESC LIMIT 10000;

-- id: time.superset.quarter_by_hour_band
-- source: Superset 6.1 time-series with a dimension, grain P3M
SELECT DATE_TRUNC('quarter', checkin_date) AS checkin_date, CASE WHEN hour < 12 THEN 'am' ELSE 'pm' END AS half, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('quarter', checkin_date), CASE WHEN hour < 12 THEN 'am' ELSE 'pm' END ORDER BY count DESC LIMIT 10000;

-- id: time.superset.year
-- source: Superset 6.1 big number with trendline, grain P1Y
SELECT DATE_TRUNC('year', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('year', checkin_date) LIMIT 10000;

-- id: time.grafana.day_epoch
-- source: Grafana $__timeGroupAlias(checkin_date, 1d) with $__timeFilter (ISO literals)
SELECT floor(extract(epoch from checkin_date)/86400)*86400 AS "time", count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '2010-03-01T00:00:00Z' AND '2010-06-01T00:00:00Z' GROUP BY 1 ORDER BY 1;

-- id: time.grafana.week_epoch
-- source: Grafana $__timeGroupAlias(checkin_date, 1w)
SELECT floor(extract(epoch from checkin_date)/604800)*604800 AS "time", count(*) AS "value" FROM checkins WHERE checkin_date BETWEEN '2009-06-01T00:00:00Z' AND '2010-10-31T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- id: time.grafana.hour_series
-- source: Grafana hourly series built from the date and the hour column
SELECT extract(epoch from checkin_date) + hour * 3600 AS "time", count(*) AS "value" FROM checkins WHERE checkin_date BETWEEN '2010-10-01T00:00:00Z' AND '2010-10-07T00:00:00Z' GROUP BY 1 ORDER BY 1;

-- id: time.grafana.timefilter_only
-- source: Grafana stat panel, $__timeFilter only
SELECT count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '2010-01-01T00:00:00Z' AND '2010-01-31T23:59:59Z';

-- id: time.grafana.unixepoch_filter
-- source: Grafana $__unixEpochFilter style bounds on extract(epoch)
SELECT count(*) FROM checkins WHERE extract(epoch from checkin_date) >= 1262304000 AND extract(epoch from checkin_date) < 1264982400;

-- id: time.metabase.day
-- source: Metabase 0.50 question, count by checkin_date: Day
SELECT CAST("public"."checkins"."checkin_date" AS date) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY CAST("public"."checkins"."checkin_date" AS date) ORDER BY CAST("public"."checkins"."checkin_date" AS date) ASC;

-- id: time.metabase.week
-- source: Metabase 0.50, checkin_date: Week (weeks start on Sunday)
SELECT (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') ORDER BY (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') ASC;

-- id: time.metabase.month
-- source: Metabase 0.50, checkin_date: Month
SELECT CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) ORDER BY CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) ASC;

-- id: time.metabase.day_of_week
-- source: Metabase 0.50, checkin_date: Day of week
SELECT (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) ORDER BY (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) ASC;

-- id: time.metabase.month_of_year
-- source: Metabase 0.50, checkin_date: Month of year
SELECT CAST(extract(month from "public"."checkins"."checkin_date") AS integer) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY CAST(extract(month from "public"."checkins"."checkin_date") AS integer) ORDER BY CAST(extract(month from "public"."checkins"."checkin_date") AS integer) ASC;

-- id: time.metabase.quarter_of_year
-- source: Metabase 0.50, checkin_date: Quarter of year
SELECT CAST(extract(quarter from "public"."checkins"."checkin_date") AS integer) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY CAST(extract(quarter from "public"."checkins"."checkin_date") AS integer) ORDER BY 1 ASC;

-- id: time.metabase.relative_filter
-- source: Metabase 0.50, filter "checkin_date between" two dates, by hour of day
SELECT "public"."checkins"."hour" AS "hour", COUNT(*) AS "count" FROM "public"."checkins" WHERE ("public"."checkins"."checkin_date" >= timestamp with time zone '2010-05-01 00:00:00.000Z') AND ("public"."checkins"."checkin_date" < timestamp with time zone '2010-06-01 00:00:00.000Z') GROUP BY "public"."checkins"."hour" ORDER BY "public"."checkins"."hour" ASC;

-- id: time.tableau.month
-- source: Tableau 2024 MONTH(checkin_date) discrete
SELECT CAST(DATE_TRUNC('MONTH', CAST("checkins"."checkin_date" AS DATE)) AS DATE) AS "tmn:checkin_date:ok", SUM(1) AS "sum:Number of Records:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: time.tableau.year
-- source: Tableau 2024 YEAR(checkin_date)
SELECT CAST(EXTRACT(YEAR FROM "checkins"."checkin_date") AS BIGINT) AS "yr:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: time.tableau.weekday
-- source: Tableau 2024 WEEKDAY(checkin_date)
SELECT (CAST(EXTRACT(DOW FROM "checkins"."checkin_date") AS BIGINT) + 1) AS "wd:checkin_date:ok", SUM(1) AS "sum:Number of Records:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: time.tableau.week_trunc
-- source: Tableau 2024 WEEK(checkin_date) exact date
SELECT CAST(DATE_TRUNC('WEEK', CAST("checkins"."checkin_date" AS DATE)) AS DATE) AS "twk:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" WHERE ("checkins"."checkin_date" >= DATE '2010-01-01') GROUP BY 1;

-- id: time.looker.month_text
-- source: Looker dimension_group, timeframe month
SELECT TO_CHAR(DATE_TRUNC('month', checkins.checkin_date ), 'YYYY-MM') AS "checkins.checkin_month", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY DATE_TRUNC('month', checkins.checkin_date ) ORDER BY 1 DESC FETCH NEXT 500 ROWS ONLY;

-- id: time.looker.date
-- source: Looker dimension_group, timeframe date
SELECT (DATE(checkins.checkin_date )) AS "checkins.checkin_date", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins WHERE ((( checkins.checkin_date ) >= ((DATE '2010-09-01')) AND ( checkins.checkin_date ) < ((DATE '2010-09-01' + (30 || ' day')::INTERVAL)))) GROUP BY 1 ORDER BY 1 DESC FETCH NEXT 500 ROWS ONLY;

-- id: time.looker.day_of_week
-- source: Looker dimension_group, timeframes day_of_week and day_of_week_index
SELECT TO_CHAR(checkins.checkin_date , 'FMDay') AS "checkins.checkin_day_of_week", EXTRACT(DOW FROM checkins.checkin_date )::integer AS "checkins.checkin_day_of_week_index", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1, 2 ORDER BY 2 FETCH NEXT 500 ROWS ONLY;

-- id: time.looker.quarter
-- source: Looker dimension_group, timeframe quarter
SELECT TO_CHAR(DATE_TRUNC('quarter', checkins.checkin_date ), 'YYYY-MM') AS "checkins.checkin_quarter", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY DATE_TRUNC('quarter', checkins.checkin_date ) ORDER BY 1 FETCH NEXT 500 ROWS ONLY;

-- id: time.powerbi.date
-- source: Power BI DirectQuery, count by date
select "_"."checkin_date", "_"."a0" from (select "rows"."checkin_date" as "checkin_date", count(1) as "a0" from (select "_"."checkin_date" from "public"."checkins" "_") "rows" group by "checkin_date") "_" where not "_"."a0" is null limit 1000001;

-- id: time.powerbi.year_month
-- source: Power BI DirectQuery over a date hierarchy (year, month)
select "_"."c1", "_"."c2", "_"."a0" from (select date_part('year', "rows"."checkin_date") as "c1", date_part('month', "rows"."checkin_date") as "c2", count(1) as "a0" from "public"."checkins" "rows" group by date_part('year', "rows"."checkin_date"), date_part('month', "rows"."checkin_date")) "_" where not "_"."a0" is null limit 1000001;

-- id: time.redash.month_date
-- source: Redash query, analyst's own
SELECT date_trunc('month', checkin_date)::date AS month, count(*) AS checkins FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.year_extract_grouped
-- source: analyst, year as bigint (answered 0 for 2009 before)
SELECT CAST(EXTRACT(YEAR FROM checkin_date) AS BIGINT) AS y, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.dow_name
-- source: analyst, weekday names in order
SELECT to_char(checkin_date, 'Dy') AS day, extract(isodow FROM checkin_date) AS isodow, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 2;

-- id: time.analyst.weekend
-- source: analyst, weekend share
SELECT CASE WHEN extract(isodow FROM checkin_date) >= 6 THEN 'weekend' ELSE 'weekday' END AS part, count(*) FROM checkins GROUP BY 1;

-- id: time.analyst.iso_week
-- source: analyst, ISO weeks of 2010
SELECT to_char(checkin_date, 'IYYY-IW') AS week, count(*) FROM checkins WHERE checkin_date >= '2010-01-04' AND checkin_date < '2010-03-01' GROUP BY 1 ORDER BY 1;

-- id: time.analyst.doy
-- source: analyst, day of year bucketed by 30
SELECT floor((extract(doy FROM checkin_date) - 1) / 30) AS block, count(*) FROM checkins WHERE extract(year FROM checkin_date) = 2010 GROUP BY 1 ORDER BY 1;

-- id: time.analyst.days_since
-- source: analyst, days since launch in blocks of 100
SELECT (checkin_date - DATE '2009-02-01') / 100 AS hundred_days, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.interval_window
-- source: analyst, last 30 days of the data
SELECT count(*) FROM checkins WHERE checkin_date > DATE '2010-10-31' - INTERVAL '30 days';

-- id: time.analyst.timestamp_cast_trunc
-- source: analyst, date_trunc of a cast to timestamp (a timestamp without time zone)
SELECT date_trunc('month', checkin_date::timestamp) AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.tz_month
-- source: analyst in New York: date_trunc of a date is a timestamptz in the session's TimeZone
-- setup: SET TimeZone = 'America/New_York'
SELECT date_trunc('month', checkin_date) AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.tz_iso_filter
-- source: analyst in Tokyo comparing a date with an ISO timestamp literal
-- setup: SET TimeZone = 'Asia/Tokyo'
SELECT count(*) FROM checkins WHERE checkin_date >= '2010-06-01T00:00:00+09:00' AND checkin_date < '2010-07-01T00:00:00+09:00';

-- id: time.analyst.hour_of_day_evening
-- source: analyst, evening check-ins by month
SELECT to_char(checkin_date, 'YYYY-MM') AS month, count(*) FILTER (WHERE hour >= 18) AS evening, count(*) AS total FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY 1 ORDER BY 1;

-- id: time.analyst.make_date
-- source: analyst, first half of 2010 with make_date
SELECT count(*) FROM checkins WHERE checkin_date BETWEEN make_date(2010, 1, 1) AND make_date(2010, 6, 30);

-- id: time.analyst.date_part_day
-- source: analyst, day of month
SELECT date_part('day', checkin_date) AS dom, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: time.analyst.month_name
-- source: analyst, month names
SELECT to_char(checkin_date, 'Mon YYYY') AS month, count(*) FROM checkins WHERE checkin_date < '2009-07-01' GROUP BY to_char(checkin_date, 'Mon YYYY'), date_trunc('month', checkin_date) ORDER BY date_trunc('month', checkin_date);

-- id: time.analyst.week_and_lat
-- source: analyst, weekly check-ins in the northern band 30-40
SELECT date_trunc('week', checkin_date)::date AS week, count(*) FROM checkins WHERE lat >= 30 AND lat < 40 AND checkin_date >= '2010-09-01' GROUP BY 1 ORDER BY 1;

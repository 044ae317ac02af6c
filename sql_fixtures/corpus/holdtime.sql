-- Hold-out time SQL (issue 40, "Time"), written after time.sql and holdout.sql were answered, to try
-- the class on statements not tuned for: every date_trunc unit (with a zone argument), extract and
-- date_part of every field, to_char templates, date_bin, make_*, age, justify_*, OVERLAPS, interval
-- arithmetic, ISO and offset literals, AT TIME ZONE with names, POSIX offsets and intervals, several
-- SET TimeZone setups, and the time grains of Superset, Grafana, Metabase, Looker, Tableau, dbt and
-- ibis. Ids outside the sessions benchmark's draw. Format: sql_fixtures/corpus/__init__.py.

-- id: holdtime.trunc.decade
-- source: analyst, decade
SELECT date_trunc('decade', checkin_date) AS d, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.trunc.century_ts
-- source: analyst, century of a timestamp
SELECT date_trunc('century', checkin_date::timestamp) AS c, count(*) FROM checkins GROUP BY 1;

-- id: holdtime.trunc.millennium
-- source: analyst, millennium under Los Angeles
-- setup: SET TimeZone = 'America/Los_Angeles'
SELECT date_trunc('millennium', checkin_date) AS m, count(*) FROM checkins GROUP BY 1;

-- id: holdtime.trunc.tz_arg_month
-- source: analyst, date_trunc with a time zone argument
SELECT date_trunc('month', checkin_date::timestamptz, 'Europe/Berlin') AS m, count(*) FROM checkins WHERE checkin_date < '2009-06-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.trunc.tz_arg_day_la
-- source: analyst, day in Tokyo while the session is in Los Angeles
-- setup: SET TimeZone = 'America/Los_Angeles'
SELECT date_trunc('day', checkin_date::timestamptz, 'Asia/Tokyo') AS d, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-03-10' AND '2010-03-16' GROUP BY 1 ORDER BY 1;

-- id: holdtime.trunc.hour_of_ts
-- source: analyst, hourly series from date and hour
SELECT date_trunc('hour', checkin_date::timestamp + hour * interval '1 hour') AS h, count(*) FROM checkins WHERE checkin_date = '2010-07-04' GROUP BY 1 ORDER BY 1;

-- id: holdtime.trunc.minute_second
-- source: analyst, finer units are the identity on a date
SELECT date_trunc('minute', checkin_date::timestamp) AS mi, date_trunc('second', checkin_date::timestamp) AS s, count(*) FROM checkins WHERE checkin_date >= '2010-10-25' GROUP BY 1, 2 ORDER BY 1;

-- id: holdtime.trunc.quarter_kolkata
-- source: analyst in India, quarters
-- setup: SET TimeZone = 'Asia/Kolkata'
SELECT date_trunc('quarter', checkin_date) AS q, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.extract.epoch_tstz
-- source: analyst, epoch of a timestamptz in Kolkata
-- setup: SET TimeZone = 'Asia/Kolkata'
SELECT extract(epoch FROM checkin_date::timestamptz) AS e, count(*) FROM checkins WHERE checkin_date < '2009-02-05' GROUP BY 1 ORDER BY 1;

-- id: holdtime.extract.julian
-- source: analyst, Julian day numbers
SELECT extract(julian FROM checkin_date) AS j, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-01-01' AND '2010-01-05' GROUP BY 1 ORDER BY 1;

-- id: holdtime.extract.isoyear_week
-- source: analyst, ISO year and week around new year
SELECT extract(isoyear FROM checkin_date) AS iy, extract(week FROM checkin_date) AS w, count(*) FROM checkins WHERE checkin_date BETWEEN '2009-12-25' AND '2010-01-10' GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdtime.extract.decade_century_millennium
-- source: analyst, the long fields
SELECT extract(decade FROM checkin_date) AS de, extract(century FROM checkin_date) AS ce, extract(millennium FROM checkin_date) AS mi, count(*) FROM checkins GROUP BY 1, 2, 3;

-- id: holdtime.extract.timezone_fields
-- source: analyst, the session's offset over the year in Los Angeles
-- setup: SET TimeZone = 'America/Los_Angeles'
SELECT extract(timezone FROM checkin_date::timestamptz) AS tz, extract(timezone_hour FROM checkin_date::timestamptz) AS tzh, extract(timezone_minute FROM checkin_date::timestamptz) AS tzm, count(*) FROM checkins GROUP BY 1, 2, 3 ORDER BY 1;

-- id: holdtime.date_part.epoch
-- source: analyst, date_part epoch (double precision)
SELECT date_part('epoch', checkin_date) AS e, count(*) FROM checkins WHERE checkin_date >= '2010-10-28' GROUP BY 1 ORDER BY 1;

-- id: holdtime.date_part.dow_isodow
-- source: Power BI style date_part of days of week
SELECT date_part('dow', checkin_date) AS dow, date_part('isodow', checkin_date) AS isodow, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 1;

-- id: holdtime.date_part.doy_week
-- source: analyst, date_part doy and week
SELECT date_part('week', checkin_date) AS w, date_part('doy', date_trunc('week', checkin_date)) AS monday_doy, count(*) FROM checkins WHERE checkin_date < '2009-03-01' GROUP BY 1, 2 ORDER BY 1;

-- id: holdtime.extract.quarter_filter
-- source: analyst, fourth quarters by year
SELECT extract(year FROM checkin_date) AS y, count(*) FROM checkins WHERE extract(quarter FROM checkin_date) = 4 GROUP BY 1 ORDER BY 1;

-- id: holdtime.extract.hour_of_ts
-- source: analyst, hour extracted from a timestamp built of date and hour
SELECT extract(hour FROM checkin_date::timestamp + make_interval(hours => hour)) AS h, count(*) FROM checkins WHERE checkin_date = '2010-02-14' GROUP BY 1 ORDER BY 1;

-- id: holdtime.extract.second_ms
-- source: analyst, seconds fields of a timestamp
SELECT extract(second FROM checkin_date::timestamp) AS s, extract(milliseconds FROM checkin_date::timestamp) AS ms, date_part('microseconds', checkin_date::timestamp) AS us, count(*) FROM checkins GROUP BY 1, 2, 3;

-- id: holdtime.to_char.fm_th
-- source: analyst, ordinal days
SELECT to_char(checkin_date, 'FMDDth "of" FMMonth') AS d, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-05-01' AND '2010-05-05' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.quarter_label
-- source: analyst, YYYY"-Q"Q labels
SELECT to_char(checkin_date, 'YYYY"-Q"Q') AS q, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.ww
-- source: analyst, week of year (WW)
SELECT to_char(checkin_date, 'YYYY-WW') AS w, count(*) FROM checkins WHERE checkin_date >= '2010-09-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.iw_id
-- source: analyst, ISO week and ISO weekday
SELECT to_char(checkin_date, 'IYYY-IW-ID') AS iw, count(*) FROM checkins WHERE checkin_date BETWEEN '2009-12-26' AND '2010-01-06' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.julian
-- source: analyst, Julian day as text
SELECT to_char(checkin_date, 'J') AS j, count(*) FROM checkins WHERE checkin_date >= '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.month_padded
-- source: analyst, padded month names
SELECT to_char(checkin_date, 'Month YYYY') AS m, count(*) FROM checkins WHERE checkin_date < '2009-06-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.day_padded
-- source: analyst, padded day names
SELECT to_char(checkin_date, 'Day') AS d, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.hh24mi
-- source: analyst, time of day labels
SELECT to_char(checkin_date::timestamp + hour * interval '1 hour', 'HH24:MI') AS t, count(*) FROM checkins WHERE checkin_date = '2010-03-03' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.ddd_th
-- source: analyst, day of year with suffix
SELECT to_char(checkin_date, 'DDDTH') AS d, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-01-01' AND '2010-01-04' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.offset_kolkata
-- source: analyst, month starts with their offset
-- setup: SET TimeZone = 'Asia/Kolkata'
SELECT to_char(date_trunc('month', checkin_date), 'YYYY-MM-DD HH24:MI:SS OF') AS m, count(*) FROM checkins WHERE checkin_date < '2009-05-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.mon_yy_rm
-- source: analyst, MON-YY and roman months
SELECT to_char(checkin_date, 'MON-YY') AS m, to_char(checkin_date, 'RM') AS rm, count(*) FROM checkins WHERE checkin_date >= '2010-07-01' GROUP BY 1, 2 ORDER BY 2;

-- id: holdtime.to_char.hh12_am
-- source: analyst, 12-hour clock labels
SELECT to_char(checkin_date::timestamp + hour * interval '1 hour', 'HH12 AM') AS t, count(*) FROM checkins WHERE checkin_date = '2010-03-04' GROUP BY 1 ORDER BY 1;

-- id: holdtime.date_bin.week_origin
-- source: analyst, date_bin weeks from a Monday origin
SELECT date_bin('7 days', checkin_date::timestamp, TIMESTAMP '2001-01-01') AS w, count(*) FROM checkins WHERE checkin_date >= '2010-09-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.date_bin.tstz_la
-- source: analyst, date_bin of a timestamptz in Los Angeles
-- setup: SET TimeZone = 'America/Los_Angeles'
SELECT date_bin('1 day', checkin_date::timestamptz, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS d, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-03-12' AND '2010-03-16' GROUP BY 1 ORDER BY 1;

-- id: holdtime.make_timestamp.month
-- source: analyst, make_timestamp of year and month
SELECT make_timestamp(extract(year FROM checkin_date)::int, extract(month FROM checkin_date)::int, 1, 0, 0, 0) AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.make_timestamptz.filter
-- source: analyst, a New York year start as a bound
SELECT count(*) FROM checkins WHERE checkin_date >= make_timestamptz(2010, 1, 1, 0, 0, 0, 'America/New_York');

-- id: holdtime.age.years_months
-- source: analyst, age of a check-in at the end of the data
SELECT extract(month FROM age(DATE '2010-10-31', checkin_date)) AS months_ago, count(*) FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.age.timestamp
-- source: analyst, age between timestamps, in days
SELECT extract(day FROM age(TIMESTAMP '2010-10-31 00:00', checkin_date::timestamp)) AS d, count(*) FROM checkins WHERE checkin_date >= '2010-10-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.justify.days
-- source: analyst, days since start justified into months
SELECT extract(month FROM justify_days((checkin_date - DATE '2010-01-01') * interval '1 day')) AS m, count(*) FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.justify.hours_interval
-- source: analyst, hours justified into days
SELECT extract(day FROM justify_hours(hour * interval '3 hours')) AS d, extract(day FROM justify_interval(interval '1 mon' - hour * interval '1 day')) AS j, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdtime.arith.last_week
-- source: analyst, date - date in a filter
SELECT checkin_date, count(*) FROM checkins WHERE DATE '2010-10-31' - checkin_date < 7 GROUP BY 1 ORDER BY 1;

-- id: holdtime.arith.ts_minus_interval
-- source: analyst, timestamp minus interval bound
SELECT count(*) FROM checkins WHERE checkin_date >= TIMESTAMP '2010-10-31 00:00' - INTERVAL '2 weeks';

-- id: holdtime.arith.interval_times_n
-- source: analyst, the first three months
SELECT count(*) FROM checkins WHERE checkin_date < DATE '2009-02-01' + INTERVAL '1 month' * 3;

-- id: holdtime.arith.plus_month_cast
-- source: analyst, dates shifted by a month
SELECT (checkin_date + INTERVAL '1 month')::date AS next_month, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-01-29' AND '2010-02-02' GROUP BY 1 ORDER BY 1;

-- id: holdtime.arith.year_ago
-- source: analyst, a year before the last day
SELECT count(*) FROM checkins WHERE checkin_date > DATE '2010-10-31' - INTERVAL '1 year';

-- id: holdtime.arith.minus_days
-- source: analyst, a week earlier
SELECT checkin_date - 7 AS week_before, count(*) FROM checkins WHERE checkin_date >= '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.arith.month_end
-- source: analyst, last day of each month
SELECT (date_trunc('month', checkin_date) + interval '1 month - 1 day')::date AS month_end, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.arith.quarter_end
-- source: analyst, quarter end as a timestamp
SELECT date_trunc('quarter', checkin_date::timestamp) + interval '3 months' - interval '1 day' AS q_end, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.arith.epoch_of_interval
-- source: analyst, seconds in a day
SELECT extract(epoch FROM (checkin_date + 1)::timestamp - checkin_date::timestamp) AS secs, count(*) FROM checkins GROUP BY 1;

-- id: holdtime.cmp.tstz_z_kolkata
-- source: analyst, a typed timestamptz literal with Z in Kolkata
-- setup: SET TimeZone = 'Asia/Kolkata'
SELECT count(*) FROM checkins WHERE checkin_date >= TIMESTAMPTZ '2010-03-01T00:00:00Z' AND checkin_date < TIMESTAMPTZ '2010-04-01T00:00:00Z';

-- id: holdtime.cmp.offset_plus2
-- source: analyst, a timestamptz with an offset, session in UTC
-- setup: SET TimeZone = 'UTC'
SELECT count(*) FROM checkins WHERE checkin_date < '2010-03-01 00:00:00+02'::timestamptz AND checkin_date >= '2010-02-20 00:00:00+02'::timestamptz;

-- id: holdtime.cmp.untyped_offset
-- source: analyst, an untyped literal with an offset compared with a date
SELECT count(*) FROM checkins WHERE checkin_date >= '2010-03-01 00:00:00+02' AND checkin_date <= '2010-03-31 23:00:00-05';

-- id: holdtime.cmp.epoch_word
-- source: analyst, everything after the epoch
SELECT count(*) FROM checkins WHERE checkin_date > 'epoch';

-- id: holdtime.cmp.infinity
-- source: analyst, open-ended bound
SELECT count(*) FROM checkins WHERE checkin_date < 'infinity' AND checkin_date > '-infinity'::date;

-- id: holdtime.cmp.infinity_between
-- source: analyst, an open lower bound in BETWEEN, typed
SELECT extract(year FROM checkin_date) AS y, count(*) FROM checkins WHERE checkin_date BETWEEN DATE '-infinity' AND '2009-12-31' GROUP BY 1;

-- id: holdtime.cmp.infinity_select
-- source: analyst, the special value itself as a result
-- expect: refused 0A000 'infinity' is evaluated only compared with a date or timestamp, not as a value
SELECT 'infinity'::date AS until, count(*) FROM checkins GROUP BY 1;

-- id: holdtime.between_symmetric
-- source: analyst, BETWEEN SYMMETRIC with bounds reversed
SELECT count(*) FROM checkins WHERE checkin_date BETWEEN SYMMETRIC '2010-06-30' AND '2010-06-01';

-- id: holdtime.cast.timestamp0
-- source: analyst, timestamp(0)
SELECT checkin_date::timestamp(0) AS t, count(*) FROM checkins WHERE checkin_date > '2010-10-27' GROUP BY 1 ORDER BY 1;

-- id: holdtime.cast.timestamptz3_setup
-- source: analyst, timestamptz(3) in London
-- setup: SET TimeZone = 'Europe/London'
SELECT CAST(checkin_date AS timestamp(3) with time zone) AS t, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-03-26' AND '2010-03-30' GROUP BY 1 ORDER BY 1;

-- id: holdtime.having.trunc
-- source: analyst, HAVING and ORDER BY on the month
SELECT date_trunc('month', checkin_date) AS m, count(*) FROM checkins GROUP BY 1 HAVING date_trunc('month', checkin_date) >= '2010-06-01' ORDER BY date_trunc('month', checkin_date) DESC;

-- id: holdtime.window.running_by_month
-- source: analyst, running total over months
SELECT date_trunc('month', checkin_date)::date AS m, count(*) AS n, sum(count(*)) OVER (ORDER BY date_trunc('month', checkin_date)) AS running FROM checkins GROUP BY date_trunc('month', checkin_date) ORDER BY 1;

-- id: holdtime.grafana.timegroup_hour
-- source: Grafana $__timeGroupAlias(ts, 1h) over a timestamp built of date and hour
SELECT floor(extract(epoch from checkin_date::timestamp + hour * interval '1 hour')/3600)*3600 AS "time", count(*) AS "value" FROM checkins WHERE checkin_date BETWEEN '2010-04-01T00:00:00Z' AND '2010-04-02T00:00:00Z' GROUP BY 1 ORDER BY 1;

-- id: holdtime.grafana.unixepochgroup
-- source: Grafana $__unixEpochGroupAlias(epoch, 1d)
SELECT floor(extract(epoch from checkin_date)::bigint/86400)*86400 AS "time", count(*) AS "value" FROM checkins WHERE extract(epoch from checkin_date) >= 1285891200 AND extract(epoch from checkin_date) <= 1286496000 GROUP BY 1 ORDER BY 1;

-- id: holdtime.grafana.timegroup_interval
-- source: Grafana $__timeGroup(checkin_date, '7d') with a metric column
SELECT floor(extract(epoch from checkin_date)/604800)*604800 AS "time", CASE WHEN lat >= 0 THEN 'north' ELSE 'south' END AS metric, count(*) AS "value" FROM checkins WHERE checkin_date >= to_timestamp(1283299200) AND checkin_date <= to_timestamp(1285891200) GROUP BY 1, 2 ORDER BY 1, 2;

-- id: holdtime.superset.week_utc
-- source: Superset time grain P1W with a UTC conversion, session in Los Angeles
-- setup: SET TimeZone = 'America/Los_Angeles'
SELECT DATE_TRUNC('week', checkin_date AT TIME ZONE 'UTC') AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= '2010-08-01' GROUP BY DATE_TRUNC('week', checkin_date AT TIME ZONE 'UTC') ORDER BY 1 LIMIT 10000;

-- id: holdtime.superset.week_sunday
-- source: Superset time grain "week starting Sunday"
SELECT DATE_TRUNC('week', checkin_date + INTERVAL '1 day') - INTERVAL '1 day' AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= '2010-09-01' GROUP BY DATE_TRUNC('week', checkin_date + INTERVAL '1 day') - INTERVAL '1 day' ORDER BY count DESC LIMIT 10000;

-- id: holdtime.superset.week_ending_saturday
-- source: Superset time grain "week ending Saturday"
SELECT DATE_TRUNC('week', checkin_date + INTERVAL '1 day') + INTERVAL '5 days' AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= '2010-09-01' GROUP BY DATE_TRUNC('week', checkin_date + INTERVAL '1 day') + INTERVAL '5 days' LIMIT 10000;

-- id: holdtime.superset.hour_grain
-- source: Superset time grain PT1H over an hourly timestamp
SELECT DATE_TRUNC('hour', checkin_date + make_interval(hours => hour)) AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date = '2010-06-06' GROUP BY DATE_TRUNC('hour', checkin_date + make_interval(hours => hour)) LIMIT 10000;

-- id: holdtime.metabase.sunday_week_plain
-- source: Metabase, week starting Sunday without casts
SELECT date_trunc('week', checkin_date + INTERVAL '1 day') - INTERVAL '1 day' AS "checkin_date", count(*) AS "count" FROM "public"."checkins" WHERE checkin_date >= '2010-10-01' GROUP BY 1 ORDER BY 1 ASC;

-- id: holdtime.metabase.week_of_year
-- source: Metabase, checkin_date: Week of year
SELECT CAST(ceil((CAST(extract(doy from CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp)) AS integer) / 7.0)) AS integer) AS "checkin_date", count(*) AS "count" FROM "public"."checkins" GROUP BY 1 ORDER BY 1 ASC;

-- id: holdtime.metabase.cast_timestamp_filter
-- source: Metabase, filter on CAST(... AS timestamp) between timestamps
SELECT count(*) AS "count" FROM "public"."checkins" WHERE CAST("public"."checkins"."checkin_date" AS timestamp) >= timestamp '2010-05-01 00:00:00.000' AND CAST("public"."checkins"."checkin_date" AS timestamp) < timestamp '2010-05-08 00:00:00.000';

-- id: holdtime.metabase.day_of_month
-- source: Metabase, checkin_date: Day of month
SELECT CAST(extract(day from "public"."checkins"."checkin_date") AS integer) AS "checkin_date", count(*) AS "count" FROM "public"."checkins" GROUP BY 1 ORDER BY 1 ASC;

-- id: holdtime.metabase.report_tz
-- source: Metabase with report timezone, month
SELECT CAST(date_trunc('month', ("public"."checkins"."checkin_date" AT TIME ZONE 'America/Los_Angeles')) AS date) AS "checkin_date", count(*) AS "count" FROM "public"."checkins" GROUP BY 1 ORDER BY 1 ASC;

-- id: holdtime.looker.week
-- source: Looker dimension_group, timeframe week
SELECT TO_CHAR(DATE_TRUNC('week', checkins.checkin_date ), 'YYYY-MM-DD') AS "checkins.checkin_week", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins WHERE checkins.checkin_date >= DATE '2010-08-01' GROUP BY DATE_TRUNC('week', checkins.checkin_date ) ORDER BY 1 DESC FETCH NEXT 500 ROWS ONLY;

-- id: holdtime.looker.month_name
-- source: Looker dimension_group, timeframe month_name
SELECT TO_CHAR(checkins.checkin_date , 'FMMonth') AS "checkins.checkin_month_name", EXTRACT(MONTH FROM checkins.checkin_date )::integer AS "checkins.checkin_month_num", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1, 2 ORDER BY 2 FETCH NEXT 500 ROWS ONLY;

-- id: holdtime.looker.quarter_of_year
-- source: Looker dimension_group, timeframe quarter_of_year
SELECT ('Q' || CAST(EXTRACT(QUARTER FROM checkins.checkin_date ) AS VARCHAR)) AS "checkins.checkin_quarter_of_year", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1 ORDER BY 1 FETCH NEXT 500 ROWS ONLY;

-- id: holdtime.looker.tz_convert
-- source: Looker with query time zone conversion
SELECT TO_CHAR(DATE_TRUNC('month', (checkins.checkin_date AT TIME ZONE 'UTC' AT TIME ZONE 'America/New_York')), 'YYYY-MM') AS "checkins.checkin_month", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1 ORDER BY 1 FETCH NEXT 500 ROWS ONLY;

-- id: holdtime.looker.year_int
-- source: Looker dimension_group, timeframe year
SELECT EXTRACT(YEAR FROM checkins.checkin_date )::integer AS "checkins.checkin_year", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1 ORDER BY 1 DESC FETCH NEXT 500 ROWS ONLY;

-- id: holdtime.tableau.quarter
-- source: Tableau QUARTER(checkin_date) exact date
SELECT CAST(DATE_TRUNC('QUARTER', CAST("checkins"."checkin_date" AS DATE)) AS DATE) AS "tqr:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: holdtime.tableau.epoch
-- source: Tableau DATEDIFF in seconds from the epoch
SELECT EXTRACT(EPOCH FROM CAST("checkins"."checkin_date" AS TIMESTAMP)) AS "epoch:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" WHERE ("checkins"."checkin_date" >= (DATE '2010-10-20')) GROUP BY 1;

-- id: holdtime.tableau.week_number
-- source: Tableau DATEPART('week', checkin_date)
SELECT CAST(FLOOR((7 + EXTRACT(DOY FROM "checkins"."checkin_date") - 1 + EXTRACT(DOW FROM DATE_TRUNC('YEAR', "checkins"."checkin_date"))) / 7) AS BIGINT) AS "wk:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" WHERE "checkins"."checkin_date" < DATE '2009-04-01' GROUP BY 1;

-- id: holdtime.tableau.datediff_days
-- source: Tableau DATEDIFF('day', #2009-02-01#, checkin_date) binned by 50
SELECT CAST(FLOOR((CAST("checkins"."checkin_date" AS DATE) - CAST(DATE '2009-02-01' AS DATE)) / 50) AS BIGINT) AS "dd:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: holdtime.tableau.date_range_filter
-- source: Tableau relative range filter with <=
SELECT COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" WHERE (("checkins"."checkin_date" >= (DATE '2010-01-01')) AND ("checkins"."checkin_date" <= (DATE '2010-03-31')));

-- id: holdtime.at_time_zone.kolkata_hour
-- source: analyst, a date at Kolkata's time, by hour
SELECT date_trunc('hour', checkin_date::timestamptz AT TIME ZONE 'Asia/Kolkata') AS h, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-06-01' AND '2010-06-03' GROUP BY 1 ORDER BY 1;

-- id: holdtime.at_time_zone.offset
-- source: analyst, AT TIME ZONE with an offset
SELECT checkin_date::timestamp AT TIME ZONE '+05:30' AS t, count(*) FROM checkins WHERE checkin_date >= '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.at_time_zone.interval
-- source: analyst, AT TIME ZONE with an interval
SELECT checkin_date::timestamptz AT TIME ZONE INTERVAL '05:30' AS t, count(*) FROM checkins WHERE checkin_date >= '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.setup.posix_offset
-- source: analyst whose session is SET TimeZone = '+05:30'
-- setup: SET TimeZone = '+05:30'
SELECT date_trunc('month', checkin_date) AS m, count(*) FROM checkins WHERE checkin_date < '2009-05-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.setup.set_time_zone
-- source: analyst, SET TIME ZONE syntax
-- setup: SET TIME ZONE 'Australia/Sydney'
SELECT checkin_date::timestamptz AS t, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-04-02' AND '2010-04-05' GROUP BY 1 ORDER BY 1;

-- id: holdtime.setup.datestyle
-- source: JDBC/psql session setting DateStyle ISO, MDY
-- setup: SET DateStyle = 'ISO, MDY'
SELECT checkin_date, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-03-01' AND '2010-03-03' GROUP BY 1 ORDER BY 1;

-- id: holdtime.isfinite
-- source: analyst, isfinite guard
SELECT count(*) FROM checkins WHERE isfinite(checkin_date) AND extract(dow FROM checkin_date) IN (0, 6);

-- id: holdtime.to_timestamp.epoch_kolkata
-- source: analyst, to_timestamp of an epoch in Kolkata
-- setup: SET TimeZone = 'Asia/Kolkata'
SELECT to_timestamp(extract(epoch FROM checkin_date)) AS t, count(*) FROM checkins WHERE checkin_date < '2009-02-04' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_date.roundtrip
-- source: analyst, first of month via to_date
SELECT to_date(to_char(checkin_date, 'YYYYMM') || '01', 'YYYYMMDD') AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.summer
-- source: analyst, summer months
SELECT extract(year FROM checkin_date)::int AS y, count(*) FROM checkins WHERE extract(month FROM checkin_date)::int BETWEEN 6 AND 8 GROUP BY 1 ORDER BY 1;

-- id: holdtime.clock.now
-- source: analyst, the last 30 days by the clock
-- expect: refused 0A000 the clock: an answer must not change with the day it is asked; write the date
SELECT count(*) FROM checkins WHERE checkin_date > now() - interval '30 days';

-- id: holdtime.clock.age_one_arg
-- source: analyst, age() of one argument (against today)
-- expect: refused 0A000 age(x) reads the clock; age(DATE '2010-10-31', x) is answered
SELECT extract(year FROM age(checkin_date)) AS y, count(*) FROM checkins GROUP BY 1;

-- id: holdtime.superset.epoch_s
-- source: Superset epoch_s column expression (timestamp 'epoch' + col * interval '1 second')
SELECT DATE_TRUNC('month', (timestamp 'epoch' + extract(epoch FROM checkin_date) * interval '1 second')) AS __timestamp, COUNT(*) AS count FROM public.checkins GROUP BY 1 ORDER BY 1 LIMIT 10000;

-- id: holdtime.superset.minute_grain_range
-- source: Superset grain PT1M with a time range in TO_TIMESTAMP
SELECT DATE_TRUNC('minute', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= TO_TIMESTAMP('2010-10-20 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND checkin_date < TO_TIMESTAMP('2010-10-23 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') GROUP BY DATE_TRUNC('minute', checkin_date) LIMIT 10000;

-- id: holdtime.grafana.time_epoch
-- source: Grafana $__timeEpoch(checkin_date)
SELECT extract(epoch from checkin_date) AS "time", count(*) AS "value" FROM checkins WHERE checkin_date BETWEEN '2010-10-24T00:00:00.000Z' AND '2010-10-31T23:59:59.999Z' GROUP BY 1 ORDER BY 1;

-- id: holdtime.grafana.month_ms
-- source: Grafana, month buckets in epoch milliseconds as bigint
SELECT (extract(epoch FROM date_trunc('month', checkin_date::timestamp)) * 1000)::bigint AS "time", count(*) AS "value" FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.dbt.datediff_month
-- source: dbt datediff('2009-02-01', checkin_date, 'month')
SELECT ((date_part('year', (checkin_date)::date) - date_part('year', ('2009-02-01')::date)) * 12 + date_part('month', (checkin_date)::date) - date_part('month', ('2009-02-01')::date)) AS months_since, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.dbt.dateadd
-- source: dbt dateadd('month', 3, '2010-01-01') as a bound
SELECT count(*) FROM checkins WHERE checkin_date >= DATE '2010-01-01' AND checkin_date < DATE '2010-01-01' + ((interval '1 month') * (3));

-- id: holdtime.dbt.last_day
-- source: dbt last_day(checkin_date, 'month')
SELECT cast(date_trunc('month', checkin_date) + ((interval '1 month') * (1)) + ((interval '1 day') * (-1)) as date) AS last_day, count(*) FROM checkins WHERE checkin_date >= '2010-06-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.ibis.isodow_index
-- source: ibis day_of_week.index()
SELECT CAST(EXTRACT(isodow FROM t0.checkin_date) AS SMALLINT) - 1 AS "DayOfWeekIndex", count(*) AS "CountStar" FROM checkins AS t0 GROUP BY 1 ORDER BY 1;

-- id: holdtime.ibis.truncate_week
-- source: ibis truncate('W')
SELECT DATE_TRUNC('WEEK', t0.checkin_date) AS "TimestampTruncate", count(*) AS "CountStar" FROM checkins AS t0 WHERE t0.checkin_date >= DATE '2010-10-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.sqlalchemy.extract_year_month
-- source: SQLAlchemy extract('year'), extract('month')
SELECT EXTRACT(year FROM checkins.checkin_date) AS anon_1, EXTRACT(month FROM checkins.checkin_date) AS anon_2, count(*) AS count_1 FROM checkins GROUP BY EXTRACT(year FROM checkins.checkin_date), EXTRACT(month FROM checkins.checkin_date) ORDER BY anon_1, anon_2;

-- id: holdtime.tableau.add_days
-- source: Tableau DATEADD('day', 1, checkin_date)
SELECT (CAST("checkins"."checkin_date" AS DATE) + CAST((1) || ' DAY' AS INTERVAL)) AS "dd:next:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" WHERE "checkins"."checkin_date" >= DATE '2010-10-25' GROUP BY 1;

-- id: holdtime.tableau.ts_without_tz
-- source: Tableau DATETRUNC('month') over a CAST AS TIMESTAMP WITHOUT TIME ZONE
SELECT DATE_TRUNC('MONTH', CAST("checkins"."checkin_date" AS TIMESTAMP WITHOUT TIME ZONE)) AS "tmn:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- id: holdtime.to_char.iso8601
-- source: analyst, ISO 8601 text with T and Z
SELECT to_char(checkin_date::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS iso, count(*) FROM checkins WHERE checkin_date >= '2010-10-28' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.rfc
-- source: analyst, RFC-style labels
SELECT to_char(checkin_date, 'Dy, DD Mon YYYY') AS d, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-02-26' AND '2010-03-02' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_char.w_cc_iddd
-- source: analyst, week of month, century, ISO day of year
SELECT to_char(checkin_date, 'W') AS wom, to_char(checkin_date, 'CC') AS cc, to_char(checkin_date, 'IDDD') AS iddd, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-01-01' AND '2010-01-10' GROUP BY 1, 2, 3 ORDER BY 3;

-- id: holdtime.to_char.tm_lower
-- source: analyst, TM and lower-case names
SELECT to_char(checkin_date, 'TMmonth') AS m, to_char(checkin_date, 'dy') AS d, count(*) FROM checkins WHERE checkin_date >= '2010-10-26' GROUP BY 1, 2 ORDER BY 2;

-- id: holdtime.to_char.fm_hh12
-- source: analyst, FMHH12:MI AM over hours
SELECT to_char(checkin_date + make_interval(hours => hour, mins => 30), 'FMHH12:MI AM') AS t, count(*) FROM checkins WHERE checkin_date = '2010-08-08' GROUP BY 1 ORDER BY 1;

-- id: holdtime.text.like_month
-- source: analyst, a date as text with LIKE
SELECT count(*) FROM checkins WHERE checkin_date::text LIKE '2010-03%';

-- id: holdtime.in_list
-- source: analyst, IN a list of dates
SELECT checkin_date, count(*) FROM checkins WHERE checkin_date IN ('2010-01-01', '2010-02-14', DATE '2010-12-25') GROUP BY 1 ORDER BY 1;

-- id: holdtime.trunc.equal_trunc
-- source: analyst, same month as a given day
SELECT count(*) FROM checkins WHERE date_trunc('month', checkin_date) = date_trunc('month', DATE '2010-03-15');

-- id: holdtime.extract.interval_epoch
-- source: analyst, a week in seconds as a divisor
SELECT floor(extract(epoch FROM checkin_date::timestamp - TIMESTAMP '2009-02-01') / extract(epoch FROM interval '1 week')) AS week_no, count(*) FROM checkins WHERE checkin_date < '2009-04-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.epoch_int
-- source: analyst, epoch as integer
SELECT EXTRACT(EPOCH FROM checkin_date)::integer AS e, count(*) FROM checkins WHERE checkin_date > '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_timestamp.date_cast
-- source: analyst, to_timestamp back to a date
SELECT to_timestamp(extract(epoch FROM date_trunc('week', checkin_date::timestamp)))::date AS w, count(*) FROM checkins WHERE checkin_date >= '2010-10-01' GROUP BY 1 ORDER BY 1;

-- id: holdtime.setup.utc_at_tz
-- source: analyst, session in UTC, a date read in Sao Paulo
-- setup: SET TimeZone = 'UTC'
SELECT (checkin_date::timestamptz AT TIME ZONE 'America/Sao_Paulo')::date AS local_day, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-10-15' AND '2010-10-18' GROUP BY 1 ORDER BY 1;

-- id: holdtime.setup.posix_minus
-- source: session SET TimeZone = '-3' (POSIX)
-- setup: SET TimeZone = '-3'
SELECT to_char(checkin_date::timestamptz, 'YYYY-MM-DD HH24:MI TZ OF') AS t, count(*) FROM checkins WHERE checkin_date > '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.overlaps
-- source: analyst, OVERLAPS of a day with a period
SELECT count(*) FROM checkins WHERE (checkin_date::timestamp, interval '1 day') OVERLAPS (TIMESTAMP '2010-05-01', TIMESTAMP '2010-05-08');

-- id: holdtime.date_plus_time
-- source: analyst, date + time of day
-- expect: refused 0A000 the type time (of day) is not evaluated; d + INTERVAL '12 hours' is answered
SELECT checkin_date + time '12:00' AS noon, count(*) FROM checkins WHERE checkin_date > '2010-10-29' GROUP BY 1 ORDER BY 1;

-- id: holdtime.window.lag_month
-- source: analyst, month over month change
SELECT date_trunc('month', checkin_date)::date AS m, count(*) - lag(count(*)) OVER (ORDER BY date_trunc('month', checkin_date)) AS delta FROM checkins GROUP BY date_trunc('month', checkin_date) ORDER BY 1;

-- id: holdtime.case_season
-- source: analyst, seasons from the month
SELECT CASE WHEN extract(month FROM checkin_date) IN (12, 1, 2) THEN 'winter' WHEN extract(month FROM checkin_date) IN (3, 4, 5) THEN 'spring' WHEN extract(month FROM checkin_date) IN (6, 7, 8) THEN 'summer' ELSE 'autumn' END AS season, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: holdtime.to_timestamp.text_tz
-- source: analyst, to_timestamp of a text with an offset template
SELECT count(*) FROM checkins WHERE checkin_date >= to_timestamp('2010-06-01 00:00 +02', 'YYYY-MM-DD HH24:MI TZH');

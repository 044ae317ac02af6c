-- Time series over the check-ins (sql_fixtures/gowalla, declared by day), as BI tools and
-- analysts write them: `-- schema: checkins` (the Gowalla declaration, every row its own unit,
-- so the exact answer is PostgreSQL's), `-- timezone:` the session's TimeZone (also set on the
-- backend's session). Every case is executed on PostgreSQL and diffed (rewriter.pgtime).

-- title: Superset P1D grain, date_trunc of a date is a timestamp with time zone
-- expect: dp view=(checkin_date) queries=31 columns=__timestamp:1184,count:20
-- schema: checkins
SELECT DATE_TRUNC('day', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= TO_DATE('2010-03-01', 'YYYY-MM-DD') AND checkin_date < TO_DATE('2010-04-01', 'YYYY-MM-DD') GROUP BY DATE_TRUNC('day', checkin_date) LIMIT 50000;

-- title: Superset P1W grain
-- expect: dp view=(checkin_date) queries=92 columns=__timestamp:1184,count:20
-- schema: checkins
SELECT DATE_TRUNC('week', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('week', checkin_date) LIMIT 50000;

-- title: Superset P1M grain in New York
-- expect: dp view=(checkin_date) queries=21 columns=__timestamp:1184,count:20
-- schema: checkins
-- timezone: America/New_York
SELECT DATE_TRUNC('month', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('month', checkin_date) ORDER BY count DESC LIMIT 10000;

-- title: Superset P3M and P1Y grains
-- expect: dp view=(checkin_date) queries=8 columns=q:1184,y:1184,count:20
-- schema: checkins
SELECT DATE_TRUNC('quarter', checkin_date) AS q, DATE_TRUNC('year', checkin_date) AS y, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('quarter', checkin_date), DATE_TRUNC('year', checkin_date) LIMIT 50000;

-- title: Superset PT1H grain over the date and the hour, TO_TIMESTAMP bounds
-- expect: dp view=(checkin_date, hour) queries=48 columns=__timestamp:1114,count:20
-- schema: checkins
SELECT DATE_TRUNC('hour', checkin_date + hour * INTERVAL '1 hour') AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= TO_TIMESTAMP('2010-05-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND checkin_date < TO_TIMESTAMP('2010-05-03 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') GROUP BY DATE_TRUNC('hour', checkin_date + hour * INTERVAL '1 hour') LIMIT 50000;

-- title: Superset week ending Saturday (P1W/1970-01-03T00:00:00Z)
-- expect: dp view=(checkin_date) queries=45 columns=__timestamp:1114,count:20
-- schema: checkins
SELECT DATE_TRUNC('week', checkin_date + INTERVAL '1 day') + INTERVAL '5 days' AS __timestamp, COUNT(*) AS count FROM public.checkins WHERE checkin_date >= '2010-01-01' GROUP BY DATE_TRUNC('week', checkin_date + INTERVAL '1 day') + INTERVAL '5 days' LIMIT 50000;

-- title: Grafana timeGroupAlias 1d with timeFilter (ISO timestamps compared with a date)
-- expect: dp view=(checkin_date) queries=31 columns=time:1700,checkins:20
-- schema: checkins
SELECT floor(extract(epoch from checkin_date)/86400)*86400 AS "time", count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '2010-03-01T00:00:00Z' AND '2010-03-31T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- title: Grafana timeGroupAlias 1w
-- expect: dp view=(checkin_date) queries=75 columns=time:1700,value:20
-- schema: checkins
SELECT floor(extract(epoch from checkin_date)/604800)*604800 AS "time", count(*) AS "value" FROM checkins WHERE checkin_date BETWEEN '2009-06-01T00:00:00Z' AND '2010-10-31T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- title: Grafana timeGroupAlias 1h over the date and the hour
-- expect: dp view=(checkin_date, hour) queries=48 columns=time:1700,checkins:20
-- schema: checkins
SELECT floor(extract(epoch from checkin_date + hour * interval '1 hour')/3600)*3600 AS "time", count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '2010-10-01T00:00:00Z' AND '2010-10-02T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- title: Grafana builder, date_trunc as time, quoted column
-- expect: dp view=(checkin_date) queries=30 columns=time:1184,count:20
-- schema: checkins
SELECT date_trunc('day', "checkin_date") AS "time", count(*) AS "count" FROM checkins WHERE "checkin_date" BETWEEN '2010-09-01T00:00:00Z' AND '2010-09-30T23:59:59Z' GROUP BY 1 ORDER BY 1;

-- title: Grafana timeEpoch and to_timestamp of an epoch bucket, in Tokyo
-- expect: dp view=(checkin_date) queries=51 columns=time:1184,month_epoch:1700,count:20
-- schema: checkins
-- timezone: Asia/Tokyo
SELECT to_timestamp(floor(extract(epoch from checkin_date)/604800)*604800) AS "time", extract(epoch from date_trunc('month', checkin_date)) AS month_epoch, count(*) FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY 1, 2 ORDER BY 1;

-- title: Grafana unixEpochFilter bounds on extract(epoch)
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
SELECT count(*) FROM checkins WHERE extract(epoch from checkin_date) >= 1262304000 AND extract(epoch from checkin_date) < 1264982400;

-- title: Metabase week starting Sunday
-- expect: dp view=(checkin_date) queries=92 columns=checkin_date:1114,count:20
-- schema: checkins
SELECT (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') ORDER BY (CAST(date_trunc('week', CAST(("public"."checkins"."checkin_date" + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day') ASC;

-- title: Metabase month of a date
-- expect: dp view=(checkin_date) queries=21 columns=checkin_date:1082,count:20
-- schema: checkins
SELECT CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) ORDER BY CAST(date_trunc('month', "public"."checkins"."checkin_date") AS date) ASC;

-- title: Metabase day of week
-- expect: dp view=(checkin_date) queries=7 columns=checkin_date:23,count:20
-- schema: checkins
SELECT (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) AS "checkin_date", COUNT(*) AS "count" FROM "public"."checkins" GROUP BY (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) ORDER BY (CAST(extract(dow from "public"."checkins"."checkin_date") AS integer) + 1) ASC;

-- title: Metabase hour of day with a timestamptz range filter
-- expect: dp view=(checkin_date, hour) queries=24 columns=hour:23,count:20
-- schema: checkins
SELECT "public"."checkins"."hour" AS "hour", COUNT(*) AS "count" FROM "public"."checkins" WHERE ("public"."checkins"."checkin_date" >= timestamp with time zone '2010-05-01 00:00:00.000Z') AND ("public"."checkins"."checkin_date" < timestamp with time zone '2010-06-01 00:00:00.000Z') GROUP BY "public"."checkins"."hour" ORDER BY "public"."checkins"."hour" ASC;

-- title: Metabase timestamptz range filter in Los Angeles
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
-- timezone: America/Los_Angeles
SELECT COUNT(*) AS "count" FROM "public"."checkins" WHERE ("public"."checkins"."checkin_date" >= timestamp with time zone '2010-05-01 00:00:00.000Z') AND ("public"."checkins"."checkin_date" < timestamp with time zone '2010-06-01 00:00:00.000Z');

-- title: Tableau MONTH of a cast to date
-- expect: dp view=(checkin_date) queries=21 columns=tmn:checkin_date:ok:1082,sum:Calculation_1:ok:20
-- schema: checkins
SELECT CAST(DATE_TRUNC('MONTH', CAST("checkins"."checkin_date" AS DATE)) AS DATE) AS "tmn:checkin_date:ok", SUM(1) AS "sum:Calculation_1:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- title: Tableau YEAR as bigint
-- expect: dp view=(checkin_date) queries=2 columns=yr:checkin_date:ok:20,cnt:checkins:ok:20
-- schema: checkins
SELECT CAST(EXTRACT(YEAR FROM "checkins"."checkin_date") AS BIGINT) AS "yr:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" "checkins" GROUP BY 1;

-- title: Tableau WEEKDAY and QUARTER
-- expect: dp view=(checkin_date) queries=28 columns=wd:checkin_date:ok:20,qr:checkin_date:ok:20,sum:Calculation_1:ok:20
-- schema: checkins
SELECT (CAST(EXTRACT(DOW FROM "checkins"."checkin_date") AS BIGINT) + 1) AS "wd:checkin_date:ok", CAST(EXTRACT(QUARTER FROM "checkins"."checkin_date") AS BIGINT) AS "qr:checkin_date:ok", SUM(1) AS "sum:Calculation_1:ok" FROM "public"."checkins" "checkins" GROUP BY 1, 2;

-- title: Looker month as text
-- expect: dp view=(checkin_date) queries=21 columns=checkins.checkin_month:25,checkins.count:20
-- schema: checkins
SELECT TO_CHAR(DATE_TRUNC('month', checkins.checkin_date ), 'YYYY-MM') AS "checkins.checkin_month", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY DATE_TRUNC('month', checkins.checkin_date ) ORDER BY 1 DESC LIMIT 500;

-- title: Looker date with an interval built from text
-- expect: dp view=(checkin_date) queries=30 columns=checkins.checkin_date:1082,checkins.count:20
-- schema: checkins
SELECT (DATE(checkins.checkin_date )) AS "checkins.checkin_date", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins WHERE ((( checkins.checkin_date ) >= ((DATE '2010-09-01')) AND ( checkins.checkin_date ) < ((DATE '2010-09-01' + (30 || ' day')::INTERVAL)))) GROUP BY 1 ORDER BY 1 DESC LIMIT 500;

-- title: Looker day of week name and index
-- expect: dp view=(checkin_date) queries=7 columns=checkins.checkin_day_of_week:25,checkins.checkin_day_of_week_index:23,checkins.count:20
-- schema: checkins
SELECT TO_CHAR(checkins.checkin_date , 'FMDay') AS "checkins.checkin_day_of_week", EXTRACT(DOW FROM checkins.checkin_date )::integer AS "checkins.checkin_day_of_week_index", COUNT(*) AS "checkins.count" FROM public.checkins AS checkins GROUP BY 1, 2 ORDER BY 2 LIMIT 500;

-- title: Looker week as text and ISO week
-- expect: dp view=(checkin_date) queries=44 columns=checkins.checkin_week:25,iso:25,checkins.count:20
-- schema: checkins
SELECT TO_CHAR(DATE_TRUNC('week', checkins.checkin_date ), 'YYYY-MM-DD') AS "checkins.checkin_week", TO_CHAR(checkins.checkin_date, 'IYYY-IW') AS iso, COUNT(*) AS "checkins.count" FROM public.checkins AS checkins WHERE checkins.checkin_date >= '2010-01-01' GROUP BY 1, 2 ORDER BY 1 LIMIT 500;

-- title: Power BI date_part year and month (double precision)
-- expect: dp view=(checkin_date) queries=21 columns=c1:701,c2:701,a0:20
-- schema: checkins
select "_"."c1", "_"."c2", "_"."a0" from (select date_part('year', "rows"."checkin_date") as "c1", date_part('month', "rows"."checkin_date") as "c2", count(1) as "a0" from "public"."checkins" "rows" group by date_part('year', "rows"."checkin_date"), date_part('month', "rows"."checkin_date")) "_" where not "_"."a0" is null limit 1000001;

-- title: analyst, year as bigint grouped
-- expect: dp view=(checkin_date) queries=2 columns=y:20,count:20
-- schema: checkins
SELECT CAST(EXTRACT(YEAR FROM checkin_date) AS BIGINT) AS y, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- title: analyst, every extract field of a date
-- expect: dp view=(checkin_date) queries=365 columns=q:1700,w:1700,iy:1700,d7:1700,dec:1700,c:1700,count:20
-- schema: checkins
SELECT extract(quarter FROM checkin_date) AS q, extract(week FROM checkin_date) AS w, extract(isoyear FROM checkin_date) AS iy, extract(doy FROM checkin_date) % 7 AS d7, extract(decade FROM checkin_date) AS dec, extract(century FROM checkin_date) AS c, count(*) FROM checkins WHERE checkin_date < '2010-02-01' GROUP BY 1, 2, 3, 4, 5, 6;

-- title: analyst, epoch and julian of a date
-- expect: dp view=(checkin_date) queries=7 columns=e:1700,j:1700,e8:701,count:20
-- schema: checkins
SELECT extract(epoch FROM checkin_date) AS e, extract(julian FROM checkin_date) AS j, date_part('epoch', checkin_date) AS e8, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-10-25' AND '2010-10-31' GROUP BY 1, 2, 3;

-- title: analyst, hour and second of a timestamp built from the date and the hour
-- expect: dp view=(checkin_date, hour) queries=24 columns=h:1700,s:1700,count:20
-- schema: checkins
SELECT extract(hour FROM checkin_date + hour * interval '1 hour') AS h, extract(second FROM checkin_date + hour * interval '61 seconds') AS s, count(*) FROM checkins WHERE checkin_date = '2010-10-31' GROUP BY 1, 2;

-- title: analyst, weekday names in ISO order
-- expect: dp view=(checkin_date) queries=7 columns=day:25,isodow:1700,count:20
-- schema: checkins
SELECT to_char(checkin_date, 'Dy') AS day, extract(isodow FROM checkin_date) AS isodow, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 2;

-- title: analyst, month names and padded day names
-- expect: dp view=(checkin_date) queries=21 columns=month:25,padded:25,count:20
-- schema: checkins
SELECT to_char(checkin_date, 'Mon YYYY') AS month, to_char(checkin_date, 'Day') AS padded, count(*) FROM checkins WHERE checkin_date < '2009-05-01' GROUP BY 1, 2;

-- title: analyst, days since a date in blocks of 100
-- expect: dp view=(checkin_date) queries=7 columns=hundred_days:23,count:20
-- schema: checkins
SELECT (checkin_date - DATE '2009-02-01') / 100 AS hundred_days, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- title: analyst, the last 30 days with an interval
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
SELECT count(*) FROM checkins WHERE checkin_date > DATE '2010-10-31' - INTERVAL '30 days';

-- title: analyst, date minus an integer
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
SELECT count(*) FROM checkins WHERE checkin_date >= DATE '2010-10-31' - 6;

-- title: analyst, date_trunc of a cast to timestamp is a timestamp
-- expect: dp view=(checkin_date) queries=21 columns=m:1114,count:20
-- schema: checkins
SELECT date_trunc('month', checkin_date::timestamp) AS m, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- title: analyst in New York, date_trunc of a date
-- expect: dp view=(checkin_date) queries=5 columns=m:1184,w:1082,count:20
-- schema: checkins
-- timezone: America/New_York
SELECT date_trunc('month', checkin_date) AS m, date_trunc('week', checkin_date)::date AS w, count(*) FROM checkins WHERE checkin_date >= '2010-03-01' AND checkin_date < '2010-04-01' GROUP BY 1, 2 ORDER BY 1, 2;

-- title: analyst in Tokyo comparing a date with ISO timestamps with an offset
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
-- timezone: Asia/Tokyo
SELECT count(*) FROM checkins WHERE checkin_date >= '2010-06-01T00:00:00+09:00' AND checkin_date < '2010-07-01T00:00:00+09:00';

-- title: analyst in Paris, a date as a timestamp with time zone and AT TIME ZONE
-- expect: dp view=(checkin_date) queries=4 columns=local_midnight:1184,utc_wall:1114,count:20
-- schema: checkins
-- timezone: Europe/Paris
SELECT checkin_date::timestamptz AS local_midnight, checkin_date AT TIME ZONE 'UTC' AS utc_wall, count(*) FROM checkins WHERE checkin_date BETWEEN '2010-03-26' AND '2010-03-29' GROUP BY 1, 2;

-- title: analyst, a date compared with a typed timestamp
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
SELECT count(*) FROM checkins WHERE checkin_date > TIMESTAMP '2010-03-01 10:00:00';

-- title: analyst, make_date bounds
-- expect: dp view=(checkin_date) queries=1 columns=count:20
-- schema: checkins
SELECT count(*) FROM checkins WHERE checkin_date BETWEEN make_date(2010, 1, 1) AND make_date(2010, 6, 30);

-- title: analyst, evening check-ins by month with FILTER
-- expect: dp view=(checkin_date, hour) queries=20 columns=month:25,evening:20,total:20
-- schema: checkins
SELECT to_char(checkin_date, 'YYYY-MM') AS month, count(*) FILTER (WHERE hour >= 18) AS evening, count(*) AS total FROM checkins WHERE checkin_date >= '2010-01-01' GROUP BY 1 ORDER BY 1;

-- title: analyst, weekend share with a window over the groups
-- expect: dp view=(checkin_date) queries=2 columns=part:25,pct:1700
-- schema: checkins
SELECT CASE WHEN extract(isodow FROM checkin_date) >= 6 THEN 'weekend' ELSE 'weekday' END AS part, count(*) * 100.0 / sum(count(*)) OVER () AS pct FROM checkins GROUP BY 1;

-- title: analyst, date_bin of 6 hours
-- expect: dp view=(checkin_date, hour) queries=4 columns=slot:1114,count:20
-- schema: checkins
SELECT date_bin('6 hours', checkin_date + hour * interval '1 hour', TIMESTAMP '2001-01-01') AS slot, count(*) FROM checkins WHERE checkin_date = '2010-06-01' GROUP BY 1 ORDER BY 1;

-- title: analyst, the hour of a check-in as a time of day in words
-- expect: dp view=(hour) queries=24 columns=slot:25,count:20
-- schema: checkins
SELECT to_char(checkin_date + hour * interval '1 hour', 'HH12 AM') AS slot, count(*) FROM checkins GROUP BY 1;

-- title: by month, date_trunc to the month keeps each month whole
-- expect: dp view=(checkin_date) queries=21 columns=m:1082,count:20
-- schema: checkins_by_month
SELECT date_trunc('month', checkin_date)::date AS m, count(*) FROM checkins GROUP BY 1;

-- title: by month, extract of the year and a comparison with the first of a month
-- expect: dp view=(checkin_date) queries=2 columns=y:1700,count:20
-- schema: checkins_by_month
SELECT extract(year FROM checkin_date) AS y, count(*) FROM checkins WHERE checkin_date >= '2009-06-01' GROUP BY 1;

-- title: by month, the day of week cuts a month
-- expect: sqlstate 0A000
-- schema: checkins_by_month
-- message: EXTRACT(dow FROM checkin_date) cuts the declared bin 2009-02-01 to 2009-02-28 (one month) of column checkin_date
-- hint: checkin_date is declared by month (unit = "month" in lapras.toml)
SELECT extract(dow FROM checkin_date) AS dow, count(*) FROM checkins GROUP BY 1;

-- title: by month, a weekly series cuts a month
-- expect: sqlstate 0A000
-- schema: checkins_by_month
-- message: cuts the declared bin
-- hint: declare checkin_date with unit = "day"
SELECT DATE_TRUNC('week', checkin_date) AS __timestamp, COUNT(*) AS count FROM public.checkins GROUP BY DATE_TRUNC('week', checkin_date);

-- title: the clock is not evaluated
-- expect: sqlstate 0A000
-- schema: checkins
-- hint: write the date as a constant
SELECT count(*) FROM checkins WHERE checkin_date >= CAST((NOW() + INTERVAL '-30 day') AS date);

-- title: a date in words
-- expect: sqlstate 0A000
-- schema: checkins
-- message: is not evaluated by the proxy: write it in ISO 8601
SELECT count(*) FROM checkins WHERE checkin_date > 'Jan 1 2010';

-- title: a date PostgreSQL does not read either
-- expect: sqlstate 22008
-- schema: checkins
SELECT count(*) FROM checkins WHERE checkin_date > '2010-02-30';

-- title: a time zone abbreviation in AT TIME ZONE
-- expect: sqlstate 0A000
-- schema: checkins
-- message: time zone 'EST' is not evaluated by the proxy
SELECT checkin_date AT TIME ZONE 'EST' AS t, count(*) FROM checkins GROUP BY 1;

-- title: a unit date_trunc does not know
-- expect: sqlstate 22023
-- schema: checkins
-- message: unit "fortnight" not recognized for type timestamp with time zone
SELECT date_trunc('fortnight', checkin_date) AS t, count(*) FROM checkins GROUP BY 1;

-- title: an interval result
-- expect: sqlstate 0A000
-- schema: checkins
-- hint: extract(epoch FROM
SELECT (checkin_date + hour * INTERVAL '1 hour') - DATE '2009-01-01' AS since, count(*) FROM checkins WHERE checkin_date = '2010-01-01' GROUP BY 1;

-- title: ten-degree bands of latitude over ten-degree bins
-- expect: dp view=(lat) queries=18 columns=band:701,count:20
-- schema: checkins
SELECT floor(lat / 10) * 10 AS band, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- title: hemispheres and a twenty-degree grid
-- expect: dp view=(lat, lon) queries=180 columns=hemisphere:25,lat20:701,lon20:701,count:20
-- schema: checkins
SELECT CASE WHEN lat >= 0 THEN 'north' ELSE 'south' END AS hemisphere, floor(lat / 20) * 20 AS lat20, floor(lon / 20) * 20 AS lon20, count(*) FROM checkins GROUP BY 1, 2, 3;

-- title: rounding a latitude cuts its bins
-- expect: sqlstate 0A000
-- schema: checkins
-- message: round(lat) cuts the declared bin [-90, -80) of column lat
-- hint: must take one value on each bin
SELECT round(lat) AS r, count(*) FROM checkins GROUP BY 1;

-- title: width_bucket in double precision cuts a bin by its own rounding
-- expect: sqlstate 0A000
-- schema: checkins
-- message: cuts the declared bin [-70, -60) of column lon
SELECT width_bucket(lon, -180, 180, 12) AS sector, count(*) FROM checkins GROUP BY 1;

-- Binned and continuous columns (issue 40, "Binned and continuous columns"): expressions over
-- a column declared in bins that do not cut a bin, and sums/averages of continuous columns.

-- id: binned.lat_decade
-- source: analyst, 10-degree latitude bands over 10-degree bins
SELECT floor(lat / 10) * 10 AS band, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: binned.lat_hemisphere
-- source: analyst, hemispheres
SELECT CASE WHEN lat >= 0 THEN 'north' ELSE 'south' END AS hemisphere, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: binned.lon_width_bucket
-- source: analyst, width_bucket aligned with the declared bins
-- expect: refused 0A000 width_bucket in double precision cuts the bin [-70, -60): PostgreSQL computes 12 * ((lon + 180) / 360) in doubles and puts the last double below -60 in bucket 5, the rest of the bin in bucket 4 (floor(lon / 30) + 7 is answered)
SELECT width_bucket(lon, -180, 180, 12) AS sector, count(*) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: binned.lat_range_edges
-- source: Superset filter on a numeric range at bin edges
SELECT hour AS hour, COUNT(*) AS count FROM public.checkins WHERE lat >= 30 AND lat < 50 GROUP BY hour ORDER BY count DESC LIMIT 10000;

-- id: binned.lon_americas
-- source: analyst, the Americas by longitude
SELECT count(*) FROM checkins WHERE lon < -30;

-- id: binned.lat_lon_grid
-- source: Grafana worldmap-style grid of 20-degree cells
SELECT floor(lat / 20) * 20 AS lat20, floor(lon / 20) * 20 AS lon20, count(*) FROM checkins GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 10;

-- id: binned.capital_gain_positive
-- source: analyst, people with any capital gain (integer bins)
SELECT sex, count(*) FROM adult WHERE capital_gain > 0 GROUP BY sex ORDER BY sex;

-- id: binned.capital_gain_between_inclusive
-- source: analyst, an inclusive integer range that ends on a bin's last value
SELECT count(*) FROM adult WHERE capital_gain BETWEEN 1 AND 999;

-- id: binned.capital_gain_band
-- source: analyst, capital gain bands with CASE on bin edges
SELECT CASE WHEN capital_gain = 0 THEN 'none' WHEN capital_gain < 5000 THEN 'small' WHEN capital_gain < 20000 THEN 'medium' ELSE 'large' END AS band, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- id: binned.capital_loss_flag
-- source: Tableau calculated field on a binned column
SELECT (CASE WHEN "adult"."capital_loss" > 0 THEN 'loss' ELSE 'no loss' END) AS "Calculation_1", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" GROUP BY 1;

-- id: binned.avg_capital_gain
-- source: Metabase average of a continuous money-like column
SELECT avg("public"."adult"."capital_gain") AS "avg" FROM "public"."adult";

-- id: binned.sum_capital_gain_by_sex
-- source: Superset SUM metric on a continuous column
SELECT sex AS sex, SUM(capital_gain) AS "SUM(capital_gain)" FROM public.adult GROUP BY sex ORDER BY "SUM(capital_gain)" DESC LIMIT 10000;

-- id: binned.avg_capital_loss_by_income
-- source: analyst
SELECT income, avg(capital_loss) FROM adult GROUP BY income ORDER BY income;

-- id: binned.avg_lat
-- source: analyst, the mean latitude of check-ins
SELECT avg(lat) AS mean_lat FROM checkins;

-- id: binned.avg_lon_by_hour
-- source: analyst, mean longitude by hour band
SELECT hour / 6 AS quarter_day, avg(lon) FROM checkins GROUP BY 1 ORDER BY 1;

-- id: binned.net_capital
-- source: analyst, net capital by education level
SELECT education_num, sum(capital_gain - capital_loss) AS net FROM adult WHERE education_num >= 13 GROUP BY 1 ORDER BY 1;

-- Sums and averages of columns declared with clamp = true (rewriter/clamp.py; docs/sql.md §2.2):
-- Adult's capital_gain and capital_loss, whose bounds hold every value: each accepted case is run
-- on PostgreSQL and diffed against the rewriter's answer on the exact (split) histogram, which
-- is then PostgreSQL's answer exactly.

-- title: Metabase's average of a continuous money-like column (clamped to its declared range)
-- expect: dp view=(capital_gain#value) queries=2 columns=avg:1700
SELECT avg("public"."adult"."capital_gain") AS "avg" FROM "public"."adult";

-- title: Superset's SUM metric on a clamped column, per group
-- expect: dp view=(sex, capital_gain#value) queries=4 columns=sex:25,SUM(capital_gain):20
SELECT sex AS sex, SUM(capital_gain) AS "SUM(capital_gain)" FROM public.adult GROUP BY sex ORDER BY "SUM(capital_gain)" DESC LIMIT 10000;

-- title: the average of another clamped column per group
-- expect: dp view=(income, capital_loss#value) queries=4 columns=income:25,avg:1700
SELECT income, avg(capital_loss) FROM adult GROUP BY income ORDER BY income;

-- title: a difference of two clamped columns, summed
-- expect: dp view=(education_num, capital_gain#value, capital_loss#value) queries=8 columns=education_num:23,net:20
SELECT education_num, sum(capital_gain - capital_loss) AS net FROM adult WHERE education_num >= 13 GROUP BY 1 ORDER BY 1;

-- title: a clamped column summed under a condition at its bin edges, with its count
-- expect: dp view=(capital_gain, capital_gain#value) queries=2 columns=sum:20,count:20,avg:1700
SELECT sum(capital_gain), count(*), avg(capital_gain) FROM adult WHERE capital_gain >= 1000;

-- title: FILTER on a sum, and a multiple of a clamped column
-- expect: dp view=(age, capital_gain, capital_gain#value, capital_loss#value) queries=4 columns=sum:20,avg:1700
SELECT sum(capital_gain) FILTER (WHERE age > 50), avg(capital_loss * 2) FROM adult WHERE capital_gain BETWEEN 1 AND 999;

-- title: a quotient by a constant of a clamped column, cast to numeric
-- expect: dp view=(race, capital_gain#value) queries=10 columns=race:25,avg:1700
SELECT race, avg(capital_gain::numeric / 100) FROM adult GROUP BY race ORDER BY 1;

-- title: clamped columns summed with an integer column
-- expect: dp view=(age, capital_gain#value, capital_loss#value) queries=2 columns=sum:20
SELECT sum(capital_gain + capital_loss + age) FROM adult;

-- title: a clamped column summed under CASE: its bins in the conditions, its values in the branches
-- expect: dp view=(sex, capital_gain, capital_gain#value) queries=4 columns=male_gain:20,avg_if_any:1700
SELECT sum(CASE WHEN sex = 'Male' THEN capital_gain ELSE 0 END) AS male_gain, avg(CASE WHEN capital_gain > 0 THEN capital_gain END) AS avg_if_any FROM adult;

-- title: COALESCE and a difference of two clamped columns, per group
-- expect: dp view=(income, capital_gain#value, capital_loss#value) queries=4 columns=income:25,net:20
SELECT income, sum(coalesce(capital_gain, 0) - capital_loss) AS net FROM adult GROUP BY 1 ORDER BY 1;

-- title: a clamped column times an integer column, and a rounded average of a quotient
-- expect: dp view=(age, hours_per_week, capital_gain#value) queries=3 columns=s:20,monthly:1700
SELECT sum(capital_gain * hours_per_week) AS s, avg(capital_gain * 1.0 / 12)::numeric(12,2) AS monthly FROM adult WHERE age >= 65;

-- title: shares of a clamped sum over its total (a window over the grouped sums)
-- expect: dp view=(race, capital_gain#value) queries=10 columns=race:25,share:1700
SELECT race, sum(capital_gain) * 100.0 / sum(sum(capital_gain)) OVER () AS share FROM adult GROUP BY race ORDER BY 2 DESC;

-- title: an expression that is not affine in a clamped column
-- expect: sqlstate 0A000
SELECT sum(floor(capital_gain / 1000)) FROM adult;

-- title: integer division of a clamped column
-- expect: sqlstate 0A000
SELECT sum(capital_gain / 1000) FROM adult;

-- title: a product of two clamped columns' functions
-- expect: sqlstate 0A000
SELECT sum(capital_gain * capital_gain) FROM adult;


-- Joins of protected table adult with public relations (rewriter/lookups.py; docs/sql.md §2.7):
-- VALUES lists, CTEs of constants, EXISTS/IN subqueries over them. Each accepted case is run on
-- PostgreSQL and diffed against the rewriter's answer on the exact histogram (test_golden.py).

-- title: a VALUES lookup: regions for countries, grouped by region
-- expect: dp view=(native_country) queries=4 columns=region:25,n:20
SELECT r.region, count(*) AS n FROM adult a JOIN (VALUES ('United-States', 'North America'), ('Mexico', 'Latin America'), ('Canada', 'North America'), ('India', 'Asia'), ('China', 'Asia'), ('Germany', 'Europe')) AS r(country, region) ON a.native_country = r.country GROUP BY r.region ORDER BY n DESC;

-- title: a CTE of VALUES: labels for codes
-- expect: dp view=(income) queries=2 columns=label:25,count:20
WITH labels(code, label) AS (VALUES ('<=50K', 'low income'), ('>50K', 'high income')) SELECT l.label, count(*) FROM adult JOIN labels l ON adult.income = l.code GROUP BY l.label ORDER BY l.label;

-- title: LEFT JOIN keeps the rows without a match, their lookup columns NULL
-- expect: dp view=(native_country) queries=8 columns=region:25,count:20,matched:20
SELECT coalesce(r.region, 'other') AS region, count(*), count(r.region) AS matched FROM adult a LEFT JOIN (VALUES ('United-States', 'North America'), ('Mexico', 'Latin America'), ('Germany', 'Europe')) AS r(country, region) ON a.native_country = r.country GROUP BY 1 ORDER BY 1;

-- title: a public relation RIGHT JOIN-ed to the protected table is a LEFT JOIN of it
-- expect: dp view=(native_country) queries=3 columns=region:25,count:20
SELECT r.region, count(*) FROM (VALUES ('United-States', 'North America'), ('Mexico', 'Latin America')) AS r(country, region) RIGHT JOIN adult a ON a.native_country = r.country GROUP BY 1 ORDER BY 1;

-- title: public weights with USING: a weighted sum
-- expect: dp view=(education) queries=2 columns=score:20,avg:1700
SELECT sum(w.weight) AS score, avg(w.weight) FROM adult a JOIN (VALUES ('Bachelors', 3), ('Masters', 4), ('Doctorate', 5), ('HS-grad', 1)) AS w(education, weight) USING (education);

-- title: a protected column times a public weight
-- expect: dp view=(sex, hours_per_week) queries=4 columns=sex:25,weighted:1700
SELECT a.sex, sum(a.hours_per_week * w.f) AS weighted FROM adult a JOIN (VALUES ('Male', 1.5), ('Female', 2.25)) AS w(sex, f) USING (sex) GROUP BY a.sex ORDER BY 1;

-- title: thresholds: a range join on BETWEEN, ordered by an aggregate of the lookup
-- expect: dp view=(age) queries=15 columns=band:25,count:20,avg:1700
SELECT t.band, count(*), avg(age) FROM adult a JOIN (VALUES ('young', 17, 29), ('middle', 30, 49), ('senior', 50, 90)) AS t(band, lo, hi) ON a.age BETWEEN t.lo AND t.hi GROUP BY t.band ORDER BY min(t.lo);

-- title: a many-match lookup counts a row once per matching row, as PostgreSQL does
-- expect: dp view=(age, native_country) queries=4 columns=grp:25,count:20,sum:20
SELECT grp, count(*), sum(age) FROM adult a JOIN (VALUES ('Mexico', 'latin'), ('Mexico', 'north america'), ('United-States', 'north america'), ('Cuba', 'latin')) AS m(country, grp) ON a.native_country = m.country GROUP BY grp ORDER BY grp;

-- title: duplicate rows of a lookup multiply
-- expect: dp view=(native_country) queries=1 columns=count:20
SELECT count(*) FROM adult a JOIN (VALUES ('Mexico'), ('Mexico'), ('Cuba')) AS d(c) ON a.native_country = d.c;

-- title: a comma join with the condition in WHERE
-- expect: dp view=(education_num) queries=3 columns=label:25,count:20
SELECT v.label, count(*) FROM adult a, (VALUES (1, 'primary'), (9, 'high school'), (13, 'college')) AS v(lvl, label) WHERE a.education_num >= v.lvl GROUP BY v.label ORDER BY v.label;

-- title: a lookup on two attributes
-- expect: dp view=(sex, income) queries=2 columns=label:25,count:20
SELECT g.label, count(*) FROM adult a JOIN (VALUES ('Male', '>50K', 'men, high'), ('Female', '>50K', 'women, high')) AS g(sex, income, label) ON a.sex = g.sex AND a.income = g.income GROUP BY g.label ORDER BY g.label;

-- title: a CTE of constant rows (UNION ALL of SELECTs) as thresholds
-- expect: dp view=(age) queries=2 columns=label:25,count:20
WITH t AS (SELECT 30 AS lo, 'thirties' AS label UNION ALL SELECT 40, 'forties') SELECT t.label, count(*) FROM adult JOIN t ON age >= t.lo AND age < t.lo + 10 GROUP BY 1 ORDER BY 1;

-- title: a CROSS JOIN with a one-column VALUES list multiplies every row
-- expect: dp view=(age) queries=4 columns=x:23,count:20,sum:20
SELECT k.x, count(*), sum(age) FROM adult CROSS JOIN (VALUES (1), (2)) AS k(x) GROUP BY k.x ORDER BY 1;

-- title: two lookups, one LEFT JOIN-ed
-- expect: dp view=(workclass, native_country) queries=6 columns=region:25,kind:25,count:20
SELECT r.region, s.kind, count(*) FROM adult a JOIN (VALUES ('Private', 'private'), ('State-gov', 'public'), ('Local-gov', 'public')) AS s(workclass, kind) ON s.workclass = a.workclass LEFT JOIN (VALUES ('United-States', 'NA'), ('Mexico', 'LA')) AS r(country, region) ON a.native_country = r.country GROUP BY 1, 2 ORDER BY 1, 2;

-- title: IN (SELECT ... FROM VALUES): a semi-join
-- expect: dp view=(education, sex) queries=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE education IN (SELECT e FROM (VALUES ('Bachelors'), ('Masters'), ('Doctorate')) AS v(e)) GROUP BY sex ORDER BY sex;

-- title: NOT IN with a NULL in the list keeps no row, as in PostgreSQL
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM adult WHERE education NOT IN (SELECT e FROM (VALUES ('Bachelors'), (NULL)) AS v(e));

-- title: NOT IN without NULL
-- expect: dp view=(age, education) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age > 40 AND education NOT IN (SELECT e FROM (VALUES ('Bachelors'), ('Masters')) AS v(e));

-- title: EXISTS over a VALUES list, correlated
-- expect: dp view=(native_country, income) queries=2 columns=income:25,count:20
SELECT income, count(*) FROM adult a WHERE EXISTS (SELECT 1 FROM (VALUES ('Mexico'), ('Cuba'), ('Cuba')) AS v(c) WHERE v.c = a.native_country) GROUP BY income ORDER BY income;

-- title: NOT EXISTS over a VALUES list
-- expect: dp view=(native_country) queries=1 columns=count:20
SELECT count(*) FROM adult a WHERE NOT EXISTS (SELECT 1 FROM (VALUES ('United-States')) AS v(c) WHERE v.c = a.native_country);

-- title: a lookup inside a derived table (Superset's virtual dataset)
-- expect: dp view=(age, native_country) queries=4 columns=region:25,AVG(age):1700
SELECT region AS region, AVG(age) AS "AVG(age)" FROM (SELECT a.age, cr.region FROM public.adult a JOIN (VALUES ('United-States', 'North America'), ('Mexico', 'Latin America')) AS cr(country, region) ON a.native_country = cr.country) AS virtual_table GROUP BY region ORDER BY "AVG(age)" DESC LIMIT 10000;

-- title: a filter on a lookup column through a LEFT JOIN (the unmatched rows)
-- expect: dp view=(native_country) queries=1 columns=count:20
SELECT count(*) FROM adult a LEFT JOIN (VALUES ('United-States', 'NA')) AS r(country, region) ON a.native_country = r.country WHERE r.region IS NULL;

-- title: a numeric lookup column typed as PostgreSQL types VALUES (integer and numeric mixed)
-- expect: dp view=(sex) queries=2 columns=f:1700,count:20
SELECT w.f, count(*) FROM adult a JOIN (VALUES ('Male', 1.5), ('Female', 2)) AS w(sex, f) ON a.sex = w.sex GROUP BY 1 ORDER BY 1;

-- title: FULL JOIN with a public relation
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a FULL JOIN (VALUES ('x')) AS r(c) ON a.sex = r.c;

-- title: NATURAL JOIN with a public relation
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a NATURAL JOIN (VALUES ('Male')) AS r(sex);

-- title: a RIGHT JOIN that would keep the public relation's rows
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a RIGHT JOIN (VALUES ('Male')) AS r(sex) USING (sex);

-- title: a public relation LEFT JOIN-ed to the protected table
-- expect: sqlstate 0A000
SELECT count(*) FROM (VALUES ('Male')) AS r(sex) LEFT JOIN adult a USING (sex);

-- title: a column both relations have, unqualified, is ambiguous (42702)
-- expect: sqlstate 42702
SELECT count(*) FROM adult a JOIN (VALUES ('Male', 30)) AS r(sex, age) ON a.sex = r.sex WHERE age > 20;

-- title: an expression in a VALUES list
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a JOIN (VALUES (lower('Male'))) AS r(sex) USING (sex);

-- title: a VALUES column of text and integer (22P02, as PostgreSQL)
-- expect: sqlstate 22P02
SELECT count(*) FROM adult a JOIN (VALUES ('Male'), (1)) AS r(sex) USING (sex);

-- title: a public relation in a branch of a UNION: the branches are released one by one (compose)
-- expect: composed releases=2 columns=?column?:25,count:20
SELECT 'x', count(*) FROM adult a JOIN (VALUES ('Male')) AS r(s) ON a.sex = r.s UNION ALL SELECT 'y', count(*) FROM adult;

-- title: rows of a join with a public relation
-- expect: sqlstate 42501
SELECT r.s FROM adult a JOIN (VALUES ('Male')) AS r(s) ON a.sex = r.s;

-- title: a lookup column neither grouped nor aggregated
-- expect: sqlstate 42803
SELECT r.s, count(*) FROM adult a JOIN (VALUES ('Male')) AS r(s) ON a.sex = r.s;

-- title: a join with an undeclared table stays refused
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a JOIN country_region c ON c.country = a.native_country;


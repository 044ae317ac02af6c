-- Lookups: a protected table joined to public relations (issue 40, "Lookups and public
-- tables"). `public.country_region` (country, region) is an unprotected table the corpus
-- test creates and declares public; every other lookup is written in the statement.

-- id: lookup.values.region
-- source: analyst, regions for countries as a VALUES list
SELECT r.region, count(*) AS n FROM adult a JOIN (VALUES ('United-States', 'North America'), ('Mexico', 'North America'), ('Canada', 'North America'), ('India', 'Asia'), ('Philippines', 'Asia'), ('China', 'Asia'), ('Germany', 'Europe'), ('England', 'Europe')) AS r(country, region) ON a.native_country = r.country GROUP BY r.region ORDER BY n DESC;

-- id: lookup.cte_values.labels
-- source: analyst, labels for codes in a CTE of VALUES
WITH labels(code, label) AS (VALUES ('<=50K', 'low income'), ('>50K', 'high income')) SELECT l.label, count(*) FROM adult JOIN labels l ON adult.income = l.code GROUP BY l.label ORDER BY l.label;

-- id: lookup.values.left_join
-- source: analyst, LEFT JOIN keeps the unmatched countries as NULL
SELECT coalesce(r.region, 'other') AS region, count(*) FROM adult a LEFT JOIN (VALUES ('United-States', 'North America'), ('Mexico', 'North America'), ('Germany', 'Europe')) AS r(country, region) ON a.native_country = r.country GROUP BY 1 ORDER BY 1;

-- id: lookup.values.weights
-- source: analyst, a weighted sum by education with public weights
SELECT sum(w.weight) AS score FROM adult a JOIN (VALUES ('Bachelors', 3), ('Masters', 4), ('Doctorate', 5), ('HS-grad', 1)) AS w(education, weight) USING (education);

-- id: lookup.values.thresholds
-- source: analyst, age bands from a thresholds table
SELECT t.band, count(*) FROM adult a JOIN (VALUES ('young', 17, 29), ('middle', 30, 49), ('senior', 50, 90)) AS t(band, lo, hi) ON a.age BETWEEN t.lo AND t.hi GROUP BY t.band ORDER BY min(t.lo);

-- id: lookup.values.in_subquery
-- source: analyst, semi-join to a VALUES list
SELECT sex, count(*) FROM adult WHERE education IN (SELECT e FROM (VALUES ('Bachelors'), ('Masters'), ('Doctorate')) AS v(e)) GROUP BY sex ORDER BY sex;

-- id: lookup.cte_values.avg_by_group
-- source: analyst, averages by a relabelled workclass
WITH sector(workclass, kind) AS (VALUES ('Private', 'private'), ('Self-emp-not-inc', 'self'), ('Self-emp-inc', 'self'), ('Federal-gov', 'public'), ('Local-gov', 'public'), ('State-gov', 'public')) SELECT s.kind, count(*), avg(a.hours_per_week) FROM adult a JOIN sector s ON s.workclass = a.workclass GROUP BY s.kind ORDER BY s.kind;

-- id: lookup.values.two_keys
-- source: analyst, a lookup on two attributes
SELECT g.label, count(*) FROM adult a JOIN (VALUES ('Male', '>50K', 'men, high'), ('Female', '>50K', 'women, high')) AS g(sex, income, label) ON a.sex = g.sex AND a.income = g.income GROUP BY g.label ORDER BY g.label;

-- id: lookup.values.many_match
-- source: analyst, a lookup where one country belongs to two groups (rows counted twice, as PostgreSQL does)
SELECT grp, count(*) FROM adult a JOIN (VALUES ('Mexico', 'latin'), ('Mexico', 'north america'), ('United-States', 'north america'), ('Cuba', 'latin')) AS m(country, grp) ON a.native_country = m.country GROUP BY grp ORDER BY grp;

-- id: lookup.values.comma_join
-- source: analyst, old-style comma join with WHERE
SELECT v.label, count(*) FROM adult a, (VALUES (1, 'primary'), (9, 'high school'), (13, 'college')) AS v(lvl, label) WHERE a.education_num >= v.lvl GROUP BY v.label ORDER BY v.label;

-- id: lookup.table.region
-- source: Metabase question joining a public dimension table
SELECT "Country Region"."region" AS "Country Region__region", COUNT(*) AS "count" FROM "public"."adult" LEFT JOIN "public"."country_region" AS "Country Region" ON "public"."adult"."native_country" = "Country Region"."country" GROUP BY "Country Region"."region" ORDER BY "Country Region"."region" ASC;

-- id: lookup.table.inner
-- source: analyst, inner join to the public dimension table
SELECT cr.region, a.sex, count(*) FROM adult a JOIN country_region cr ON cr.country = a.native_country GROUP BY cr.region, a.sex ORDER BY 1, 2;

-- id: lookup.table.filter
-- source: Tableau, a filter through the dimension table
SELECT "adult"."income" AS "income", SUM(1) AS "sum:Number of Records:ok" FROM "public"."adult" "adult" INNER JOIN "public"."country_region" "country_region" ON ("adult"."native_country" = "country_region"."country") WHERE ("country_region"."region" = 'Europe') GROUP BY 1;

-- id: lookup.table.avg
-- source: Superset, virtual dataset joined to a dimension table
SELECT region AS region, AVG(age) AS "AVG(age)" FROM (SELECT a.age, cr.region FROM public.adult a JOIN public.country_region cr ON a.native_country = cr.country) AS virtual_table GROUP BY region ORDER BY "AVG(age)" DESC LIMIT 10000;

-- id: lookup.table.semi
-- source: analyst, EXISTS against the public table
SELECT count(*) FROM adult a WHERE EXISTS (SELECT 1 FROM country_region cr WHERE cr.country = a.native_country AND cr.region = 'Asia');

-- Accepted DP statements. `-- expect: dp view=<view> queries=<m> columns=<name:oid,...>`.
-- Every case is also executed on PostgreSQL as the aggregator: the exact answer must equal
-- postprocess(plan, W @ x) on the view's exact histogram.

-- title: the example of the issue
-- expect: dp view=age_sex_income queries=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE age BETWEEN 30 AND 39 GROUP BY 1;

-- title: plain count
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT count(*) FROM adult;

-- title: Metabase count question
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT COUNT(*) AS "count" FROM "public"."adult";

-- title: Metabase grouped question with three-part names
-- expect: dp view=age_sex_income queries=2 columns=sex:25,count:20
SELECT "public"."adult"."sex" AS "sex", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex" ORDER BY "public"."adult"."sex" ASC;

-- title: Superset chart with reserved-word alias and ORDER BY alias
-- expect: dp view=demographics queries=7 columns=marital_status:25,count:20
SELECT marital_status AS marital_status, COUNT(*) AS count FROM public.adult GROUP BY marital_status ORDER BY count DESC LIMIT 10000;

-- title: COUNT(1) and SUM(1)
-- expect: dp view=age_sex_income queries=1 columns=count:20,sum:20
SELECT COUNT(1), SUM(1) FROM adult WHERE sex = 'Female';

-- title: SUM and AVG of an integer
-- expect: dp view=age_sex_income queries=2 columns=sum:20,avg:1700
SELECT sum(age), avg(age) FROM adult WHERE income = '>50K';

-- title: SUM of a cast to bigint is numeric
-- expect: dp view=age_sex_income queries=2 columns=sum:1700
SELECT sum(age::bigint) FROM adult;

-- title: casts and table alias
-- expect: dp view=age_sex_income queries=1 columns=n:20
SELECT count(*) AS n FROM adult AS t WHERE t.age::int >= 30 AND CAST(t.age AS integer) < 40;

-- title: case-insensitive identifiers
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT COUNT(*) FROM ADULT WHERE AGE > 60 AND Sex = 'Male';

-- title: BETWEEN SYMMETRIC
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age BETWEEN SYMMETRIC 60 AND 20;

-- title: IN and NOT IN
-- expect: dp view=origin queries=1 columns=count:20
SELECT count(*) FROM adult WHERE race IN ('White', 'Black') AND native_country NOT IN ('United-States', '?');

-- title: OR and NOT
-- expect: dp view=demographics queries=1 columns=count:20
SELECT count(*) FROM adult WHERE NOT (age < 25 OR marital_status = 'Never-married');

-- title: two grouping attributes and HAVING
-- expect: dp view=demographics queries=30 columns=race:25,relationship:25,count:20
SELECT race, relationship, count(*) FROM adult GROUP BY race, relationship HAVING count(*) >= 100;

-- title: GROUP BY ordinal with alias and ORDER BY an aggregate
-- expect: dp view=education queries=32 columns=e:23,count:20,avg:1700
SELECT education_num AS e, count(*), avg(education_num) FROM adult GROUP BY 1 ORDER BY count(*) DESC;

-- title: binned column compared at bin edges
-- expect: dp view=capital queries=1 columns=count:20
SELECT count(*) FROM adult WHERE capital_gain >= 5000 AND capital_loss = 0;

-- title: value outside the domain is simply false
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age > 120;

-- title: constant-false WHERE without GROUP BY still returns one row
-- expect: dp view=age_sex_income queries=1 columns=count:20
SELECT count(*) FROM adult WHERE 1 = 0;

-- title: count of a column
-- expect: dp view=work queries=1 columns=count:20
SELECT count(occupation) FROM adult WHERE hours_per_week > 40;

-- title: LIMIT and OFFSET are post-processing
-- expect: dp view=age_sex_income queries=74 columns=age:23,count:20
SELECT age, count(*) FROM adult GROUP BY age ORDER BY age LIMIT 5 OFFSET 2;

-- title: parameters bound later
-- expect: dp view=age_sex_income queries=1 columns=count:20
-- params: [30, 'Male']
SELECT count(*) FROM adult WHERE age > $1 AND sex = $2;

-- title: parameter in LIMIT
-- expect: dp view=age_sex_income queries=2 columns=income:25,count:20
-- params: [1]
SELECT income, count(*) FROM adult GROUP BY income ORDER BY income LIMIT $1;

-- title: group key cast to text
-- expect: dp view=education queries=16 columns=education_num:25,count:20
SELECT education_num::text, count(*) FROM adult GROUP BY education_num;

-- Accepted DP statements. `-- expect: dp view=<marginal> queries=<m> columns=<name:oid,...>`,
-- the marginal named by the attributes the statement uses, in declaration order: `(age, sex)`.
-- Every case is also executed on PostgreSQL as the aggregator: the exact answer must equal
-- postprocess(plan, W @ x) on the marginal's exact histogram.

-- title: the example of the issue
-- expect: dp view=(age, sex) queries=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE age BETWEEN 30 AND 39 GROUP BY 1;

-- title: plain count
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM adult;

-- title: Metabase count question
-- expect: dp view=() queries=1 columns=count:20
SELECT COUNT(*) AS "count" FROM "public"."adult";

-- title: Metabase grouped question with three-part names
-- expect: dp view=(sex) queries=2 columns=sex:25,count:20
SELECT "public"."adult"."sex" AS "sex", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex" ORDER BY "public"."adult"."sex" ASC;

-- title: Superset chart with reserved-word alias and ORDER BY alias
-- expect: dp view=(marital_status) queries=7 columns=marital_status:25,count:20
SELECT marital_status AS marital_status, COUNT(*) AS count FROM public.adult GROUP BY marital_status ORDER BY count DESC LIMIT 10000;

-- title: COUNT(1) and SUM(1)
-- expect: dp view=(sex) queries=1 columns=count:20,sum:20
SELECT COUNT(1), SUM(1) FROM adult WHERE sex = 'Female';

-- title: SUM and AVG of an integer
-- expect: dp view=(age, income) queries=2 columns=sum:20,avg:1700
SELECT sum(age), avg(age) FROM adult WHERE income = '>50K';

-- title: SUM of a cast to bigint is numeric
-- expect: dp view=(age) queries=2 columns=sum:1700
SELECT sum(age::bigint) FROM adult;

-- title: casts and table alias
-- expect: dp view=(age) queries=1 columns=n:20
SELECT count(*) AS n FROM adult AS t WHERE t.age::int >= 30 AND CAST(t.age AS integer) < 40;

-- title: case-insensitive identifiers
-- expect: dp view=(age, sex) queries=1 columns=count:20
SELECT COUNT(*) FROM ADULT WHERE AGE > 60 AND Sex = 'Male';

-- title: BETWEEN SYMMETRIC
-- expect: dp view=(age) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age BETWEEN SYMMETRIC 60 AND 20;

-- title: IN and NOT IN
-- expect: dp view=(race, native_country) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE race IN ('White', 'Black') AND native_country NOT IN ('United-States', '?');

-- title: OR and NOT
-- expect: dp view=(age, marital_status) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE NOT (age < 25 OR marital_status = 'Never-married');

-- title: two grouping attributes and HAVING
-- expect: dp view=(relationship, race) queries=30 columns=race:25,relationship:25,count:20
SELECT race, relationship, count(*) FROM adult GROUP BY race, relationship HAVING count(*) >= 100;

-- title: GROUP BY ordinal with alias and ORDER BY an aggregate
-- expect: dp view=(education_num) queries=32 columns=e:23,count:20,avg:1700
SELECT education_num AS e, count(*), avg(education_num) FROM adult GROUP BY 1 ORDER BY count(*) DESC;

-- title: binned column compared at bin edges
-- expect: dp view=(capital_gain, capital_loss) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE capital_gain >= 5000 AND capital_loss = 0;

-- title: value outside the domain is simply false
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age > 120;

-- title: constant-false WHERE without GROUP BY still returns one row
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM adult WHERE 1 = 0;

-- title: count of a column
-- expect: dp view=(hours_per_week) queries=1 columns=count:20
SELECT count(occupation) FROM adult WHERE hours_per_week > 40;

-- title: LIMIT and OFFSET are post-processing
-- expect: dp view=(age) queries=74 columns=age:23,count:20
SELECT age, count(*) FROM adult GROUP BY age ORDER BY age LIMIT 5 OFFSET 2;

-- title: parameters bound later
-- expect: dp view=(age, sex) queries=1 columns=count:20
-- params: [30, 'Male']
SELECT count(*) FROM adult WHERE age > $1 AND sex = $2;

-- title: parameter in LIMIT
-- expect: dp view=(income) queries=2 columns=income:25,count:20
-- params: [1]
SELECT income, count(*) FROM adult GROUP BY income ORDER BY income LIMIT $1;

-- title: group key cast to text
-- expect: dp view=(education_num) queries=16 columns=education_num:25,count:20
SELECT education_num::text, count(*) FROM adult GROUP BY education_num;

-- Issue 14: expressions over declared attributes, post-processing, statistics, mixed aggregates.

-- title: DISTINCT values of a column are public (Metabase field values)
-- expect: dp view=() queries=0 columns=sex:25
SELECT DISTINCT sex FROM adult LIMIT 1000;

-- title: GROUP BY without an aggregate returns the declared values
-- expect: dp view=() queries=0 columns=race:25
SELECT race FROM adult GROUP BY race ORDER BY race;

-- title: DISTINCT over an aggregate
-- expect: dp view=() queries=1 columns=count:20
SELECT DISTINCT count(*) FROM adult;

-- title: MIN and MAX from one noisy histogram
-- expect: dp view=(age, sex) queries=74 columns=min:23,max:23
SELECT min(age), max(age) FROM adult WHERE sex = 'Female';

-- title: COUNT DISTINCT over a public domain
-- expect: dp view=(age, income) queries=74 columns=count:20
SELECT count(DISTINCT age) FROM adult WHERE income = '>50K';

-- title: aggregate FILTER
-- expect: dp view=(age) queries=2 columns=count:20,count:20
SELECT count(*) FILTER (WHERE age > 30), count(*) FROM adult;

-- title: several FILTERs and sums per group
-- expect: dp view=(age, sex, income) queries=6 columns=sex:25,rich:20,old_years:20
SELECT sex, count(*) FILTER (WHERE income = '>50K') AS rich, sum(age) FILTER (WHERE age >= 65) AS old_years FROM adult GROUP BY sex;

-- title: percentile_cont (a median)
-- expect: dp view=(age) queries=74 columns=percentile_cont:701
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY age) FROM adult;

-- title: percentile_disc per group
-- expect: dp view=(sex, hours_per_week) queries=198 columns=sex:25,percentile_disc:23
SELECT sex, percentile_disc(0.9) WITHIN GROUP (ORDER BY hours_per_week) FROM adult GROUP BY sex;

-- title: stddev and variance
-- expect: dp view=(age) queries=3 columns=stddev:1700,variance:1700,stddev_pop:1700,var_pop:1700
SELECT stddev(age), variance(age), stddev_pop(age), var_pop(age) FROM adult;

-- title: SUM over an expression
-- expect: dp view=(age) queries=2 columns=sum:20
SELECT sum(age * 2) FROM adult;

-- title: SUM of a bounded CASE
-- expect: dp view=(age, hours_per_week) queries=2 columns=sum:20
SELECT sum(CASE WHEN age >= 65 THEN hours_per_week ELSE 0 END) FROM adult;

-- title: LIKE on a categorical column
-- expect: dp view=(native_country) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE native_country LIKE 'United%';

-- title: ILIKE and NOT LIKE
-- expect: dp view=(workclass, occupation) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE workclass ILIKE '%gov%' AND occupation NOT LIKE 'Prof%';

-- title: arithmetic on a column in WHERE
-- expect: dp view=(age) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE age + 1 > 30;

-- title: function on a column in WHERE
-- expect: dp view=(sex) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE lower(sex) = 'male';

-- title: CASE inside COUNT
-- expect: dp view=(age) queries=1 columns=count:20
SELECT count(CASE WHEN age > 30 THEN 1 END) FROM adult;

-- title: CASE as a group
-- expect: dp view=(age) queries=3 columns=band:25,count:20
SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'middle' ELSE 'old' END AS band, count(*) FROM adult GROUP BY 1;

-- title: GROUP BY an integer division
-- expect: dp view=(age) queries=9 columns=?column?:23,count:20
SELECT age / 10, count(*) FROM adult GROUP BY age / 10;

-- title: floor binning is double precision
-- expect: dp view=(age) queries=9 columns=decade:701,count:20
SELECT floor(age / 10) * 10 AS decade, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- title: width_bucket binning
-- expect: dp view=(hours_per_week) queries=5 columns=b:23,count:20
SELECT width_bucket(hours_per_week, 0, 100, 5) AS b, count(*) FROM adult GROUP BY 1 ORDER BY 1;

-- title: comparison between two columns
-- expect: dp view=(age, hours_per_week) queries=1 columns=count:20
SELECT count(*) FROM adult WHERE hours_per_week > age;

-- title: coalesce and upper in a group
-- expect: dp view=(sex) queries=2 columns=s:25,count:20
SELECT upper(coalesce(sex, 'unknown')) AS s, count(*) FROM adult GROUP BY 1;

-- title: round of an average
-- expect: dp view=(age, sex) queries=4 columns=sex:25,avg_age:1700
SELECT sex, round(avg(age), 1) AS avg_age FROM adult GROUP BY sex;

-- title: an average cast with a type modifier
-- expect: dp view=(age, income) queries=2 columns=avg:1700
SELECT avg(age)::numeric(10,2) FROM adult WHERE income = '>50K';

-- title: arithmetic on aggregates
-- expect: dp view=(age) queries=2 columns=mean_int:20,twice:1700
SELECT sum(age) / count(*) AS mean_int, avg(age) * 2 AS twice FROM adult;

-- title: a constant label
-- expect: dp view=() queries=1 columns=label:25,count:20
SELECT 'all' AS label, count(*) FROM adult;

-- title: share of a total with a window function
-- expect: dp view=(race) queries=5 columns=race:25,pct:1700
SELECT race, count(*) * 100.0 / sum(count(*)) OVER () AS pct FROM adult GROUP BY race;

-- title: ranks over the grouped result
-- expect: dp view=(race) queries=5 columns=race:25,n:20,rank:20
SELECT race, count(*) AS n, rank() OVER (ORDER BY count(*) DESC) FROM adult GROUP BY race;

-- title: running total
-- expect: dp view=(education_num) queries=16 columns=education_num:23,sum:1700
SELECT education_num, sum(count(*)) OVER (ORDER BY education_num) FROM adult GROUP BY education_num;

-- title: ROLLUP
-- expect: dp view=(sex) queries=3 columns=sex:25,count:20
SELECT sex, count(*) FROM adult GROUP BY ROLLUP (sex);

-- title: CUBE
-- expect: dp view=(sex, income) queries=9 columns=sex:25,income:25,count:20
SELECT sex, income, count(*) FROM adult GROUP BY CUBE (sex, income);

-- title: GROUPING SETS
-- expect: dp view=(race, sex) queries=8 columns=sex:25,race:25,count:20
SELECT sex, race, count(*) FROM adult GROUP BY GROUPING SETS ((sex), (race), ());

-- title: count and average in one statement (Superset)
-- expect: dp view=(age, sex) queries=4 columns=sex:25,count:20,avg:1700
SELECT sex, count(*), avg(age) FROM adult WHERE age < 60 GROUP BY sex;

-- title: HAVING on an expression of aggregates
-- expect: dp view=(age, race) queries=10 columns=race:25,count:20
SELECT race, count(*) FROM adult GROUP BY race HAVING avg(age) > 35 AND count(*) > 100;

-- Issue 14: wrappers tools generate around one protected table (rewriter/derived.py).

-- title: a derived table that only filters
-- expect: dp view=(age) queries=1 columns=count:20
SELECT COUNT(*) FROM (SELECT * FROM adult WHERE age BETWEEN 30 AND 39) t1;

-- title: a derived table that renames and projects
-- expect: dp view=(age, sex) queries=2 columns=g:25,n:20
SELECT g, count(*) AS n FROM (SELECT sex AS g, age FROM adult WHERE age > 40) AS s WHERE age < 60 GROUP BY g;

-- title: a CTE that filters
-- expect: dp view=(race, income) queries=5 columns=race:25,count:20
WITH t AS (SELECT * FROM adult WHERE income = '>50K') SELECT race, count(*) FROM t GROUP BY race;

-- title: nested derived tables (ibis)
-- expect: dp view=(age, sex) queries=2 columns=sex:25,n:20
SELECT t1.sex, count(*) AS n FROM (SELECT t0.* FROM (SELECT * FROM adult) AS t0 WHERE t0.age > 30) AS t1 GROUP BY t1.sex;

-- title: top-k over an inner aggregate
-- expect: dp view=(race) queries=5 columns=race:25,n:20
SELECT * FROM (SELECT race, COUNT(*) AS n FROM adult GROUP BY 1) t ORDER BY n DESC LIMIT 3;

-- title: an outer filter over an inner aggregate
-- expect: dp view=(race) queries=5 columns=race:25,n:20
SELECT race, n FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) q WHERE n > 1000;

-- title: counting the groups of an inner aggregate
-- expect: dp view=() queries=0 columns=count:20
SELECT count(*) FROM (SELECT race, sex, count(*) FROM adult GROUP BY race, sex) q;

-- title: an outer computation over an inner aggregate
-- expect: dp view=(age, sex) queries=4 columns=sex:25,half:20
SELECT sex, total / 2 AS half FROM (SELECT sex, sum(age) AS total FROM adult GROUP BY sex) q;

-- Issue 14: set operations of DP aggregates (one batch, one charge).

-- title: UNION ALL of DP aggregates, one charge
-- expect: dp view=(age) queries=2 columns=who:25,count:20
SELECT 'all' AS who, count(*) FROM adult UNION ALL SELECT 'over 30', count(*) FROM adult WHERE age > 30;

-- title: UNION ALL with ORDER BY and LIMIT
-- expect: dp view=(sex, income) queries=4 columns=k:25,n:20
SELECT sex AS k, count(*) AS n FROM adult GROUP BY sex UNION ALL SELECT income, count(*) FROM adult GROUP BY income ORDER BY 2 DESC LIMIT 3;

-- title: UNION removes duplicate rows
-- expect: dp view=() queries=0 columns=sex:25
SELECT sex FROM adult GROUP BY sex UNION SELECT sex FROM adult WHERE age > 50 GROUP BY sex ORDER BY 1;

-- title: an outer ORDER BY an output alias over a derived table
-- expect: dp view=(sex) queries=2 columns=g:25,n:20
SELECT g, count(*) AS n FROM (SELECT sex AS g FROM adult) s GROUP BY g ORDER BY n;

-- title: an outer ORDER BY an output alias over an aggregate
-- expect: dp view=(race) queries=5 columns=r:25,twice:20
SELECT race AS r, n * 2 AS twice FROM (SELECT race, count(*) AS n FROM adult GROUP BY 1) t ORDER BY twice DESC LIMIT 3;

-- Issue 40: window functions of every kind over the grouped result, mode(), GROUPING(),
-- FETCH FIRST and LIMIT expressions.

-- title: lag and lead over the grouped result
-- expect: dp view=(education_num) queries=16 columns=education_num:23,n:20,prev:20,next2:20
SELECT education_num, count(*) AS n, lag(count(*)) OVER (ORDER BY education_num) AS prev, lead(count(*), 2, 0) OVER (ORDER BY education_num) AS next2 FROM adult GROUP BY education_num ORDER BY education_num;

-- title: lag with a numeric default takes the common type
-- expect: dp view=(age, sex) queries=4 columns=sex:25,lag:1700
SELECT sex, lag(avg(age), 1, 0.5) OVER (ORDER BY sex) FROM adult GROUP BY sex ORDER BY sex;

-- title: ntile, percent_rank and cume_dist
-- expect: dp view=(education_num) queries=16 columns=education_num:23,ntile:23,many:23,percent_rank:701,cume_dist:701
SELECT education_num, ntile(5) OVER (ORDER BY count(*) DESC), ntile(20) OVER (ORDER BY education_num DESC) AS many, percent_rank() OVER (ORDER BY count(*)), cume_dist() OVER (ORDER BY education_num / 4) FROM adult GROUP BY 1 ORDER BY 1;

-- title: first_value, last_value and nth_value per partition
-- expect: dp view=(race, sex) queries=10 columns=sex:25,n:20,top:25,last:20,second:20
SELECT sex, count(*) AS n, first_value(race) OVER (PARTITION BY sex ORDER BY count(*) DESC) AS top, last_value(count(*)) OVER (PARTITION BY sex ORDER BY count(*) DESC) AS last, nth_value(count(*), 2) OVER (PARTITION BY sex ORDER BY count(*) DESC) AS second FROM adult GROUP BY sex, race ORDER BY sex, n DESC;

-- title: ranking functions over a whole partition (no ORDER BY in the window: all rows peers)
-- expect: dp view=(race, sex) queries=10 columns=race:25,sex:25,cume_dist:701,percent_rank:701,rank:20,n:20
SELECT race, sex, cume_dist() OVER (PARTITION BY race), percent_rank() OVER (PARTITION BY race), rank() OVER (PARTITION BY race), count(*) AS n FROM adult GROUP BY race, sex ORDER BY n;

-- title: mode() WITHIN GROUP of a number per group
-- expect: dp view=(education_num, sex) queries=32 columns=sex:25,mode:23
SELECT sex, mode() WITHIN GROUP (ORDER BY education_num) FROM adult GROUP BY sex;

-- title: mode() WITHIN GROUP of a text column
-- expect: dp view=(race) queries=5 columns=mode:25
SELECT mode() WITHIN GROUP (ORDER BY race) FROM adult;

-- title: GROUPING() with ROLLUP
-- expect: dp view=(sex, income) queries=7 columns=sex:25,income:25,grouping:23,count:20
SELECT sex, income, GROUPING(sex, income), count(*) FROM adult GROUP BY ROLLUP (sex, income);

-- title: GROUPING() labels the totals of a CUBE
-- expect: dp view=(sex, income) queries=9 columns=sex:25,income:25,n:20
SELECT CASE WHEN GROUPING(sex) = 1 THEN 'all' ELSE sex END AS sex, CASE WHEN GROUPING(income) = 1 THEN 'all' ELSE income END AS income, count(*) AS n FROM adult GROUP BY CUBE (sex, income) ORDER BY GROUPING(sex), GROUPING(income), n;

-- title: FETCH FIRST n ROWS ONLY
-- expect: dp view=(race) queries=5 columns=race:25,count:20
SELECT race, count(*) FROM adult GROUP BY race ORDER BY count(*) DESC FETCH FIRST 3 ROWS ONLY;

-- title: OFFSET n ROWS FETCH NEXT n ROWS ONLY
-- expect: dp view=(race) queries=5 columns=race:25,count:20
SELECT race, count(*) FROM adult GROUP BY race ORDER BY count(*) DESC OFFSET 1 ROWS FETCH NEXT 2 ROWS ONLY;

-- title: LIMIT with a constant expression
-- expect: dp view=(education_num) queries=16 columns=education_num:23,count:20
SELECT education_num, count(*) FROM adult GROUP BY 1 ORDER BY 2 DESC LIMIT 2 + 3 OFFSET (1);

-- title: Metabase's cumulative sum (ROWS UNBOUNDED PRECEDING)
-- expect: dp view=(education_num) queries=16 columns=education_num:23,count:1700
SELECT "public"."adult"."education_num" AS "education_num", SUM(COUNT(*)) OVER (ORDER BY "public"."adult"."education_num" ASC ROWS UNBOUNDED PRECEDING) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."education_num" ORDER BY "public"."adult"."education_num" ASC;

-- title: a moving average and a moving count over ROWS frames
-- expect: dp view=(education_num) queries=16 columns=education_num:23,moving:1700,before:20,ahead:20
SELECT education_num, avg(count(*)) OVER (ORDER BY education_num ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS moving, count(*) OVER (ORDER BY education_num ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS before, first_value(count(*)) OVER (ORDER BY education_num ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS ahead FROM adult GROUP BY 1 ORDER BY 1;

-- title: GROUPS and RANGE frames
-- expect: dp view=(education_num) queries=16 columns=education_num:23,near:1700,last:20,rest:1700
SELECT education_num, sum(count(*)) OVER (ORDER BY education_num / 4 GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near, last_value(count(*)) OVER (ORDER BY education_num RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last, sum(count(*)) OVER (ORDER BY education_num / 4 RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS rest FROM adult GROUP BY 1 ORDER BY 1;

-- title: a SUM of NULL is NULL, known without the data (issue 41, item 5)
-- expect: dp view=() queries=1 columns=sum:20
SELECT sum(null::int) FROM adult;

-- title: a parameter inside an aggregate is bound (issue 41, item 5)
-- expect: dp view=() queries=2 columns=sum:20
-- params: [3]
SELECT sum($1::int) FROM adult;

-- title: a NULL parameter inside an aggregate: NULL in every group
-- expect: dp view=() queries=2 columns=sex:25,sum:20
-- params: [None]
SELECT sex, sum($1::int) FROM adult GROUP BY sex;

-- title: counting the groups an inner HAVING keeps (issue 41, item 5)
-- expect: dp view=(sex) queries=2 columns=count:20
SELECT count(*) FROM (SELECT sex, count(*) FROM adult GROUP BY sex HAVING count(*) > 10) t;

-- title: a condition true for every declared value asks nothing more (issue 41, item 6)
-- expect: dp view=() queries=1 columns=count:20
SELECT count(*) FROM adult WHERE sex IN ('Male', 'Female') AND age BETWEEN 17 AND 90;

-- title: every race, grouped by sex: the same question as without the condition
-- expect: dp view=(sex) queries=2 columns=sex:25,count:20
SELECT sex, count(*) FROM adult WHERE race IN ('White', 'Asian-Pac-Islander', 'Amer-Indian-Eskimo', 'Other', 'Black') GROUP BY sex;

-- title: IS NOT NULL on a column declared without NULLs
-- expect: dp view=(age) queries=2 columns=sum:20
SELECT sum(age) FROM adult WHERE race IS NOT NULL;

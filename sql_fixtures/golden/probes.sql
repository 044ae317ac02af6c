-- Zero-row probes: they return no row whatever the data, so they are answered with the
-- columns (RowDescription) and no rows. Columns: name:type_oid.

-- title: Metabase select probe
-- expect: probe _:16
SELECT TRUE AS "_" FROM "public"."adult" WHERE 1 <> 1 LIMIT 0;

-- title: Tableau WHERE 1=0 metadata
-- expect: probe age:23,workclass:25,fnlwgt:23,education:25,education_num:23,marital_status:25,occupation:25,relationship:25,race:25,sex:25,capital_gain:23,capital_loss:23,hours_per_week:23,native_country:25,income:25
SELECT * FROM adult WHERE 1=0;

-- title: Tableau LIMIT 0 metadata
-- expect: probe age:23,workclass:25,fnlwgt:23,education:25,education_num:23,marital_status:25,occupation:25,relationship:25,race:25,sex:25,capital_gain:23,capital_loss:23,hours_per_week:23,native_country:25,income:25
SELECT * FROM "public"."adult" LIMIT 0;

-- title: columns under WHERE false, including one without a domain
-- expect: probe age:23,fnlwgt:23,s:25
SELECT age, fnlwgt, sex AS s FROM adult a WHERE false;

-- title: aggregate with LIMIT 0
-- expect: probe count:20,avg:1700
SELECT count(*), avg(age) FROM adult LIMIT 0;

-- title: grouped query under a constant-false WHERE has no group
-- expect: probe sex:25,count:20
SELECT sex, count(*) FROM adult WHERE 1 = 2 GROUP BY sex;

-- title: NOT TRUE
-- expect: probe x:23
SELECT 1 AS x FROM adult WHERE NOT TRUE;

-- title: conjunction with a false constant
-- expect: probe age:23
SELECT age FROM adult WHERE 1 = 0 AND age > 30;

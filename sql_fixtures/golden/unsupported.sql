-- Every route to rows (or exact statistics) of protected table adult we could think of.
-- Each must be refused with the SQLSTATE given; none may crash the rewriter.

-- title: plain row read
-- expect: sqlstate 42501
SELECT * FROM adult;

-- title: TABLE command
-- expect: sqlstate 42501
TABLE adult;

-- title: single column read
-- expect: sqlstate 42501
SELECT age FROM adult;

-- title: Superset preview with LIMIT
-- expect: sqlstate 42501
SELECT * FROM public.adult LIMIT 100;

-- title: Metabase fingerprinting
-- expect: sqlstate 42501
SELECT "public"."adult"."age" AS "age", "public"."adult"."sex" AS "sex" FROM "public"."adult" LIMIT 10000;

-- title: three-part name row read
-- expect: sqlstate 42501
SELECT * FROM lapras_test.public.adult;

-- title: quoted row read
-- expect: sqlstate 42501
SELECT "age" FROM "public"."adult" WHERE "age" > 30;

-- title: row read under an always-true predicate
-- expect: sqlstate 42501
SELECT * FROM adult WHERE 1 = 1;

-- title: ORDER BY OFFSET row read
-- expect: sqlstate 42501
SELECT age FROM adult ORDER BY age OFFSET 5;

-- title: FOR UPDATE
-- expect: sqlstate 42501
SELECT * FROM adult FOR UPDATE;

-- title: SELECT INTO a new table
-- expect: sqlstate 42501
SELECT * INTO stolen FROM adult;

-- title: CREATE TABLE AS
-- expect: sqlstate 42501
CREATE TABLE stolen AS SELECT * FROM adult;

-- title: CREATE TEMP TABLE AS (Tableau)
-- expect: sqlstate 42501
CREATE TEMPORARY TABLE "#Tableau_1" AS SELECT age, sex FROM adult;

-- title: CREATE VIEW over the table
-- expect: sqlstate 42501
CREATE VIEW v AS SELECT * FROM adult;

-- title: CREATE MATERIALIZED VIEW
-- expect: sqlstate 42501
CREATE MATERIALIZED VIEW mv AS SELECT sex, count(*) FROM adult GROUP BY sex;

-- title: INSERT SELECT
-- expect: sqlstate 42501
INSERT INTO other SELECT * FROM adult;

-- title: INSERT into the protected table
-- expect: sqlstate 42501
INSERT INTO adult (age) VALUES (1);

-- title: UPDATE with RETURNING
-- expect: sqlstate 42501
UPDATE adult SET age = age RETURNING *;

-- title: DELETE with RETURNING
-- expect: sqlstate 42501
DELETE FROM adult WHERE age > 200 RETURNING age;

-- title: TRUNCATE
-- expect: sqlstate 42501
TRUNCATE adult;

-- title: DROP TABLE
-- expect: sqlstate 42501
DROP TABLE adult;

-- title: ALTER TABLE
-- expect: sqlstate 42501
ALTER TABLE adult ADD COLUMN x int;

-- title: COPY TO STDOUT
-- expect: sqlstate 42501
COPY adult TO STDOUT;

-- title: COPY a query
-- expect: sqlstate 42501
COPY (SELECT * FROM adult) TO STDOUT WITH (FORMAT csv);

-- title: COPY TO PROGRAM
-- expect: sqlstate 42501
COPY adult TO PROGRAM 'cat > /tmp/x';

-- title: COPY FROM into the table
-- expect: sqlstate 42501
COPY adult FROM STDIN;

-- title: DECLARE CURSOR
-- expect: sqlstate 42501
DECLARE c CURSOR FOR SELECT * FROM adult;

-- title: DECLARE binary cursor with hold
-- expect: sqlstate 42501
DECLARE c BINARY CURSOR WITH HOLD FOR SELECT age FROM public.adult;

-- title: SQL PREPARE of a row read
-- expect: sqlstate 42501
PREPARE p AS SELECT * FROM adult;

-- title: COPY of an aggregate to a file (only TO STDOUT is answered)
-- expect: sqlstate 42501
COPY (SELECT count(*) FROM adult) TO '/tmp/lapras-count.txt';

-- title: COPY of an aggregate to a program
-- expect: sqlstate 42501
COPY (SELECT sex, count(*) FROM adult GROUP BY sex) TO PROGRAM 'cat > /tmp/x' WITH (FORMAT csv);

-- title: COPY of an aggregate in a format PostgreSQL does not know
-- expect: sqlstate 22023
COPY (SELECT count(*) FROM adult) TO STDOUT (FORMAT 'CSV');

-- title: COPY of an aggregate quoting a column it does not have
-- expect: sqlstate 42703
COPY (SELECT count(*) FROM adult) TO STDOUT (FORMAT csv, FORCE_QUOTE (age));

-- title: EXPLAIN
-- expect: sqlstate 42501
EXPLAIN SELECT * FROM adult WHERE age = 30;

-- title: EXPLAIN ANALYZE of an aggregate
-- expect: sqlstate 42501
EXPLAIN ANALYZE SELECT count(*) FROM adult;

-- title: EXPLAIN (FORMAT JSON) as DBeaver sends
-- expect: sqlstate 42501
EXPLAIN (FORMAT JSON) SELECT sex, count(*) FROM adult GROUP BY sex;

-- title: subquery row read
-- expect: sqlstate 42501
SELECT * FROM (SELECT * FROM adult) AS s;

-- title: scalar subquery over the table
-- expect: sqlstate 42501
SELECT (SELECT age FROM adult LIMIT 1);

-- title: IN subquery in a catalogue query
-- expect: sqlstate 42501
SELECT relname FROM pg_class WHERE relpages IN (SELECT age FROM adult);

-- title: recursive CTE row read
-- expect: sqlstate 42501
WITH RECURSIVE r AS (SELECT age FROM adult UNION SELECT age FROM r) SELECT * FROM r;

-- title: CTE named like an unprotected table
-- expect: sqlstate 42501
WITH t AS (SELECT * FROM adult) SELECT * FROM t;

-- title: UNION of rows
-- expect: sqlstate 42501
SELECT age FROM adult UNION SELECT 1;

-- title: INTERSECT
-- expect: sqlstate 42501
SELECT age FROM adult INTERSECT SELECT 30;

-- title: self join
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age;

-- title: join with an unprotected table
-- expect: sqlstate 0A000
SELECT count(*) FROM adult a, pg_class c WHERE c.relpages = a.age;

-- title: cross join row read
-- expect: sqlstate 42501
SELECT a.* FROM pg_namespace n CROSS JOIN adult a;

-- title: LATERAL
-- expect: sqlstate 42501
SELECT * FROM pg_namespace n, LATERAL (SELECT age FROM adult LIMIT 1) s;

-- title: window function
-- expect: sqlstate 0A000
SELECT count(*) OVER () FROM adult;

-- title: MAX
-- expect: sqlstate 0A000
SELECT max(capital_gain) FROM adult;

-- title: string_agg leaks rows
-- expect: sqlstate 42501
SELECT string_agg(sex, ',') FROM adult;

-- title: array_agg leaks rows
-- expect: sqlstate 42501
SELECT array_agg(age) FROM adult;

-- title: json_agg leaks rows
-- expect: sqlstate 42501
SELECT json_agg(a) FROM adult a;

-- title: a variance of a clamped column (a sum of squares is not a sum of values)
-- expect: sqlstate 0A000
SELECT stddev(capital_gain) FROM adult;

-- title: AVG of a text column
-- expect: sqlstate 0A000
SELECT avg(sex) FROM adult;

-- title: column without a public domain
-- expect: sqlstate 0A000
SELECT count(*) FROM adult WHERE fnlwgt > 100000;

-- title: SUM of a column without a domain
-- expect: sqlstate 0A000
SELECT sum(fnlwgt) FROM adult;

-- title: GROUP BY a column without a domain
-- expect: sqlstate 0A000
SELECT fnlwgt, count(*) FROM adult GROUP BY fnlwgt;

-- title: predicate that cuts a bin
-- expect: sqlstate 0A000
SELECT count(*) FROM adult WHERE capital_gain > 500;

-- title: equality inside a wide bin
-- expect: sqlstate 0A000
SELECT count(*) FROM adult WHERE capital_gain = 2174;

-- title: GROUP BY a binned column
-- expect: sqlstate 0A000
SELECT capital_gain, count(*) FROM adult GROUP BY capital_gain;

-- title: ordering comparison on a categorical column
-- expect: sqlstate 0A000
SELECT count(*) FROM adult WHERE sex < 'M';

-- title: ungrouped column with an aggregate
-- expect: sqlstate 42803
SELECT sex, count(*) FROM adult;

-- title: star with an aggregate
-- expect: sqlstate 42803
SELECT *, count(*) FROM adult;

-- title: unknown column
-- expect: sqlstate 42703
SELECT count(*) FROM adult WHERE nosuch = 1;

-- title: unknown column in a probe
-- expect: sqlstate 42703
SELECT nosuch FROM adult WHERE 1 = 0;

-- title: quoted column with the wrong case
-- expect: sqlstate 42703
SELECT count(*) FROM adult WHERE "AGE" > 3;

-- title: wrong qualifier
-- expect: sqlstate 42703
SELECT count(*) FROM adult a WHERE b.age > 3;

-- title: text compared with a number
-- expect: sqlstate 22P02
SELECT count(*) FROM adult WHERE sex = 1;

-- title: malformed number
-- expect: sqlstate 22P02
SELECT count(*) FROM adult WHERE age > 'abc';

-- title: syntax error with a position
-- expect: sqlstate 42601
SELECT count(* FROM adult;

-- title: misspelt keyword
-- expect: sqlstate 42601
SELEC count(*) FROM adult;

-- title: regclass cast of the name
-- expect: sqlstate 42501
SELECT 'adult'::regclass::oid;

-- title: regclass cast with schema
-- expect: sqlstate 42501
SELECT 'public.adult'::regclass;

-- title: pg_relation_size of the table
-- expect: sqlstate 42501
SELECT pg_relation_size('adult');

-- title: pg_total_relation_size of the table
-- expect: sqlstate 42501
SELECT pg_total_relation_size('public.adult');

-- title: pg_table_size with quoted name
-- expect: sqlstate 42501
SELECT pg_table_size('"public"."adult"');

-- title: to_regclass then size
-- expect: sqlstate 42501
SELECT pg_relation_size(to_regclass('adult'));

-- title: query_to_xml
-- expect: sqlstate 42501
SELECT query_to_xml('select * from adult', true, false, '');

-- title: table_to_xml
-- expect: sqlstate 42501
SELECT table_to_xml('adult', true, false, '');

-- title: dblink
-- expect: sqlstate 42501
SELECT * FROM dblink('dbname=x', 'select age from adult') AS t(age int);

-- title: pg_stats filtered on the table (unparsed fallback refuses)
-- expect: sqlstate 42501
SELECT most_common_vals FROM pg_stats WHERE tablename = 'adult' AND attname = 'age' AND pg_relation_size('adult') > 0;

-- title: pg_stat_statements reads as an empty relation of its own type (the database also refuses it)
-- expect: passthrough-rewritten
SELECT query, rows FROM pg_stat_statements;

-- title: LOCK TABLE
-- expect: sqlstate 0A000
LOCK TABLE adult;

-- title: VACUUM ANALYZE (would refresh statistics)
-- expect: sqlstate 0A000
VACUUM ANALYZE adult;

-- title: GRANT
-- expect: sqlstate 42501
GRANT SELECT ON adult TO public;

-- title: DO block
-- expect: sqlstate 42501
DO $$ BEGIN PERFORM * FROM adult; END $$;

-- title: function body mentioning the table
-- expect: sqlstate 42501
CREATE FUNCTION f() RETURNS SETOF adult LANGUAGE sql AS 'SELECT * FROM adult';

-- title: multi-statement batch mixing DP and a row read
-- expect: dp, sqlstate 42501
SELECT count(*) FROM adult; SELECT * FROM adult;

-- title: comment hiding nothing
-- expect: sqlstate 42501
SELECT /* count(*) */ age FROM adult -- ;
;

-- title: unicode-escaped identifier (sqlglot cannot parse U&; the escape still names adult)
-- expect: sqlstate 42601
SELECT * FROM U&"adul\0074";

-- title: dollar-quoted string naming the table as a regclass
-- expect: sqlstate 42501
SELECT $$adult$$::regclass;

-- title: LISTEN/NOTIFY payload via a trigger (DDL on the table)
-- expect: sqlstate 42501
CREATE TRIGGER t AFTER INSERT ON adult FOR EACH ROW EXECUTE FUNCTION f();

-- title: COMMENT ON the table (DDL)
-- expect: sqlstate 42501
COMMENT ON TABLE adult IS 'x';

-- title: large object import of the data file
-- expect: sqlstate 42501
SELECT lo_import('/var/lib/postgresql/adult');

-- title: escaped string naming the table as a regclass
-- expect: sqlstate 42501
SELECT E'adul\x74'::regclass;

-- title: UESCAPE identifier
-- expect: sqlstate 42601
SELECT * FROM U&"adul!0074" UESCAPE '!';

-- title: a parameter is a value, never a relation name: a DP query
-- expect: dp
-- params: ['Female']
SELECT count(*) FROM adult WHERE sex = $1;

-- title: zero-row probe with a subquery
-- expect: sqlstate 42501
SELECT * FROM adult WHERE 1 = 0 AND age IN (SELECT 1);

-- title: probe-looking query that is not constant false
-- expect: sqlstate 42501
SELECT * FROM adult WHERE age <> age;

-- title: passthrough allowlist does not apply to protected table in a schema-qualified function
-- expect: sqlstate 42501
SELECT * FROM pg_catalog.pg_class c JOIN adult a ON true;

-- title: DO block naming no table (the SQL it builds at run time cannot be checked)
-- expect: sqlstate 42501
DO $$ BEGIN EXECUTE 'select pg_st' || 'at_get_live_tuples(1)'; END $$;

-- title: a statistics column named with Unicode escapes (sqlglot cannot read U&"...")
-- expect: sqlstate 42501
SELECT U&"reltuple\0073" FROM pg_class WHERE relname = 'adult';

-- title: pg_class named with Unicode escapes
-- expect: sqlstate 42501
SELECT c FROM U&"pg\005fclass" c;

-- title: EXPLAIN of an aggregate over a protected table (estimates come from the data)
-- expect: sqlstate 42501
EXPLAIN SELECT count(*) FROM adult;

-- title: a cursor over an aggregate that is both SCROLL and NO SCROLL
-- expect: sqlstate 42P11
DECLARE c1 SCROLL NO SCROLL CURSOR FOR SELECT count(*) FROM adult;

-- title: EXPLAIN of an aggregate behind comments and mixed case
-- expect: sqlstate 42501
/* dashboard */ ExPlAiN -- estimates
  (COSTS off) SELECT count(*) FROM "adult";

-- title: a cursor over rows of a protected table
-- expect: sqlstate 42501
DECLARE c1 CURSOR WITH HOLD FOR SELECT * FROM adult;


-- Issue 40: every refusal names the construct (in SQL words) and what is answered instead
-- (`-- message:` and `-- hint:` must be in the error's message and hint).

-- title: message: a join of the table with itself
-- expect: sqlstate 0A000
-- message: a join of protected table adult with itself
-- hint: join two aggregates of the table instead
SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age;

-- title: message: a join of the table with a catalogue table
-- expect: sqlstate 0A000
-- message: a join of protected table adult with table pg_class
SELECT count(*) FROM adult a, pg_class c WHERE c.relpages = a.age;

-- title: message: a window function over the rows
-- expect: sqlstate 0A000
-- message: window function count() over the rows (no GROUP BY)
-- hint: window functions are answered over the grouped result
SELECT count(*) OVER () FROM adult;

-- title: message: a window function the proxy does not evaluate
-- expect: sqlstate 0A000
-- message: window function foo() is not supported
-- hint: lag, lead, first_value, last_value, nth_value
SELECT race, foo(count(*)) OVER () FROM adult GROUP BY race;

-- title: message: a RANGE frame with an offset
-- expect: sqlstate 0A000
-- message: RANGE with an offset in a window frame
-- hint: write ROWS or GROUPS with an offset
SELECT sex, sum(count(*)) OVER (ORDER BY sex RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM adult GROUP BY sex;

-- title: message: FILTER in a window function
-- expect: sqlstate 0A000
-- message: FILTER in a window function
SELECT sex, count(*) FILTER (WHERE sex = 'Male') OVER () FROM adult GROUP BY sex;

-- title: message: FETCH FIRST WITH TIES
-- expect: sqlstate 0A000
-- message: FETCH FIRST ... WITH TIES
-- hint: write FETCH FIRST n ROWS ONLY, or LIMIT n
SELECT race, count(*) FROM adult GROUP BY race ORDER BY 2 FETCH FIRST 3 ROWS WITH TIES;

-- title: message: a column in LIMIT
-- expect: sqlstate 0A000
-- message: a column or an aggregate in LIMIT
SELECT count(*) FROM adult LIMIT age;

-- title: message: a cast to a type the proxy does not evaluate names the type
-- expect: sqlstate 0A000
-- message: a cast to type money
-- hint: casts to smallint, integer, bigint, numeric
SELECT count(*) FROM adult WHERE CAST(age AS money) > 1;

-- title: message: a cast of an aggregate to json
-- expect: sqlstate 0A000
-- message: a cast to type json
SELECT count(*)::json FROM adult;

-- title: message: a regular expression
-- expect: sqlstate 0A000
-- message: a regular expression
-- hint: write LIKE or ILIKE patterns
SELECT count(*) FROM adult WHERE sex ~ 'M';

-- title: message: ANY of a two-dimensional array (a list of constants is answered)
-- expect: sqlstate 0A000
-- message: ANY is not supported
-- hint: write IN (v1, v2, ...)
SELECT count(*) FROM adult WHERE age = ANY ('{{20},{30}}'::int[]);

-- title: message: COLLATE
-- expect: sqlstate 0A000
-- message: COLLATE is not supported
-- hint: drop COLLATE
SELECT count(*) FROM adult WHERE sex COLLATE "C" = 'Male';

-- title: message: an aggregate the proxy does not answer
-- expect: sqlstate 0A000
-- message: aggregate function corr()
-- hint: the aggregates answered are count(*)
SELECT corr(age, hours_per_week) FROM adult;

-- title: message: a function the proxy does not evaluate
-- expect: sqlstate 0A000
-- message: function regexp_replace() is not supported
-- hint: the functions evaluated over declared columns are
SELECT regexp_replace(sex, 'a', 'b'), count(*) FROM adult GROUP BY 1;

-- title: message: an ordering comparison of text
-- expect: sqlstate 0A000
-- message: ordering comparisons of text depend on the database's collation
-- hint: compare text with =, <>, IN or LIKE
SELECT count(*) FROM adult WHERE lower(sex) > 'm';

-- title: message: an IS test other than NULL, TRUE, FALSE
-- expect: sqlstate 0A000
-- message: the test IS
-- hint: IS [NOT] NULL
SELECT count(*) FROM adult WHERE age IS OF (integer);

-- title: message: a GROUP BY position out of the select list (PostgreSQL's 42P10)
-- expect: sqlstate 42P10
-- message: GROUP BY position 3 is not in select list
SELECT sex, count(*) FROM adult GROUP BY 3;

-- title: message: a correlated subquery
-- expect: sqlstate 0A000
-- message: a correlated subquery (it reads a.sex of the query around it)
-- hint: a derived table joined on its key
SELECT count(*) FROM adult a WHERE a.age > (SELECT avg(b.age) FROM adult b WHERE b.sex = a.sex);

-- title: message: ALL (subquery)
-- expect: sqlstate 0A000
-- message: ALL (subquery)
-- hint: write IN (subquery)
SELECT count(*) FROM adult WHERE age > ALL (SELECT avg(age) FROM adult);

-- title: message: an outer join of the table with its top-N subquery
-- expect: sqlstate 0A000
-- message: an outer or cross join of protected table adult with a subquery
-- hint: an INNER JOIN on the subquery's keys is answered
SELECT a.race, count(*) FROM adult a LEFT JOIN (SELECT race FROM adult GROUP BY race ORDER BY count(*) DESC LIMIT 3) t ON a.race = t.race GROUP BY 1;

-- title: message: reading a joined subquery's column other than its key
-- expect: sqlstate 0A000
-- message: column t.n of a subquery joined to protected table adult
SELECT a.race, t.n, count(*) FROM adult a JOIN (SELECT race, count(*) AS n FROM adult GROUP BY race) t ON a.race = t.race GROUP BY 1, 2;

-- title: message: a join with a subquery whose rows repeat the key
-- expect: sqlstate 0A000
-- message: a subquery whose rows repeat a key
-- hint: GROUP BY k
SELECT a.sex, count(*) FROM adult a JOIN (SELECT sex, race FROM adult GROUP BY sex, race) t ON a.sex = t.sex GROUP BY 1;

-- title: message: WITH RECURSIVE over aggregates
-- expect: sqlstate 0A000
-- message: WITH RECURSIVE over protected table adult
WITH RECURSIVE r(n) AS (SELECT count(*) FROM adult UNION ALL SELECT n - 1 FROM r WHERE n > 0) SELECT max(n) FROM r;

-- title: message: a row read inside a composed statement is still a row read
-- expect: sqlstate 42501
-- message: row-level access to protected table adult is refused
SELECT count(*) FROM adult WHERE age IN (SELECT age FROM adult);

-- title: message: LOCK names the command
-- expect: sqlstate 0A000
-- message: LOCK over protected table adult is not supported
LOCK TABLE adult;

-- title: message: an aggregate over released rows that is not answered
-- expect: sqlstate 0A000
-- message: aggregate function corr() over released results
-- hint: the aggregates answered over released results are
SELECT corr(n, n) FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t;

-- title: TABLESAMPLE of a protected table (a DP answer covers the whole table)
-- expect: sqlstate 0A000
SELECT count(*) FROM adult TABLESAMPLE SYSTEM (10);

-- title: TABLESAMPLE inside a derived table (folded, it would answer the whole table)
-- expect: sqlstate 0A000
SELECT count(*) FROM (SELECT * FROM adult TABLESAMPLE BERNOULLI (10) REPEATABLE (1)) t;

-- title: TABLESAMPLE inside a CTE with an alias and a filter
-- expect: sqlstate 0A000
WITH s AS (SELECT age FROM adult AS a TABLESAMPLE SYSTEM (5)) SELECT count(*) FROM s WHERE age > 30;

-- title: message: percentiles of an ARRAY of fractions
-- expect: sqlstate 0A000
-- message: percentile_cont() of an ARRAY of fractions
-- hint: write one percentile_cont(f) WITHIN GROUP (ORDER BY x) per fraction f
SELECT percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY age) FROM adult;

-- title: message: an expression where a percentile's constant fraction is expected
-- expect: sqlstate 0A000
-- message: an expression in place of a constant
SELECT percentile_disc(age / 100.0) WITHIN GROUP (ORDER BY age) FROM adult;

-- title: message: every() is PostgreSQL's bool_and(), an aggregate (not a row read)
-- expect: sqlstate 0A000
-- message: aggregate function bool_and()
-- hint: count(*) FILTER (WHERE NOT x) = 0
SELECT every(age > 16) FROM adult;

-- title: message: bool_or() says what is answered instead
-- expect: sqlstate 0A000
-- hint: count(*) FILTER (WHERE x) > 0
SELECT sex, bool_or(age > 85) FROM adult GROUP BY sex;

-- title: message: aggregates sqlglot has no node for return the rows' values
-- expect: sqlstate 42501
-- message: function jsonb_agg() returns the values of rows
SELECT jsonb_agg(age) FROM adult;

-- title: xmlagg likewise
-- expect: sqlstate 42501
-- message: function xmlagg() returns the values of rows
SELECT xmlagg(sex::xml) FROM adult;

-- title: message: a calendar from generate_series joined to the table names the function
-- expect: sqlstate 0A000
-- message: a join of protected table adult with the set-returning function generate_series()
-- hint: every declared value is returned, also those without rows
SELECT g, count(a.age) FROM generate_series(17, 20) g LEFT JOIN adult a ON a.age = g GROUP BY g;

-- title: message: a condition that cuts a declared bin names the bin and the column
-- expect: sqlstate 0A000
-- message: a condition cuts the declared bin 1 to 999 of column capital_gain
-- hint: compare it at the bin edges
SELECT count(*) FROM adult WHERE capital_gain > 500;

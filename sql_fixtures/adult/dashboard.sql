-- "Yesterday's dashboard": the statements a recurring Adult report sends every morning.
-- The demo seeds the query log with them (several runs), so that `lapras predict` finds them.
SELECT count(*) FROM adult;
SELECT sex, count(*) FROM adult GROUP BY sex;
SELECT income, count(*) FROM adult GROUP BY income;
SELECT race, count(*) FROM adult GROUP BY race;
SELECT marital_status, count(*) FROM adult GROUP BY marital_status;
SELECT relationship, count(*) FROM adult GROUP BY relationship;
SELECT sex, income, count(*) FROM adult GROUP BY sex, income;
SELECT avg(age) FROM adult;
SELECT income, avg(age) FROM adult GROUP BY income;
SELECT count(*) FROM adult WHERE age BETWEEN 17 AND 24;
SELECT count(*) FROM adult WHERE age BETWEEN 25 AND 34;
SELECT count(*) FROM adult WHERE age BETWEEN 35 AND 44;
SELECT count(*) FROM adult WHERE age BETWEEN 45 AND 54;
SELECT count(*) FROM adult WHERE age BETWEEN 55 AND 64;
SELECT count(*) FROM adult WHERE age >= 65;
SELECT count(*) FROM adult WHERE age BETWEEN 25 AND 34 AND income = '>50K';
SELECT count(*) FROM adult WHERE age BETWEEN 35 AND 44 AND income = '>50K';
SELECT count(*) FROM adult WHERE age BETWEEN 45 AND 54 AND income = '>50K';
SELECT count(*) FROM adult WHERE sex = 'Female' AND income = '>50K';
SELECT count(*) FROM adult WHERE marital_status = 'Married-civ-spouse' AND income = '>50K';

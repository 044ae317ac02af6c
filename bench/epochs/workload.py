"""The benchmark's table (its declaration and generator) and its statements.

Table ``public.events``: nine declared attributes (1,728,000,000 cells in all) of every kind the
pin maps -- integers (``age``, ``dept``), categorical text (``region``, ``status``), a numeric
column in bins (``score``), a boolean, a nullable integer (``level``), an integer in uneven
bins (``income``) and a date by month (``day``). Some values lie outside the declared domain
(``age`` 100-104, ``region`` r10, ``dept`` 50-51, ``score`` below 0 or from 100, ``status``
'?', ``day`` in 2025): the pin leaves such a row out (``dp/pin.py``), PostgreSQL's plain
``GROUP BY`` keeps it.

Rows are drawn from ``profiles`` random profiles (each fixes age, region, score, dept, income
and day) with flag, level and status drawn per row: the number of distinct value combinations
-- what both the pin and PostgreSQL's ``GROUP BY`` return -- is then at most ``profiles x 2 x
6 x 5`` whatever the number of rows (about 1.1 million for the default 20,000 profiles).
"""

from __future__ import annotations

import random

TABLE = "events"
#: The declared attributes, in table order (the plain GROUP BY uses the same columns).
ATTRIBUTES = ("age", "region", "score", "dept", "flag", "level", "status", "income", "day")
#: The marginal of the fresh answers: 100 x 10 x 50 x 2 = 100,000 cells.
BIG_MARGINAL = ("age", "region", "dept", "flag")

DECLARATION = f"""
cell_limit = 5000000

[tables.{TABLE}]
schema = "public"

[tables.{TABLE}.columns]
age = "integer"
region = "text"
score = "numeric"
dept = "integer"
flag = "boolean"
level = "integer"
status = "text"
income = "integer"
day = "date"

[tables.{TABLE}.attributes.age]
kind = "integer"
min = 0
max = 99

[tables.{TABLE}.attributes.region]
kind = "categorical"
values = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]

[tables.{TABLE}.attributes.score]
kind = "numeric"
edges = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]

[tables.{TABLE}.attributes.dept]
kind = "integer"
min = 0
max = 49

[tables.{TABLE}.attributes.flag]
kind = "boolean"

[tables.{TABLE}.attributes.level]
kind = "integer"
min = 1
max = 5
nullable = true

[tables.{TABLE}.attributes.status]
kind = "categorical"
values = ["new", "open", "closed", "void"]

[tables.{TABLE}.attributes.income]
kind = "integer"
edges = [0, 1000, 5000, 20000, 50000, 100000, 1000000]

[tables.{TABLE}.attributes.day]
kind = "date"
min = 2024-01-01
max = 2024-12-31
unit = "month"
"""


def generate_sql(rows: int, profiles: int) -> list[str]:
    """The statements that create and fill ``events`` (run as the superuser)."""
    return [
        f"DROP TABLE IF EXISTS public.{TABLE}",
        "DROP TABLE IF EXISTS public.bench_profiles",
        f"""CREATE TABLE public.bench_profiles AS
            SELECT g,
                   floor(random() * 105)::int AS age,
                   'r' || floor(random() * 10.5)::int AS region,
                   round((random() * 104 - 2)::numeric, 1) AS score,
                   floor(random() * 52)::int AS dept,
                   (floor(random() * random() * 1200) * 100)::int AS income,
                   DATE '2024-01-01' + floor(random() * 380)::int AS day
            FROM generate_series(0, {profiles - 1}) AS g""",
        f"""CREATE TABLE public.{TABLE} (
                age integer, region text, score numeric, dept integer, flag boolean,
                level integer, status text, income integer, day date)""",
        f"""INSERT INTO public.{TABLE}
            SELECT p.age, p.region, p.score, p.dept, r.u < 0.3,
                   CASE WHEN r.v < 0.1 THEN NULL ELSE 1 + floor(r.v * 5.55)::int % 5 END,
                   (ARRAY['new', 'open', 'closed', 'void', '?'])[1 + floor(r.w * 4.2)::int],
                   p.income, p.day
            FROM (SELECT floor(random() * {profiles})::int AS g, random() AS u,
                         random() AS v, random() AS w
                  FROM generate_series(1, {rows})) AS r
            JOIN public.bench_profiles AS p USING (g)""",
        "DROP TABLE public.bench_profiles",
        f"VACUUM ANALYZE public.{TABLE}",
    ]


def group_by_sql() -> str:
    """The user's alternative: PostgreSQL's own GROUP BY over the declared columns."""
    cols = ", ".join(ATTRIBUTES)
    return f"SELECT {cols}, count(*) FROM public.{TABLE} GROUP BY {cols}"


def _months(i: int) -> str:
    return f"DATE '2024-{1 + i % 12:02d}-01'"


def predicted() -> list[str]:
    """P: 100 statements over 10 marginals (1-3 attributes each; none inside another, so the
    release has 10 blocks)."""
    t = TABLE
    statuses = ("new", "open", "closed", "void")
    incomes = (1000, 5000, 20000, 50000, 100000)
    out: list[str] = []
    for i in range(10):
        lo = 5 * i
        out += [
            # (age, region)
            f"SELECT region, count(*) FROM {t} WHERE age BETWEEN {lo} AND {lo + 20 + i} "
            "GROUP BY region",
            # (age, status)
            f"SELECT count(*) FROM {t} WHERE status = '{statuses[i % 4]}' "
            f"AND age BETWEEN {lo + i % 3} AND {60 + i}",
            # (dept, score)
            f"SELECT count(*) FROM {t} WHERE dept < {5 + 4 * i} AND score >= {10 * (i % 10)}",
            # (score, flag)
            f"SELECT flag, count(*) FROM {t} WHERE score >= {10 * (i % 5)} "
            f"AND score < {10 * (i % 5) + 10 + 10 * (i // 5)} GROUP BY flag",
            # (level, status, flag)
            f"SELECT level, count(*) FROM {t} WHERE status = '{statuses[i % 4]}' "
            f"AND flag = {'true' if i < 5 else 'false'} AND level >= {1 + i % 3} GROUP BY level",
            # (day, region)
            f"SELECT count(*) FROM {t} WHERE region = 'r{i}' AND day >= {_months(i + 2)}",
            # (income, level)
            f"SELECT level, count(*) FROM {t} WHERE income >= {incomes[i % 5]} "
            f"AND income < {1000000 if i < 5 else 100000 + 0} GROUP BY level",
            # (region, status, level)
            f"SELECT status, count(*) FROM {t} WHERE region = 'r{i}' AND level = {1 + i % 5} "
            "GROUP BY status",
            # (age, day)
            f"SELECT count(*) FROM {t} WHERE age >= {18 + 4 * i} AND day < {_months(i + 1)}",
            # (income, flag, day)
            f"SELECT count(*) FROM {t} WHERE flag = {'true' if i % 2 else 'false'} "
            f"AND income < {incomes[i % 5]} AND day >= {_months(i)}",
        ]
    return out


def fresh_statements(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct COUNT / SUM statements with WHERE filters on the four attributes of
    :data:`BIG_MARGINAL` (each one's batch is over that 100,000-cell marginal)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        a = rng.randrange(0, 90)
        b = rng.randrange(a + 1, 100)
        regions = ", ".join(f"'r{r}'" for r in sorted(rng.sample(range(10), rng.randrange(1, 6))))
        d0 = rng.randrange(0, 45)
        d1 = rng.randrange(d0 + 1, 50)
        flag = rng.choice(("flag", "NOT flag", "flag IS NOT NULL"))
        where = (
            f"age BETWEEN {a} AND {b} AND region IN ({regions}) "
            f"AND dept BETWEEN {d0} AND {d1} AND {flag}"
        )
        what = rng.choice(("count(*)", "count(*)", "sum(age)", "sum(dept)"))
        sql = f"SELECT {what} FROM {TABLE} WHERE {where}"
        if sql not in seen:
            seen.add(sql)
            out.append(sql)
    return out

"""Analyst sessions over Adult and the Gowalla check-ins, for the session benchmark (issue 39).

A session is what one analyst (or one team's BI tool) sends in one epoch, in order: an
exploration that starts with overview counts, drills down by group, narrows filters, reloads
dashboards, re-asks a question (an exact repeat) and asks near-repeats with a changed constant,
mixed with the tool and analyst SQL of the corpus (``sql_fixtures/corpus``). :func:`sessions`
builds them deterministically from a seed: the scripts below choose columns, values, constants
and the order of episodes with ``numpy.random.default_rng(seed)``, never by reading the data
(the values an analyst drills into come from the declarations' public domains, favouring the
groups anyone knows are large in a census of the US, or a month the service was busy).

Each :class:`Step` names its table, its kind (what the analyst is doing), who writes the SQL,
and any setup statements (``SET TimeZone`` ...) run first on the same connection.

>>> a, b = sessions(7), sessions(7)
>>> a == b and sum(len(s.steps) for s in a) >= 400
True
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sql_fixtures.corpus import Case, load_cases

#: The kinds of step (:attr:`Step.kind`).
KINDS = (
    "overview",  # first looks: totals, counts by one column, overall statistics
    "drill",  # a group picked, broken down by another column
    "filter",  # a filter narrowed step by step
    "statistic",  # averages, spreads, percentiles by group
    "dashboard",  # a BI dashboard's charts, loaded or reloaded (reloads are exact repeats)
    "repeat",  # the same question re-asked, verbatim
    "near-repeat",  # the same question with a changed constant
    "tool",  # a tool's SQL from the corpus
    "corpus",  # an analyst's SQL from the corpus
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    sql: str
    table: str  # "adult" or "checkins"
    kind: str
    source: str  # who writes this SQL
    setup: tuple[str, ...] = ()
    #: The corpus case the step comes from, if any.
    case: str = ""


@dataclass(frozen=True, slots=True)
class Session:
    name: str
    who: str
    steps: tuple[Step, ...]

    def tables(self) -> tuple[str, ...]:
        return tuple(sorted({s.table for s in self.steps}))


# ------------------------------------------------------------------------------------------
# public facts the scripts choose from (declared domains; what anyone knows is common)

ADULT_CATS = (
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "income",
    "native_country",
)
#: Values an analyst is likely to drill into (large groups of a US census), then any value.
COMMON = {
    "workclass": ("Private", "Self-emp-not-inc", "Local-gov", "State-gov"),
    "education": ("HS-grad", "Some-college", "Bachelors", "Masters", "Assoc-voc"),
    "marital_status": ("Married-civ-spouse", "Never-married", "Divorced"),
    "occupation": ("Prof-specialty", "Craft-repair", "Exec-managerial", "Adm-clerical", "Sales"),
    "relationship": ("Husband", "Not-in-family", "Own-child", "Unmarried"),
    "race": ("White", "Black", "Asian-Pac-Islander"),
    "sex": ("Male", "Female"),
    "income": ("<=50K", ">50K"),
    "native_country": ("United-States", "Mexico", "Philippines", "Germany", "Canada"),
}
RARE = {
    "workclass": ("Federal-gov", "Self-emp-inc", "Without-pay"),
    "education": ("Doctorate", "Prof-school", "9th", "Assoc-acdm"),
    "occupation": ("Tech-support", "Protective-serv", "Farming-fishing", "Transport-moving"),
    "race": ("Amer-Indian-Eskimo", "Other"),
    "native_country": ("India", "England", "Cuba", "Jamaica", "China"),
    "marital_status": ("Separated", "Widowed"),
    "relationship": ("Wife", "Other-relative"),
}
ADULT_NUMS = ("age", "hours_per_week", "education_num")
#: Months of the check-ins' span an analyst looks at (the service grew in 2010).
MONTHS = tuple(
    dt.date(2009 + (1 + m) // 12, (1 + m) % 12 + 1, 1) for m in range(21)
)  # 2009-02 ... 2010-10


def _month_after(d: dt.date, k: int = 1) -> dt.date:
    m = d.year * 12 + d.month - 1 + k
    return dt.date(m // 12, m % 12 + 1, 1)


class _Script:
    """The state of one session being written: its steps and the random generator."""

    def __init__(self, rng: np.random.Generator, cases: Sequence[Case]) -> None:
        self.rng = rng
        self.steps: list[Step] = []
        self.cases = list(cases)
        self.used_cases: set[str] = set()

    def pick(self, seq: Sequence[str]) -> str:
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def add(self, sql: str, table: str, kind: str, source: str, **kw: object) -> None:
        self.steps.append(Step(sql=sql, table=table, kind=kind, source=source, **kw))  # type: ignore[arg-type]

    def value(self, col: str) -> str:
        rare = RARE.get(col, ())
        if rare and self.chance(0.2):
            return self.pick(rare)
        return self.pick(COMMON[col])

    def repeat(self) -> None:
        """Re-ask an earlier question of the session verbatim (recent ones more likely)."""
        if not self.steps:
            return
        n = len(self.steps)
        back = min(n, 1 + int(self.rng.geometric(0.15)))
        old = self.steps[n - back]
        self.steps.append(
            Step(
                sql=old.sql,
                table=old.table,
                kind="repeat",
                source=old.source,
                setup=old.setup,
                case=old.case,
            )
        )

    def corpus(self, prefixes: Sequence[str], table: str | None, k: int, kind: str) -> None:
        """``k`` corpus cases whose id starts with one of ``prefixes`` (over ``table``), each
        used once per session while there are unused ones."""
        pool = [
            c
            for c in self.cases
            if c.id.startswith(tuple(prefixes)) and (table is None or _table_of(c.sql) == table)
        ]
        fresh = [c for c in pool if c.id not in self.used_cases] or pool
        for _ in range(k):
            if not fresh:
                return
            c = fresh.pop(int(self.rng.integers(len(fresh))))
            self.used_cases.add(c.id)
            self.add(
                c.sql,
                _table_of(c.sql),
                kind,
                c.source.split(",")[0] or c.kind,
                setup=c.setup,
                case=c.id,
            )


def _table_of(sql: str) -> str:
    return "checkins" if "checkins" in sql.lower() else "adult"


def _q(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


# ------------------------------------------------------------------------------------------
# episodes over Adult, as a psql analyst writes them


def adult_overview(s: _Script) -> None:
    src = "psql analyst"
    s.add("SELECT count(*) FROM adult", "adult", "overview", src)
    for col in s.rng.permutation(["sex", "race", "income", "education", "marital_status"])[:3]:
        s.add(
            f"SELECT {col}, count(*) AS n FROM adult GROUP BY {col} ORDER BY n DESC",
            "adult",
            "overview",
            src,
        )
    s.add(
        "SELECT avg(age) AS avg_age, avg(hours_per_week) AS avg_hours FROM adult",
        "adult",
        "overview",
        src,
    )
    if s.chance(0.5):
        s.add("SELECT min(age), max(age) FROM adult", "adult", "overview", src)


def adult_drill(s: _Script) -> None:
    src = "psql analyst"
    a = s.pick(ADULT_CATS[:8])
    b = s.pick([c for c in ADULT_CATS[:8] if c != a])
    v = s.value(a)
    s.add(f"SELECT {a}, count(*) FROM adult GROUP BY {a} ORDER BY 2 DESC", "adult", "drill", src)
    s.add(
        f"SELECT {b}, count(*) AS n, round(avg(age), 1) AS avg_age FROM adult "
        f"WHERE {a} = {_q(v)} GROUP BY {b} ORDER BY n DESC",
        "adult",
        "drill",
        src,
    )
    if s.chance(0.6):
        w = s.value(b)
        m = s.pick(ADULT_NUMS)
        s.add(
            f"SELECT count(*), avg({m}) FROM adult WHERE {a} = {_q(v)} AND {b} = {_q(w)}",
            "adult",
            "drill",
            src,
        )
    if s.chance(0.4):
        s.add(
            f"SELECT income, count(*) FROM adult WHERE {a} = {_q(v)} GROUP BY income",
            "adult",
            "drill",
            src,
        )


def adult_narrow(s: _Script) -> None:
    src = "psql analyst"
    lo = int(s.rng.integers(18, 40))
    hi = lo + int(s.rng.integers(20, 35))
    s.add(f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {hi}", "adult", "filter", src)
    lo2, hi2 = lo + 5, hi - 5
    s.add(f"SELECT count(*) FROM adult WHERE age BETWEEN {lo2} AND {hi2}", "adult", "filter", src)
    c = s.pick(["sex", "race", "marital_status", "workclass"])
    v = s.value(c)
    s.add(
        f"SELECT count(*) FROM adult WHERE age BETWEEN {lo2} AND {hi2} AND {c} = {_q(v)}",
        "adult",
        "filter",
        src,
    )
    h = s.pick(["35", "40", "45", "50"])
    s.add(
        f"SELECT count(*), avg(hours_per_week) FROM adult WHERE age BETWEEN {lo2} AND {hi2} "
        f"AND {c} = {_q(v)} AND hours_per_week >= {h}",
        "adult",
        "filter",
        src,
    )
    if s.chance(0.5):
        s.add(
            f"SELECT income, count(*) FROM adult WHERE age BETWEEN {lo2} AND {hi2} "
            f"AND {c} = {_q(v)} GROUP BY income ORDER BY income",
            "adult",
            "filter",
            src,
        )


def adult_near_repeats(s: _Script) -> None:
    src = "psql analyst"
    form = int(s.rng.integers(4))
    start = int(s.rng.integers(25, 50))
    step = int(s.pick(["1", "5", "5", "10"]))
    for k in range(int(s.rng.integers(3, 6))):
        t = start + k * step
        if form == 0:
            sql = f"SELECT count(*) FROM adult WHERE age > {t}"
        elif form == 1:
            sql = f"SELECT avg(hours_per_week) FROM adult WHERE age >= {t}"
        elif form == 2:
            sql = f"SELECT sex, count(*) FROM adult WHERE hours_per_week > {t} GROUP BY sex"
        else:
            sql = f"SELECT income, avg(age) FROM adult WHERE education_num >= {min(16, 8 + k)} GROUP BY income"
        s.add(sql, "adult", "near-repeat", src)


def adult_statistics(s: _Script) -> None:
    src = "psql analyst"
    c = s.pick(ADULT_CATS[:8])
    m = s.pick(ADULT_NUMS)
    options = [
        f"SELECT {c}, avg({m}), stddev({m}) FROM adult GROUP BY {c} ORDER BY {c}",
        f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {m}) AS median FROM adult",
        f"SELECT {c}, percentile_disc(0.5) WITHIN GROUP (ORDER BY {m}) FROM adult GROUP BY {c}",
        f"SELECT sum(capital_gain) FROM adult WHERE {c} = {_q(s.value(c))}",
        f"SELECT {c}, sum(hours_per_week) FROM adult GROUP BY {c}",
        f"SELECT max({m}), min({m}) FROM adult WHERE {c} = {_q(s.value(c))}",
        f"SELECT avg({m}) FROM adult WHERE {c} = {_q(s.value(c))}",
    ]
    for i in s.rng.permutation(len(options))[:3]:
        s.add(options[int(i)], "adult", "statistic", src)


# ------------------------------------------------------------------------------------------
# BI dashboards over Adult (tool-generated SQL, filters clicked, reloads)


def metabase(col: str, where: str = "", measure: str = "") -> str:
    q = f'"public"."adult"."{col}"'
    agg = f'AVG("public"."adult"."{measure}") AS "avg"' if measure else 'COUNT(*) AS "count"'
    w = f" WHERE {where}" if where else ""
    return f'SELECT {q} AS "{col}", {agg} FROM "public"."adult"{w} GROUP BY {q} ORDER BY {q} ASC'


def metabase_filter(col: str, value: str) -> str:
    return f'"public"."adult"."{col}" = {_q(value)}'


def superset(col: str, where: str = "", measure: str = "") -> str:
    metric = f'AVG({measure}) AS "AVG({measure})"' if measure else "COUNT(*) AS count"
    order = f'"AVG({measure})"' if measure else "count"
    w = f" WHERE {where}" if where else ""
    return (
        f"SELECT {col} AS {col}, {metric} FROM public.adult{w} GROUP BY {col} "
        f"ORDER BY {order} DESC LIMIT 10000"
    )


def superset_big_number(where: str) -> str:
    return f"SELECT COUNT(*) AS count FROM public.adult WHERE {where} LIMIT 50000"


def tableau(col: str, where: str = "", measure: str = "") -> str:
    if measure:
        agg = f'AVG(CAST("adult"."{measure}" AS DOUBLE PRECISION)) AS "avg:{measure}:ok"'
    else:
        agg = 'SUM(1) AS "sum:Number of Records:ok"'
    w = f" WHERE ({where})" if where else ""
    return f'SELECT "adult"."{col}" AS "{col}", {agg} FROM "public"."adult" "adult"{w} GROUP BY 1'


class _Dashboard:
    """A dashboard: charts of one tool, each a function of the dashboard's filter."""

    def __init__(self, s: _Script, tool: str) -> None:
        self.tool = tool
        cols = list(s.rng.permutation(["sex", "race", "education", "income", "workclass"]))
        measure = s.pick(["hours_per_week", "age"])
        self.charts: list[Callable[[str], str]]
        if tool == "Metabase":
            self.charts = [
                lambda w, c=cols[0]: metabase(c, w),
                lambda w, c=cols[1]: metabase(c, w),
                lambda w, c=cols[2], m=measure: metabase(c, w, m),
            ]
        elif tool == "Superset":
            self.charts = [
                lambda w, c=cols[0]: superset(c, w),
                lambda w, c=cols[1], m=measure: superset(c, w, m),
                lambda w: superset_big_number(w or "age >= 18"),
            ]
        else:
            self.charts = [
                lambda w, c=cols[0]: tableau(c, w),
                lambda w, c=cols[1], m=measure: tableau(c, w, m),
                lambda w, c=cols[2]: tableau(c, w),
            ]
        self.filter = ""

    def load(self, s: _Script) -> None:
        for chart in self.charts:
            s.add(chart(self.filter), "adult", "dashboard", self.tool)

    def click(self, s: _Script) -> None:
        """The user sets the dashboard's filter (a new value or a new age range) and it reloads."""
        if s.chance(0.5):
            c = s.pick(["sex", "race", "marital_status", "income"])
            v = s.value(c)
            if self.tool == "Metabase":
                self.filter = metabase_filter(c, v)
            elif self.tool == "Superset":
                self.filter = f"{c} IN ({_q(v)})"
            else:
                self.filter = f'"adult"."{c}" = {_q(v)}'
        else:
            lo = int(s.rng.integers(20, 45))
            hi = lo + int(s.pick(["10", "15", "20"]))
            col = (
                '"public"."adult"."age"'
                if self.tool == "Metabase"
                else ("age" if self.tool == "Superset" else '"adult"."age"')
            )
            self.filter = f"{col} BETWEEN {lo} AND {hi}"
        self.load(s)


# ------------------------------------------------------------------------------------------
# episodes over the check-ins


def checkins_overview(s: _Script) -> None:
    src = "psql analyst"
    s.add("SELECT count(*) FROM checkins", "checkins", "overview", src)
    s.add(
        "SELECT hour, count(*) FROM checkins GROUP BY hour ORDER BY hour",
        "checkins",
        "overview",
        src,
    )
    s.add(
        "SELECT date_trunc('month', checkin_date) AS month, count(*) FROM checkins "
        "GROUP BY 1 ORDER BY 1",
        "checkins",
        "overview",
        src,
    )
    if s.chance(0.6):
        s.add("SELECT count(DISTINCT user_id) FROM checkins", "checkins", "overview", src)
    if s.chance(0.5):
        s.add(
            "SELECT floor(lat / 10) * 10 AS band, count(*) FROM checkins GROUP BY 1 ORDER BY 2 DESC",
            "checkins",
            "overview",
            src,
        )


def checkins_drill(s: _Script) -> None:
    src = "psql analyst"
    band = int(s.pick(["20", "30", "40", "50"]))
    s.add(
        f"SELECT hour, count(*) FROM checkins WHERE lat >= {band} AND lat < {band + 10} "
        "GROUP BY hour ORDER BY hour",
        "checkins",
        "drill",
        src,
    )
    m = MONTHS[int(s.rng.integers(8, 21))]
    s.add(
        f"SELECT floor(lon / 10) * 10 AS lon_band, count(*) FROM checkins "
        f"WHERE lat >= {band} AND lat < {band + 10} AND checkin_date >= '{m}' "
        f"AND checkin_date < '{_month_after(m)}' GROUP BY 1 ORDER BY 2 DESC",
        "checkins",
        "drill",
        src,
    )
    if s.chance(0.5):
        s.add(
            f"SELECT avg(hour), count(DISTINCT user_id) FROM checkins "
            f"WHERE lat >= {band} AND lat < {band + 10}",
            "checkins",
            "drill",
            src,
        )


def checkins_narrow(s: _Script) -> None:
    src = "psql analyst"
    i = int(s.rng.integers(6, 14))
    first, last = MONTHS[i], MONTHS[min(20, i + int(s.rng.integers(4, 8)))]
    s.add(
        f"SELECT count(*) FROM checkins WHERE checkin_date >= '{first}' AND checkin_date < '{last}'",
        "checkins",
        "filter",
        src,
    )
    mid = _month_after(first, 2)
    s.add(
        f"SELECT count(*) FROM checkins WHERE checkin_date >= '{mid}' AND checkin_date < '{last}'",
        "checkins",
        "filter",
        src,
    )
    h = int(s.rng.integers(16, 21))
    s.add(
        f"SELECT count(*) FROM checkins WHERE checkin_date >= '{mid}' AND checkin_date < '{last}' "
        f"AND hour >= {h}",
        "checkins",
        "filter",
        src,
    )
    if s.chance(0.5):  # a day-level window, as a date picker gives
        day = mid + dt.timedelta(days=int(s.rng.integers(3, 20)))
        s.add(
            f"SELECT count(*) FROM checkins WHERE checkin_date BETWEEN '{day}' "
            f"AND '{day + dt.timedelta(days=6)}'",
            "checkins",
            "filter",
            src,
        )


def checkins_near_repeats(s: _Script) -> None:
    src = "Grafana"
    i = int(s.rng.integers(8, 15))
    width = int(s.rng.integers(3, 6))
    for k in range(int(s.rng.integers(3, 6))):  # the panel's time range slides a month
        a, b = MONTHS[min(i + k, 20 - width)], MONTHS[min(i + k + width, 20)]
        s.add(
            f"SELECT date_trunc('month', checkin_date) AS time, count(*) AS value FROM checkins "
            f"WHERE checkin_date >= '{a}' AND checkin_date < '{b}' GROUP BY 1 ORDER BY 1",
            "checkins",
            "near-repeat",
            src,
        )


def checkins_statistics(s: _Script) -> None:
    src = "psql analyst"
    band = int(s.pick(["20", "30", "40", "50"]))
    options = [
        "SELECT avg(hour) FROM checkins",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY hour) FROM checkins",
        f"SELECT avg(hour), stddev(hour) FROM checkins WHERE lat >= {band}",
        "SELECT CASE WHEN lat >= 0 THEN 'north' ELSE 'south' END AS hemisphere, avg(hour) "
        "FROM checkins GROUP BY 1",
        f"SELECT avg(lat) FROM checkins WHERE hour BETWEEN {int(s.rng.integers(6, 12))} AND 18",
    ]
    for i in s.rng.permutation(len(options))[:2]:
        s.add(options[int(i)], "checkins", "statistic", src)


# ------------------------------------------------------------------------------------------
# the sessions


@dataclass(slots=True)
class _Plan:
    """How a session is written: its episodes with weights, dashboards, corpus mix."""

    episodes: list[tuple[Callable[[_Script], None], float]]
    corpus: list[tuple[tuple[str, ...], str | None, str, float]] = field(default_factory=list)
    dashboards: tuple[str, ...] = ()
    repeat_weight: float = 0.6
    reload_every: int = 14


def _write(
    name: str, who: str, plan: _Plan, openers: Sequence[Callable[[_Script], None]],
    size: int, seed: int, cases: Sequence[Case],
) -> Session:  # fmt: skip
    s = _Script(np.random.default_rng(seed), cases)
    boards = [_Dashboard(s, tool) for tool in plan.dashboards]
    for opener in openers:
        opener(s)
    for board in boards:
        board.load(s)
    since_reload = 0
    choices: list[tuple[str, object, float]] = [("episode", f, w) for f, w in plan.episodes]
    choices += [("corpus", c, c[3]) for c in plan.corpus]
    choices.append(("repeat", None, plan.repeat_weight))
    if boards:
        choices.append(("click", None, 0.8))
    weights = np.asarray([w for _, _, w in choices], dtype=np.float64)
    weights /= weights.sum()
    while len(s.steps) < size:
        kind, what, _ = choices[int(s.rng.choice(len(choices), p=weights))]
        before = len(s.steps)
        if kind == "episode":
            what(s)  # type: ignore[operator]
        elif kind == "corpus":
            prefixes, table, label, _ = what  # type: ignore[misc]
            s.corpus(prefixes, table, 1 + int(s.rng.integers(2)), label)
        elif kind == "repeat":
            s.repeat()
        else:
            board = boards[int(s.rng.integers(len(boards)))]
            board.click(s)
        since_reload += len(s.steps) - before
        if boards and since_reload >= plan.reload_every:  # a dashboard left open reloads
            boards[int(s.rng.integers(len(boards)))].load(s)
            since_reload = 0
    return Session(name, who, tuple(s.steps[:size]))


def sessions(seed: int = 20260701, *, scale: float = 1.0) -> list[Session]:
    """The benchmark's sessions (``scale`` < 1 for shorter ones), deterministic from ``seed``."""
    cases = [c for c in load_cases() if c.refused is None and not c.id.startswith("probe.")]

    def n(k: int) -> int:
        return max(12, round(k * scale))

    adult_analyst = _Plan(
        episodes=[
            (adult_drill, 1.2),
            (adult_narrow, 1.0),
            (adult_near_repeats, 0.8),
            (adult_statistics, 0.8),
        ],
        corpus=[
            (("analyst.", "compose.", "lookup."), "adult", "corpus", 0.7),
        ],
    )
    dashboards = _Plan(
        episodes=[(adult_drill, 0.4), (adult_narrow, 0.3), (adult_near_repeats, 0.3)],
        corpus=[
            (("tool.",), "adult", "tool", 1.0),
            (("compose.tableau", "compose.superset"), None, "tool", 0.2),
        ],
        dashboards=("Metabase", "Superset", "Tableau"),
        repeat_weight=0.3,
    )
    checkins = _Plan(
        episodes=[
            (checkins_drill, 1.0),
            (checkins_narrow, 1.0),
            (checkins_near_repeats, 0.7),
            (checkins_statistics, 0.6),
        ],
        corpus=[
            (("time.",), None, "tool", 1.0),
            (("binned.", "units."), None, "corpus", 0.7),
            (("analyst.checkins",), None, "corpus", 0.3),
        ],
    )
    team = _Plan(
        episodes=[
            (adult_drill, 0.6),
            (adult_statistics, 0.4),
            (checkins_drill, 0.5),
            (checkins_narrow, 0.4),
            (checkins_statistics, 0.3),
        ],
        corpus=[
            (("tool.",), "adult", "tool", 0.6),
            (("time.",), None, "tool", 0.6),
            (("analyst.", "compose."), None, "corpus", 0.5),
        ],
        dashboards=("Superset",),
        reload_every=20,
    )
    return [
        _write(
            "adult-analyst",
            "an analyst in psql exploring Adult",
            adult_analyst,
            [adult_overview],
            n(130),
            seed,
            cases,
        ),
        _write(
            "adult-dashboards",
            "Metabase, Superset and Tableau dashboards over Adult, filters clicked, reloads",
            dashboards,
            [],
            n(130),
            seed + 1,
            cases,
        ),
        _write(
            "checkins-analyst",
            "an analyst and a Grafana panel over the check-ins",
            checkins,
            [checkins_overview],
            n(120),
            seed + 2,
            cases,
        ),
        _write(
            "team",
            "a team over both tables: tool SQL, a Superset dashboard, analysts' SQL",
            team,
            [adult_overview, checkins_overview],
            n(130),
            seed + 3,
            cases,
        ),
    ]

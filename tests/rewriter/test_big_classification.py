"""Big statements: the shortcuts that keep their classification cheap give exactly what the
full path gives, refusals stay clean, and nothing classified keeps the parse tree alive.

The shortcuts (rewriter.classify ``_innocent``, guard ``_readings``, reduce
``_Masks.equal_any``) are each checked against the path they stand for, on the same inputs.
"""

from __future__ import annotations

import datetime as dt
import gc
import re
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import rewriter
from rewriter import guard
from rewriter.classify import classify_piece
from rewriter.normalise import PCmp, PLogic
from rewriter.reduce import _Masks
from rewriter.schema import schema_from_mapping
from rewriter.split import split_statements

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)

# Every kind of domain the IN-list shortcut handles, nullable, with bins wider than a value.
KINDS = schema_from_mapping(
    tomllib.loads(
        """
[tables.t.columns]
n = "integer"
d = "date"
c = "text"
b = "boolean"
[tables.t.attributes.n]
kind = "integer"
nullable = true
edges = [-5, -4, 0, 1, 2, 10, 11, 100]
[tables.t.attributes.d]
kind = "date"
nullable = true
min = 2024-01-01
max = 2024-01-20
[tables.t.attributes.c]
kind = "categorical"
nullable = true
values = ["x", "y", "z", "Zeta"]
[tables.t.attributes.b]
kind = "boolean"
nullable = true
[tables.t.views]
all = ["n", "d", "c", "b"]
"""
    ),
    "test",
)
T = KINDS.tables["t"]
VIEW = T.views[0]

VALUES = {
    "n": st.one_of(
        st.none(),
        st.integers(-8, 104),
        st.integers(-(10**30), 10**30),
        st.fractions(min_value=-8, max_value=104, max_denominator=4),
    ),
    "d": st.one_of(st.none(), st.dates(dt.date(2023, 12, 25), dt.date(2024, 1, 25))),
    "c": st.one_of(st.none(), st.sampled_from(["x", "y", "z", "Zeta", "zeta", "w", ""])),
    "b": st.one_of(st.none(), st.booleans()),
}


@st.composite
def in_lists(draw: st.DrawFn) -> tuple[str, list[object]]:
    name = draw(st.sampled_from(sorted(VALUES)))
    return name, draw(st.lists(VALUES[name], min_size=2, max_size=12))


@settings(max_examples=400, deadline=None)
@given(in_lists())
def test_an_in_list_is_reduced_as_the_or_of_its_comparisons(case: tuple[str, list[object]]) -> None:
    name, values = case
    parts = tuple(PCmp(name, "=", v) for v in values)
    masks = _Masks(VIEW, ())
    listed = masks.pred(PLogic("or", parts), T)
    # The same OR, with the first comparison wrapped so that the shortcut does not apply:
    # the comparisons' masks folded one by one.
    folded = masks.pred(PLogic("or", (PLogic("or", parts[:1]), *parts[1:])), T)
    for a, b in zip(listed, folded, strict=True):
        assert a.shape == b.shape
        assert np.array_equal(a, b), (values, listed, folded)


# -- mentions over all tokens at once ----------------------------------------------------------

TEXTS = st.lists(
    st.text(alphabet=list("adultpg_clasrel\\x0123456789fuescape+ &'\"ΣσAΑ"), max_size=14),
    max_size=6,
)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_mentions_of_all_texts_at_once_are_those_of_each_text(texts: list[str]) -> None:
    pattern = guard.name_pattern(ADULT)
    each: set[str] = set().union(*(guard.mentions([t], pattern) for t in texts))
    assert guard.mentions(texts, pattern) == each
    assert guard.mentions_statistics(texts) == any(guard.mentions_statistics([t]) for t in texts)
    assert guard.mentions_pg_class(texts) == any(guard.mentions_pg_class([t]) for t in texts)


def test_an_escape_that_does_not_decode_spoils_only_its_own_text() -> None:
    pattern = guard.name_pattern(ADULT)
    # \+ffffff is beyond Unicode: the first text has no reading with 6-digit escapes decoded,
    # the second one still has (the only one that spells the name)
    texts = ["\\+ffffff", "\\+000061dult"]
    assert guard.mentions(texts, pattern) == {"adult"}
    assert guard.mentions(["\\+ffffff \\+000061dult"], pattern) == set()  # as one text: none


def test_mentions_are_found_in_every_chunk_of_many_texts() -> None:
    """Many texts are read in chunks of guard._CHUNK characters: a word is found wherever
    it is, also in the first and last text of a chunk."""
    pattern = guard.name_pattern(ADULT)
    for word, check in (
        ("adult", lambda ts: guard.mentions(ts, pattern) == {"adult"}),
        ("\\x61dult", lambda ts: guard.mentions(ts, pattern) == {"adult"}),
        ("reltuples", guard.mentions_statistics),
        ("pg_class", guard.mentions_pg_class),
    ):
        for at in (0, 9361, 9362, 9363, 20_000, 29_999):
            texts = ["select"] * 30_000  # 7 characters each: a chunk ends after 9,363 texts
            assert not guard.mentions(texts, pattern) and not guard.mentions_statistics(texts)
            texts[at] = word
            assert check(texts), (word, at)


# -- statements that name nothing protected --------------------------------------------------


def _full_path(sql: str) -> list[rewriter.Statement]:
    return [classify_piece(p, ADULT) for p in split_statements(sql)]


SOUP = [
    "select", "1", "+", "x", "from", "t", "where", "(", ")", "'", '"', "''", "$$", "--", "/*",
    "*/", "\n", "\t", " ", "adult", "ADULT", "adul", "pg_class", "pg_", "reltuples", "uescape",
    "U&", "E'", "\\", "do", "DO", "has_table_privilege('adult', 'select')", ";", "é", "\f",
]  # fmt: skip


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SOUP), max_size=14), st.sampled_from(["", " ", "\n ", "\f"]))
def test_the_innocent_shortcut_classifies_as_the_full_path(parts: list[str], lead: str) -> None:
    sql = lead + "".join(parts)
    assert repr(rewriter.classify(sql, ADULT)) == repr(_full_path(sql))


def test_every_statistics_word_contains_a_fragment() -> None:
    """The shortcut's cheap test relies on it (guard.STAT_FRAGMENTS)."""
    for form in guard._STAT_WORD_FORMS:
        word = re.sub(r"\\w[*+]", "", form)
        assert any(f in word for f in guard.STAT_FRAGMENTS), form
    assert any(f in "pg_class" for f in guard.STAT_FRAGMENTS)


def test_a_megabyte_of_innocent_arithmetic_is_relayed_as_written() -> None:
    sql = "select 1" + "+1" * 500_000
    (st_,) = rewriter.classify(sql, ADULT)
    assert st_ == rewriter.Passthrough(sql=sql)


# -- big statements over the protected table -------------------------------------------------


def test_a_long_in_list_is_answered_as_the_short_one() -> None:
    ages = [17 + i % 74 for i in range(20_000)]
    big = "SELECT count(*) FROM adult WHERE age IN (" + ", ".join(map(str, ages)) + ")"
    small = "SELECT count(*) FROM adult WHERE age BETWEEN 17 AND 90"
    (a,) = rewriter.classify(big, ADULT)
    (b,) = rewriter.classify(small, ADULT)
    assert isinstance(a, rewriter.DPStatement) and isinstance(b, rewriter.DPStatement)
    assert a.plan is not None and b.plan is not None
    assert (a.plan.batch.matrix != b.plan.batch.matrix).nnz == 0


def test_deep_statements_are_refused_cleanly() -> None:
    deep = [
        "SELECT count(*) FROM adult WHERE age = " + "(" * 20_000 + "1" + ")" * 20_000,
        "SELECT count(*) FROM adult WHERE age = 1" + "+1" * 100_000,
        "SELECT count(*) FROM adult WHERE " + "NOT " * 20_000 + "age = 1",
    ]
    for sql in deep:
        (st_,) = rewriter.classify(sql, ADULT)
        assert isinstance(st_, rewriter.Refused), sql[:60]
        assert st_.error.sqlstate in ("42601", "0A000"), st_.error
        assert st_.error.__traceback__ is None and st_.error.__context__ is None


def _reaches_a_node(root: object) -> bool:
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, exp.Expr):
            return True
        todo.extend(gc.get_referents(obj))
    return False


def test_nothing_classified_keeps_a_parse_tree() -> None:
    cases = [
        "SELECT sex, count(*) FROM adult WHERE age IN (30, 31) GROUP BY sex ORDER BY 2 DESC",
        "SELECT avg(age) FROM adult WHERE sex = $1",
        "SELECT * FROM adult WHERE 1 = 0",
        "SELECT age FROM adult",
        "SELECT count(*) FROM adult WHERE age = 1+1",
        "SELECT relname, reltuples FROM pg_class",
        "SELECT count(*) FROM (SELECT * FROM adult) s",
    ]
    for sql in cases:
        for st_ in rewriter.classify(sql, ADULT):
            assert not _reaches_a_node(st_), sql


def test_dates_and_fractions_in_lists() -> None:
    """A spot check of the shortcut on values the fold coerces (dates as ordinals)."""
    masks = _Masks(VIEW, ())
    d = T.attributes["d"]
    t, f, m = masks.pred(
        PLogic("or", (PCmp("d", "=", dt.date(2024, 1, 3)), PCmp("d", "=", "2024-01-05"))), T
    )
    hits = np.flatnonzero(t.reshape(-1))
    assert [d.cell_value(int(c)) for c in hits] == [dt.date(2024, 1, 3), dt.date(2024, 1, 5)]
    assert not m.any() and f.reshape(-1)[-1] == 0  # the NULL cell is never false
    t, f, m = masks.pred(PLogic("or", (PCmp("n", "=", Fraction(1, 2)), PCmp("n", "=", 5))), T)
    assert not t.any() and m.reshape(-1).nonzero()[0].tolist() == [4]  # 5 cuts the bin 2..9

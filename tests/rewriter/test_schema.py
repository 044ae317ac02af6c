"""The TOML declaration: the Adult file loads, and mistakes are reported with file, key, problem."""

from __future__ import annotations

from pathlib import Path

import pytest

import rewriter
from dp.errors import DomainTooLargeError
from rewriter.schema import Kind

ROOT = Path(__file__).resolve().parents[2]


def test_adult_declaration() -> None:
    s = rewriter.load_schema(ROOT / "sql_fixtures" / "adult" / "lapras.toml")
    t = s.tables["adult"]
    assert [c for c, _ in t.columns][:3] == ["age", "workclass", "fnlwgt"]
    assert t.attributes["age"].size == 74 and t.attributes["age"].unit_bins
    assert t.attributes["native_country"].size == 42
    assert (
        t.attributes["capital_gain"].kind is Kind.INTEGER
        and not t.attributes["capital_gain"].unit_bins
    )
    assert "fnlwgt" not in t.attributes
    assert all(v.size <= s.cell_limit for v in t.views)


BASE = """
[tables.t.columns]
a = "integer"
b = "text"
[tables.t.attributes.a]
kind = "integer"
min = 0
max = 9
[tables.t.attributes.b]
kind = "categorical"
values = ["x", "y"]
[tables.t.views]
v = ["a", "b"]
"""


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not toml ===", "not valid TOML"),
        (
            BASE.replace('kind = "integer"', 'kind = "float"'),
            "tables.t.attributes.a.kind: unknown kind",
        ),
        (BASE.replace("max = 9", "max = -1"), "tables.t.attributes.a.max: must be at least min"),
        (BASE.replace("max = 9", "max = 9\nbin_width = 3"), "bin_width: must divide"),
        (BASE.replace('a = "integer"', 'a = "blob"'), "tables.t.columns.a: unknown type"),
        (BASE.replace('v = ["a", "b"]', 'v = ["a", "zz"]'), "tables.t.views.v: names zz"),
        (BASE.replace('values = ["x", "y"]', 'values = ["x", "x"]'), "values: has duplicates"),
        (
            BASE.replace('kind = "categorical"', 'kind = "integer"\nmin = 0\nmax = 1'),
            "needs an integer column type",
        ),
        (BASE + "\n[tables.t.extra]\n", "tables.t.extra: unknown key"),
        (
            '[tables.t.columns]\na = "integer"\n[tables.t.attributes]\n',
            "tables.t.attributes: declare at least one attribute",
        ),
    ],
)
def test_errors_name_file_key_problem(text: str, fragment: str) -> None:
    with pytest.raises(rewriter.ConfigError) as e:
        rewriter.parse_schema(text, "my.toml")
    assert e.value.message.startswith("my.toml: ")
    assert fragment in e.value.message
    assert e.value.sqlstate == "F0000"


def test_views_are_optional() -> None:
    """A table needs at least one attribute; views are optional (an epoch covers every
    attribute, and each statement is answered over the marginal of the columns it uses)."""
    for text in (
        BASE.replace('[tables.t.views]\nv = ["a", "b"]', ""),
        BASE.replace('v = ["a", "b"]', ""),
    ):
        t = rewriter.parse_schema(text, "my.toml").tables["t"]
        assert t.views == () and list(t.attributes) == ["a", "b"]
        assert t.domain.names == ("a", "b") and t.domain.size == 20
    s = rewriter.parse_schema(BASE.replace('[tables.t.views]\nv = ["a", "b"]', ""), "my.toml")
    [st] = rewriter.classify("SELECT b, count(*) FROM t WHERE a > 3 GROUP BY b", s)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    assert st.plan.view == "(a, b)"


def test_view_over_cell_limit() -> None:
    with pytest.raises(DomainTooLargeError) as e:
        rewriter.parse_schema("cell_limit = 15\n" + BASE, "my.toml")
    assert e.value.sqlstate == "54000" and "tables.t.views.v" in e.value.message


def test_missing_file() -> None:
    with pytest.raises(rewriter.ConfigError):
        rewriter.load_schema(ROOT / "no-such.toml")


def test_dates_and_numeric_bins() -> None:
    s = rewriter.parse_schema(
        """
[tables.t.columns]
d = "date"
x = "numeric"
[tables.t.attributes.d]
kind = "date"
min = 2020-01-01
max = 2020-12-31
unit = "month"
nullable = true
[tables.t.attributes.x]
kind = "numeric"
edges = [0, 0.5, 1]
[tables.t.views]
v = ["d", "x"]
""",
        "d.toml",
    )
    t = s.tables["t"]
    assert t.attributes["d"].size == 13 and t.attributes["x"].size == 2

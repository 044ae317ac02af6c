"""Which relations of the data database read, copy or receive rows of protected tables, as far
as the backend's own catalogue tells (docs/admin.md, "What derives from a protected table").

Two questions are asked of it:

- what a relation *reads* (:meth:`Lineage.reads`): an epoch on a declared view must spend the
  budget of every protected table the view reads, and the table of a unit reached through a
  key reads its mapping table (``proxy.epochs``);
- which relations *derive* from protected tables (:meth:`Lineage.derived`): the analysts'
  passthrough role gets no ``SELECT`` on them (``proxy.provision``), and ``lapras provision
  --check`` reports any it can read.

What is followed, from the catalogue (never from the data):

- a view's or materialised view's rewrite rule, and the relations and functions it names
  (``pg_rewrite`` and ``pg_depend``);
- a function's dependencies when PostgreSQL records them (a SQL-standard body, ``BEGIN
  ATOMIC``), and otherwise the names its body's text mentions (relations, and other functions
  called as ``name(``): a mention is taken as a read, so a comment can only make the check
  stricter;
- inheritance and partitions (``pg_inherits``): a child's rows are its parent's;
- rules and triggers on a table that write elsewhere: a relation their bodies name may
  receive the table's rows;
- a table (or materialised view, or foreign table) with every column of a protected table,
  under the same names and types: it may be a copy (``CREATE TABLE ... AS``, ``SELECT
  INTO``, a ``COPY`` round trip leave no other trace in the catalogue).

What the catalogue cannot show is the operator's duty (docs/admin.md): SQL built at run time
inside a function (``EXECUTE``), copies of some columns only, copies in another database, or
data that went out and came back by any other way.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Relations of the database outside the system schemas (tables, views, materialised views,
#: partitioned and foreign tables).
_RELATIONS = """
SELECT c.oid, n.nspname, c.relname, c.relkind::text FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%%'
"""

#: Functions outside the system schemas, with the text of their body (empty for a
#: SQL-standard body, whose dependencies are recorded instead).
_FUNCTIONS = """
SELECT p.oid, n.nspname, p.proname, l.lanname, coalesce(p.prosrc, '')
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
"""

#: ``(kind, oid, kind, oid)``: what a relation's rules and a function's recorded dependencies
#: name (``r``: a relation, ``f``: a function).
_EDGES = """
SELECT 'r', r.ev_class,
       CASE WHEN d.refclassid = 'pg_catalog.pg_class'::regclass THEN 'r' ELSE 'f' END, d.refobjid
FROM pg_catalog.pg_rewrite r
JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = r.oid
WHERE d.refclassid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
  AND d.refobjid <> r.ev_class
UNION ALL
SELECT 'f', d.objid,
       CASE WHEN d.refclassid = 'pg_catalog.pg_class'::regclass THEN 'r' ELSE 'f' END, d.refobjid
FROM pg_catalog.pg_depend d
WHERE d.classid = 'pg_catalog.pg_proc'::regclass
  AND d.refclassid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
  AND d.refobjid <> d.objid
"""

_INHERITS = "SELECT inhrelid, inhparent FROM pg_catalog.pg_inherits"
_TRIGGERS = "SELECT tgrelid, tgfoid FROM pg_catalog.pg_trigger WHERE NOT tgisinternal"
_COLUMNS = """
SELECT a.attrelid, a.attname, a.atttypid FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""

QUERIES = (_RELATIONS, _FUNCTIONS, _EDGES, _INHERITS, _TRIGGERS, _COLUMNS)

#: Languages whose ``prosrc`` is a symbol, not a body.
_COMPILED = frozenset({"c", "internal"})
_VIEWS = frozenset({"v", "m"})

Node = tuple[str, int]  # ("r", relation oid) or ("f", function oid)


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    schema: str
    name: str
    kind: str  # pg_class.relkind

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class Function:
    oid: int
    schema: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}()"


def _mention(names: Iterable[str], *, call: bool = False) -> re.Pattern[str] | None:
    """A pattern that finds any of ``names`` as a whole SQL name in a text (bare or quoted;
    ``call``: followed by ``(``). Unquoted names fold to lower case, as PostgreSQL folds them."""
    alts = sorted({n for n in names if n}, key=len, reverse=True)
    if not alts:
        return None
    body = "|".join(re.escape(n) for n in alts)
    tail = r"\s*\(" if call else ""
    return re.compile(rf'(?<![\w$])"?({body})"?(?![\w$]){tail}', re.IGNORECASE)


@dataclass(slots=True)
class Lineage:
    """A snapshot of the catalogue's relations, functions and the references between them."""

    relations: dict[int, Relation] = field(default_factory=dict)
    functions: dict[int, Function] = field(default_factory=dict)
    #: What each node reads: a view's rules, a function's dependencies and body mentions.
    refs: dict[Node, set[Node]] = field(default_factory=lambda: defaultdict(set))
    #: What each table's rules and triggers may write to.
    writes: dict[int, set[Node]] = field(default_factory=lambda: defaultdict(set))
    children: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    columns: dict[int, frozenset[tuple[str, int]]] = field(default_factory=dict)

    @staticmethod
    def of(results: Sequence[Sequence[Sequence[Any]]]) -> Lineage:
        """From the rows of :data:`QUERIES`, in order."""
        rels, funcs, edges, inherits, triggers, columns = results
        out = Lineage()
        for oid, schema, name, kind in rels:
            out.relations[int(oid)] = Relation(int(oid), str(schema), str(name), str(kind))
        bodies: dict[int, str] = {}
        for oid, schema, name, lang, src in funcs:
            out.functions[int(oid)] = Function(int(oid), str(schema), str(name))
            if str(lang) not in _COMPILED and src:
                bodies[int(oid)] = str(src)
        rel_by_name: dict[str, list[int]] = defaultdict(list)
        for r in out.relations.values():
            rel_by_name[r.name.lower()].append(r.oid)
        fn_by_name: dict[str, list[int]] = defaultdict(list)
        for f in out.functions.values():
            fn_by_name[f.name.lower()].append(f.oid)
        rel_pat, fn_pat = _mention(rel_by_name), _mention(fn_by_name, call=True)
        for oid, body in bodies.items():
            node = ("f", oid)
            if rel_pat is not None:
                for m in rel_pat.finditer(body):
                    out.refs[node].update(("r", r) for r in rel_by_name[m.group(1).lower()])
            if fn_pat is not None:
                for m in fn_pat.finditer(body):
                    out.refs[node].update(("f", f) for f in fn_by_name[m.group(1).lower()])
            out.refs[node].discard(node)
        for skind, src, dkind, dst in edges:
            s, d = int(src), int(dst)
            rel = out.relations.get(s)
            if skind == "r" and rel is not None and rel.kind not in _VIEWS:
                out.writes[s].add((str(dkind), d))  # a rule on a table: where it writes
            else:
                out.refs[(str(skind), s)].add((str(dkind), d))
        for child, parent in inherits:
            out.children[int(parent)].add(int(child))
        for rel_oid, fn in triggers:
            body_refs = out.refs.get(("f", int(fn)), set())
            out.writes[int(rel_oid)].update(n for n in body_refs if n[0] == "r")
        cols: dict[int, set[tuple[str, int]]] = defaultdict(set)
        for rel_oid, name, typ in columns:
            cols[int(rel_oid)].add((str(name), int(typ)))
        out.columns = {k: frozenset(v) for k, v in cols.items()}
        return out

    def find(self, qualified: str) -> Relation | None:
        """The relation ``schema.name`` (``public`` when unqualified), if it exists."""
        schema, _, name = qualified.rpartition(".")
        schema = schema or "public"
        for r in self.relations.values():
            if (r.schema, r.name) == (schema, name):
                return r
        return None

    def reads(self, oid: int) -> set[int]:
        """Every relation that relation ``oid`` reads, itself included: through its rules,
        the functions they call (recorded dependencies, then body text), transitively, and
        the children of every relation read."""
        seen: set[Node] = {("r", oid)}
        todo: list[Node] = [("r", oid)]
        while todo:
            node = todo.pop()
            nxt = set(self.refs.get(node, ()))
            if node[0] == "r":
                nxt |= {("r", c) for c in self.children.get(node[1], ())}
            for n in nxt - seen:
                seen.add(n)
                todo.append(n)
        return {o for k, o in seen if k == "r"}

    def derived(self, protected: Iterable[int]) -> dict[int, str]:
        """Relations that read, copy or may receive rows of the ``protected`` relations (not
        themselves among them), each with why, in words that follow "which ..."."""
        base = set(protected)
        tainted: dict[Node, str] = {("r", o): "" for o in base}
        self._spread(tainted)
        for p in base:  # then look-alike copies, and again what reads them
            wanted = self.columns.get(p, frozenset())
            rel = self.relations.get(p)
            if len(wanted) < 2 or rel is None:
                continue
            for oid, cols in self.columns.items():
                r = self.relations.get(oid)
                if r is None or r.kind == "v" or ("r", oid) in tainted or not wanted <= cols:
                    continue
                tainted[("r", oid)] = (
                    f"may be a copy of protected table {rel.qualified} (it has all of its columns)"
                )
        self._spread(tainted)
        return {o: why for (k, o), why in tainted.items() if k == "r" and o not in base}

    def _spread(self, tainted: dict[Node, str]) -> None:
        """Add to ``tainted`` (node -> why) everything that reads a tainted node, the children
        of a tainted relation and what its rules and triggers write to, until nothing more."""
        changed = True
        while changed:
            changed = False

            def mark(node: Node, why: str) -> None:
                nonlocal changed
                if node not in tainted:
                    tainted[node] = why
                    changed = True

            for node, refs in list(self.refs.items()):
                if node in tainted:
                    continue
                hit = [n for n in refs if n in tainted]
                if not hit:
                    continue
                via = [n for n in hit if n[0] == "f"]
                if node[0] == "f":
                    mark(node, "")
                elif via:
                    f = self.functions.get(via[0][1])
                    name = f.qualified if f is not None else "a function"
                    mark(node, f"reads a protected table through function {name}")
                else:
                    mark(node, "reads a protected table")
            for node in list(tainted):
                if node[0] != "r":
                    continue
                parent = self.relations.get(node[1])
                pname = parent.qualified if parent is not None else "a protected table"
                for child in self.children.get(node[1], ()):
                    mark(("r", child), f"is a partition or child table of {pname}")
                for target in self.writes.get(node[1], ()):
                    if target[0] == "r" and target[1] != node[1]:
                        mark(target, f"may receive rows of {pname} (its rules or triggers)")


def load(conn: Any) -> Lineage:
    """The lineage of the database ``conn`` (a psycopg connection) is connected to."""
    return Lineage.of([conn.execute(q).fetchall() for q in QUERIES])


async def aload(conn: Any) -> Lineage:
    """:func:`load` on an asynchronous psycopg connection."""
    results = []
    for q in QUERIES:
        cur = await conn.execute(q)
        results.append(await cur.fetchall())
    return Lineage.of(results)

import sys
from rewriter import classify, load_schema
s = load_schema("sql_fixtures/gowalla/lapras.toml")
for q in sys.argv[1:]:
    for st in classify(q, s):
        n = type(st).__name__
        print(q[:100], "->", n, getattr(getattr(st, 'error', None), 'message', ''), [ (c.name, c.type_oid) for c in getattr(st, 'columns', ())])

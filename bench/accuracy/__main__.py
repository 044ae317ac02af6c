import sys

if sys.argv[1:2] == ["statements"]:  # python -m bench.accuracy statements [...]
    from bench.accuracy.statements import main as statements_main

    raise SystemExit(statements_main(sys.argv[2:]))

if sys.argv[1:2] == ["sessions"]:  # python -m bench.accuracy sessions [...]
    from bench.accuracy.sessions import main as sessions_main

    raise SystemExit(sessions_main(sys.argv[2:]))

if sys.argv[1:2] == ["marginals"]:  # python -m bench.accuracy marginals [...]
    from bench.accuracy.marginals import main as marginals_main

    raise SystemExit(marginals_main(sys.argv[2:]))

from bench.accuracy.run import main

raise SystemExit(main())

from bench.stats.run import main

raise SystemExit(main())

from bench.accuracy.run import main

raise SystemExit(main())

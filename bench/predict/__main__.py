from bench.predict.run import main

raise SystemExit(main())

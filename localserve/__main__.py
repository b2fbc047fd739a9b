from localserve.cli import main

raise SystemExit(main())

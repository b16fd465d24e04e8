from sitebench.cli import main

raise SystemExit(main())

from diffattn.cli import main

raise SystemExit(main())

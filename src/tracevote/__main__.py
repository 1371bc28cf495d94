from tracevote.cli.main import main

raise SystemExit(main())

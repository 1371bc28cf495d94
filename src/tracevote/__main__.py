from tracevote.cli import main

raise SystemExit(main())

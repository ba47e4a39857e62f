from fleetcheck.cli import main

raise SystemExit(main())

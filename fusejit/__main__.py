"""``python -m fusejit``: the command line (see fusejit/cli.py)."""

from .cli import main

raise SystemExit(main())

"""`python -m audit.verify FILE --public-key KEY`."""

import sys

from audit.verify.cli import main

sys.exit(main())

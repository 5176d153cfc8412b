import sys

from mig.cli import main

sys.exit(main())

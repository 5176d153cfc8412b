import sys

from mig_inference.cli import main

sys.exit(main())

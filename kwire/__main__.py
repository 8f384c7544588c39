import sys

from kwire.cli import main

sys.exit(main())

import sys

from localserve.tray import main

sys.exit(main())

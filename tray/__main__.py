import sys

from localserve_tray import main

sys.exit(main())

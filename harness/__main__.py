import sys

from harness.cli import main

if __name__ == "__main__":   # not in a spawned process (it imports this module)
    sys.exit(main())

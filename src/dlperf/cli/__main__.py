"""`python -m dlperf.cli`: the `dlperf` command."""

from dlperf.cli import main

if __name__ == "__main__":
    main()

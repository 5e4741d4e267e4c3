"""`python -m concast.topologies.experiments.mtp` is `concast exp mtp`."""
import sys

from .cli import main

sys.exit(main())

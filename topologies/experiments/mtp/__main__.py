"""`python -m concast.topologies.experiments.mtp` is `concast exp mtp`."""
import sys

from .sim import main

sys.exit(main())

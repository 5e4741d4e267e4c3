"""`python -m concast.topologies.experiments.transport` is `concast exp transport`."""
import sys

from .runner import main

sys.exit(main())

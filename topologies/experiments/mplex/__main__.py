"""`python -m concast.topologies.experiments.mplex` is `concast exp mplex`."""
import sys

from .runner import main

sys.exit(main())

"""concast: programmable router middleware for in-network services.

The package's modules live in the folders the design names (setup.py maps them:
`concast.topologies` is topologies/, `concast.controller` controller/, `concast.hosts`
hosts/, `concast.vectors` tests/vectors/; this folder holds the CLI and the foundation
modules). See docs/architecture.md, "The Python project".
"""
from concast.tools import ROOT  # noqa: F401  (the project's files: a checkout or a wheel's copy)

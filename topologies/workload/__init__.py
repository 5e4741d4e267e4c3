"""Traffic for experiments on a RunningNet: web pages fetched by many clients at once
(web.py) and UDP/TCP cross traffic (cross.py), each generator one process for all hosts.

    from concast.topologies.workload import web, cross, pairs
See docs/workloads.md.
"""

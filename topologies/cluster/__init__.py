"""concast on Mininet Cluster Edition: one network over several servers (docs/cluster.md).

servers.py   emulated servers on one machine (namespaces + own sshd), for tests
links.py     links between servers: VXLAN (one VNI per link), SSH tunnel as fallback
"""

"""What a concast network is, below everything that builds or programs one: node and
interface names (`naming`), the topology model (`model`) and the address plan derived from
it (`addressing`). The data planes (concast.controller) read these; the networks
(concast.topologies) make them."""

"""concast.hosts: the Python side of hostd, the per-host concast agent.

    from concast.hosts import Client, aggregate
    with Client(net.hostd_socket("rx")) as rx:
        rx.install_spec(7, "build/mergespecs/sum.wasm")
        rx.subscribe(7, port=5000)
        for ev in rx.events(timeout=2):
            print(aggregate.decode(bytes.fromhex(ev["payload"])))

- client.py:    Client, the JSON-lines protocol of hostd's API socket (docs/hostd.md)
- aggregate.py: the payload of the bundled aggregate specs (sum, count, min, max)
- locate.py:    which socket belongs to a host or router of a running network
- capture.py:   waiting until a sender's multiplex flow captures
- ctp.py:       the host transport's C ABI through ctypes (CTP composites)
- mtp.py:       MTP transactions (MtpServer, MtpClient) through the same C ABI
"""
from concast.hosts.client import Client, HostdError  # noqa: F401
from concast.hosts import aggregate  # noqa: F401

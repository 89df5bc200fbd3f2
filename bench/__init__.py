"""edgebus's load generator and side-by-side comparison with mosquitto.

``python -m bench`` (``make bench``) is the entry point; docs/performance.md explains
the scenarios and how to read the report. The modules, one job each:

- ``frames``: MQTT frames encoded once; packet counting by fixed headers (pure)
- ``client``: blocking CONNECT / SUBSCRIBE handshakes on raw sockets
- ``brokers``: mosquitto and edgebus launchers on free loopback ports
- ``lifetime``: started processes die with the harness
- ``procstat``: RSS and CPU readings from /proc
- ``errors``: the harness's exceptions
- ``loadgen``: throughput runs with publisher and subscriber processes
- ``latency``: end-to-end latency at a steady rate
- ``idle``: broker memory per idle connection
- ``scenarios``: the scenarios, their metrics and targets
- ``runner``: interleaved runs over rounds, medians
- ``report``: the table and the JSON document
- ``bench_stream``: the stream log's cost on the broker, and gateway -> Parquet rows/s
"""

__all__: list[str] = []

"""Local SIMULATOR of the Google Cloud TPU, Cloud Quotas, Secret Manager and Cloud Logging REST APIs (no
Google project is contacted).

`GcpSimulator` serves, on one 127.0.0.1 port, the subset of `tpu.googleapis.com`,
`cloudquotas.googleapis.com`, `secretmanager.googleapis.com` and `logging.googleapis.com` that the bot
uses, in the exact JSON shapes the client libraries expect, so the REAL clients can be pointed at it by
changing only the endpoint (`ops.gcp.google.tpu_v2alpha1(url)`, `ops.gcp.google.tpu_v2(url)`,
`ops.gcp.google.cloud_quotas(url)`, `ops.gcp.google.secret_manager(url)`,
`ops.gcp.google.cloud_logging(url)`).
The world comes from a scenario's `google` section (see `sim/scenarios/default.yaml`).

Layout, one module per concern:

    api.py        error envelope, time formats, paging, request bodies (shared by every API)
    world.py      the state (`World`: zones, queued resources, nodes, operations, secrets, logs) and its
                  lifecycle on the simulated clock; the scenario keys it accepts
    tpu.py        TPU v2alpha1/v2: JSON rendering, request parsing, handlers, routes
    quotas.py     Cloud Quotas quotaInfos
    secrets.py    Secret Manager secrets and versions
    logging.py    Cloud Logging entries.list (paging, read quota)
    logentry.py   the stored LogEntry and its JSON
    logfilter.py  the Logging query language
    loggen.py     generated log entries (noise, real case texts, large streams)
    server.py     `GcpSimulator`: HTTP server, simulated clock, faults, test controls

To serve another method: add a handler `(world, match, query, body) -> dict` to the API's module and a row
to its `ROUTES`; the handler reads or changes the `World` under its lock and returns a JSON-able dict or
raises `ApiError`.
"""

from sim.gcp.server import GcpSimulator

__all__ = ["GcpSimulator"]

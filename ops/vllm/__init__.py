"""The vLLM server on the TPU VM: its HTTP endpoints (`server`), where it is (`endpoint`), its container over
SSH (`ssh`, `container`, `remote_commands`: the only commands the bot runs there), its `/metrics` and their
history in the state store, SLO rules, benchmarks, the watcher that turns a check into alerts, and the
startup script that deploys it. It may import `ops.tpu`, `ops.gcp`, `ops.store`, `ops.alerts`,
`ops.diagnosis` and the pure helpers of `ops`; never `bot` or `llm`.
"""

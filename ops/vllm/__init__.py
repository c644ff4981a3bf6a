"""The vLLM server on the TPU VM: where it is (`endpoint`: the endpoint in use, from the state just read, and
the one last used that is gone) and how to talk to it (`server`: the HTTP client of its endpoints, who
answers on its port), SSH to the VM with the only commands the bot runs there
(`ssh`) and its container driven through them (`container`), the container's `docker run` that the bot and
the startup script share (`dockerrun`), its `/metrics` and their history in the state store, SLO rules,
benchmarks, the watcher that turns a check into alerts, and the startup script that deploys it. It may
import `ops.tpu`, `ops.gcp`, `ops.store`, `ops.alerts`, `ops.diagnosis` and the pure helpers of `ops`; never
`bot` or `llm`.
"""

"""Commands: the registry of every command with its parameters and role (`registry`), the `Context` a handler
receives and the progress message it may update (`context`), and the runner that checks who may run what
(`Authorizer`), executes a command after the ack on its worker pool, confirms changes, turns an `OpsError`
into an answer and delivers it (`runner`, `workers`). It may import `bot.config`, `bot.services` (each
deployment's backends, the fleet), `bot.observability`, `bot.slack` (render, gateway), `ops` and
`llm.redact`; it reaches handlers only through the registry they declare themselves on.
"""

"""Commands: the registry of every command with its parameters and role (`registry`), who may run what
(`auth`), the `Context` a handler receives, and the runner that executes a command after the ack on its
worker pool, confirms changes, turns an `OpsError` into an answer and delivers it (`runner`, `progress`,
`workers`). It may import `bot.config`, `bot.deployments`, `bot.services`, `bot.observability`, `bot.slack`
(render, gateway), `ops` and `llm.redact`; it reaches handlers only through the registry they declare
themselves on.
"""

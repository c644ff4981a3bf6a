"""What a chat question is about and what it asks for: pure logic over the question, its thread and the
names the bot knows (no I/O, no Slack calls). `bot.handlers.chat` fetches the facts these decide on.

- `subjects`: what the question is about and where its facts are read. The queued resources, nodes and
  deployments it names (typos and unknown names are said, never replaced), the thread's subject, the time
  window and the kinds of facts asked for; what each fact and tool result is about (`llm.grounding.Scope`),
  where its vLLM, container and logs are read, and what a tool called without a subject reads.
- `asks`: what the question asks the bot to do, and what the bot did before it. Whether the asker asked for
  a change, the one command that makes it (built from the registry, offered behind a Review button) and the
  words it did not act on; text in logs, tool results or other people's messages that addresses the
  assistant (commands, tool calls, "ignore the above"), reported and never acted on; the commands run in the
  conversation and how each ended, from the audit trail.

May import: `bot.commands.registry` (the registry), `ops.store.state` (audit entries), `ops.tpu.model` (the
zone rule), `ops.linear` (RE2), `llm.grounding` (the scope the check of the answer holds it to), the
standard library.
"""

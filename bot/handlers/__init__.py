"""Command handlers. Importing this package declares every command on `bot.commands.registry.registry`.

Modules are imported in this order because `help` lists commands in the order they were declared.
"""

import importlib

MODULES = (
    "help",
    "tpu",
    "lifecycle",
    "capacity",
    "cost",
    "admin",
    "vllm",
    "bench",
    "gemma",
    "chat",
    "logs",
    "alerts",
)

for _module in MODULES:
    importlib.import_module(f"bot.handlers.{_module}")

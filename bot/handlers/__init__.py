"""Command handlers. Importing this package declares every command on `bot.commands.registry`."""

from bot.handlers import help, tpu, vllm

__all__ = ["help", "tpu", "vllm"]

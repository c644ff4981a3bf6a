"""A local SIMULATOR of a vLLM OpenAI-compatible server (no model, no TPU): for the demo and the tests.

It answers on a real TCP port with the same shapes as `vllm serve` (see docs/vllm.md §1
and §2): `GET /health` (empty body, 200 or 503), `GET /version`, `GET /v1/models` (ModelCard with
`max_model_len` and `permission`), `POST /v1/chat/completions` (JSON or SSE stream,
`stream_options.include_usage`, `max_tokens` -> finish_reason "length", HTTP 400 with vLLM's context-length
message) and `GET /metrics` in
vLLM's current metric names (`vllm/v1/metrics/loggers.py`), which follow the server's life: they advance
with the requests it serves, `vllm:num_requests_running` and `vllm:kv_cache_usage_perc` are those of the
requests running now (the KV-cache blocks they hold; 0 when idle), and a restart of the API server
(`restart_process`, called when its container starts again) starts every counter at 0, as a new process's
prometheus_client registry does.

The simulator has no model and no real tokenizer, but counts prompts the way a real tokenizer and chat
template do (`count_text_tokens`, `count_chat_tokens`): every digit and punctuation mark is a token (Gemma's
SentencePiece splits digits), a word is a token per 6 letters, each message adds its template markers and the
tools' JSON schemas are part of the prompt. `POST /tokenize` returns that count, as vLLM's does. The
generated text is canned.

On engine death the API server stops within `engine_death_exit_s` seconds (connections refused; a linked
HostSimulator's container exits), as vLLM's does unless `VLLM_KEEP_ALIVE_ON_ENGINE_DEATH` is set
(vllm/envs.py; vllm/entrypoints/launcher.py shuts the server down when the engine client has errored;
vLLM's tests/entrypoints/openai/test_shutdown.py expects connection errors). The scenario key
`keep_alive_on_engine_death: true` keeps it answering 503/500 instead.

Scenario keys (the `vllm` section of a scenario file; defaults in `DEFAULTS`):
    model             served model name (the `id` in /v1/models and the `model_name` metrics label)
    max_model_len     context window in tokens
    version           the string `GET /version` returns
    latency_s         seconds added before every response (`set_latency` changes it)
    itl_s             seconds between generated tokens
    slow_latency_s    extra seconds per response in "slow" mode
    api_key           if set, `/v1/...` requires `Authorization: Bearer <key>` (else 401), like `--api-key`
    error_shape       "nested" (`{"error": {...}}`, newer vLLM) or "flat" (`{"object": "error", ...}`, older)
    served_requests   requests already "served" at start, so /metrics starts with plausible history
    prefix_cache_hit_rate  hit rate of the pre-start history and the background traffic (0..1)
    background_rps    other clients' requests per second of the simulator's clock (the demo's simulated
                      clock), recorded in /metrics at each scrape while the server is ready (0: none)
    block_size, num_gpu_blocks   shown in `vllm:cache_config_info`
    boot_s            seconds the "booting" mode refuses connections before turning ready
    keep_alive_on_engine_death  true: the API server stays up after the engine dies
                      (vLLM's VLLM_KEEP_ALIVE_ON_ENGINE_DEATH)
    engine_death_exit_s  seconds between the engine's death and the API server's exit
    tool_calling      true: the server runs with `--enable-auto-tool-choice --tool-call-parser gemma4`, so a
                      request with `tools` gets OpenAI `tool_calls` (the tool picked by keyword rules, see
                      `TOOL_KEYWORDS`), and once a `tool` message answered it, a final text answer; false:
                      `tool_choice: "auto"` (explicit, or implied by `tools`) is refused with vLLM's HTTP 400
                      `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`
                      ("none", "required" and a named tool still work, as in vLLM)

Controls (thread-safe, callable while serving): `set_mode("ready" | "engine-dead" | "slow" | "booting" |
"wedged")`, `set_latency(seconds)`, `fail_next(path_pattern, status, count=1)`, `script_chat(turns)` (the next
chat completions answer with these tool calls and texts, in order, instead of the keyword rules), and two that
change only what /metrics reports (SIMULATED load, nothing waits): `set_reported_latency(seconds)` adds to the
TTFT (hence the end-to-end latency) recorded for each request from then on, as if the engine were that much
slower, without the test having to wait; `set_waiting(n)` shows `n` requests waiting to be scheduled.
"booting" closes the port (connection refused, as a real `vllm serve` that is still loading weights and
compiling) for `boot_s` seconds, then listens again in mode "ready" (docs/vllm.md §1.1: there is no "warming
up" HTTP status).

Layout: `server.py` (VllmSimulator: state, modes, controls, request validation, generation), `api.py` (the
HTTP API), `model.py` (canned answers, tool calls, scripted turns, error texts), `tokens.py` (token counting),
`metrics.py` (the Prometheus metrics).
"""

from sim.vllm.server import VllmSimulator

__all__ = ["VllmSimulator"]

"""The contract between the simulators and the real services: every limit `sim/` enforces, the public
source it follows, the simulator test proving the limit and the product test proving the bot handles it.

A limit may be relaxed only by a scenario that tests the product without it (`SlackSimulator.relax`,
`keep_alive_on_engine_death`, `docker_group`); the tests below run with every limit on.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import pytest


class Limit(NamedTuple):
    behaviour: str
    source: str
    sim_test: str  # module::function
    product_test: str


SIM = "tests.integration.test_sim_limits"
E2E = "tests.e2e.test_limits_handled"
OPS = "tests.integration.test_limits_handled_ops"

CONTRACT: tuple[Limit, ...] = (
    Limit(
        "Slack: posting, uploading and reading a thread need channel membership (not_in_channel, "
        "channel_not_found; a user id opens the app DM)",
        "docs.slack.dev/reference/methods/chat.postMessage (Errors); docs.slack.dev/reference/scopes/"
        "chat.write.public",
        f"{SIM}::test_slack_posting_needs_membership",
        f"{E2E}::test_console_shows_not_in_channel_guidance_in_an_uninvited_channel",
    ),
    Limit(
        "Slack: progress messages refused in an uninvited channel are named, the answer comes through the "
        "response_url",
        "docs.slack.dev/reference/methods/chat.postMessage (Errors); docs.slack.dev/interactivity/"
        "handling-user-interaction (response_url)",
        f"{SIM}::test_slack_posting_needs_membership",
        f"{E2E}::test_streamed_answer_in_an_uninvited_channel_arrives_with_the_lost_progress_named",
    ),
    Limit(
        "Slack: no answer is lost in an uninvited channel: DM fallback without a response_url",
        "docs.slack.dev/reference/methods/chat.postMessage (channel: a user id posts in the app DM)",
        f"{SIM}::test_slack_posting_needs_membership",
        f"{E2E}::test_reply_without_response_url_falls_back_to_a_dm",
    ),
    Limit(
        "Slack: alerts to an alert channel the bot was not invited to are reported, not silent",
        "docs.slack.dev/reference/methods/chat.postMessage (Errors: not_in_channel)",
        f"{SIM}::test_slack_posting_needs_membership",
        f"{E2E}::test_alerts_say_when_the_alert_channel_was_not_joined",
    ),
    Limit(
        "Slack: a response_url takes 5 posts within 30 minutes (404 used_url / expired_url)",
        "docs.slack.dev/interactivity/handling-user-interaction (Responding to interactions)",
        f"{SIM}::test_slack_response_url_takes_five_posts_within_30_minutes",
        f"{E2E}::test_spent_response_url_falls_back_to_the_channel",
    ),
    Limit(
        "Slack: a trigger_id opens one view within 3 s (expired_trigger_id, exchanged_trigger_id)",
        "docs.slack.dev/reference/methods/views.open (Errors); docs.slack.dev/interactivity/"
        "handling-user-interaction",
        f"{SIM}::test_slack_trigger_id_opens_one_view_within_3_seconds",
        f"{E2E}::test_token_form_opens_within_the_trigger_window_while_workers_are_busy",
    ),
    Limit(
        "Slack: conversations.replies pages (limit, cursor, has_more) and returns edited text",
        "docs.slack.dev/reference/methods/conversations.replies; docs.slack.dev/apis/web-api/pagination",
        f"{SIM}::test_slack_replies_pages_and_returns_edited_text",
        f"{E2E}::test_thread_history_is_read_from_the_newest_end_with_edits",
    ),
    Limit(
        "Slack: cumulative block text (msg_blocks_too_long), empty text, button text <= 75, fields and "
        "context elements <= 10, view blocks <= 100 and titles <= 24",
        "slack_sdk/models/blocks (the *_max_length constants); slackapi/bolt-js#2509",
        f"{SIM}::test_slack_block_limits",
        f"{E2E}::test_long_reply_stays_within_the_cumulative_block_limit",
    ),
    Limit(
        "TPU: spot preemption goes ACTIVE -> SUSPENDING -> SUSPENDED (initiator SERVICE), the node deleted",
        "cloud.google.com/tpu/docs/queued-resources (states); cloud.google.com/tpu/docs/spot",
        f"{SIM}::test_tpu_spot_preemption_suspends_and_deletes_the_node",
        f"{OPS}::test_preemption_as_google_does_it_alerts_and_drops_the_endpoint",
    ),
    Limit(
        "TPU: reset is refused from SUSPENDED (only FAILED); the way out is delete and create",
        "cloud.google.com/tpu/docs/queued-resources (SUSPENDED: resources deleted)",
        f"{SIM}::test_tpu_reset_only_from_failed",
        f"{E2E}::test_preempted_spot_is_shown_and_reset_is_refused_with_the_alternative",
    ),
    Limit(
        "TPU: a create over the zone quota is refused at once (Quota '...' exhausted. Limit N in zone Z)",
        "cloud.google.com/tpu/docs/quota; cloud.google.com/tpu/docs/request-using-flex-start (preemptible "
        "quota)",
        f"{SIM}::test_tpu_create_over_the_zone_quota_is_refused_at_once",
        f"{OPS}::test_capacity_search_moves_past_a_zone_without_preemptible_quota",
    ),
    Limit(
        "Cloud Quotas: a QuotaInfo's default dimension (empty dimensions) covers its applicable locations",
        "cloud.google.com/docs/quotas/reference/rest/v1/DimensionsInfo",
        f"{SIM}::test_cloud_quotas_default_dimension",
        f"{E2E}::test_zones_count_the_default_quota_dimension",
    ),
    Limit(
        "Cloud Logging: regular expressions are RE2 (no lookaround, no backreferences)",
        "cloud.google.com/logging/docs/view/logging-query-language#regular-expressions",
        f"{SIM}::test_logging_regex_is_re2_and_page_size_not_negative",
        f"{E2E}::test_a_filter_the_real_api_rejects_is_a_clear_error",
    ),
    Limit(
        "Cloud Logging: a negative pageSize is rejected; equal timestamps are ordered by insertId",
        "cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list (pageSize, orderBy)",
        f"{SIM}::test_logging_ties_are_ordered_by_insert_id",
        f"{SIM}::test_logging_regex_is_re2_and_page_size_not_negative",  # ops.gcp.cloudlogs never sends one
    ),
    Limit(
        "vLLM: on engine death the API server stops (connections refused, container exits) unless "
        "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH",
        "vllm/envs.py (VLLM_KEEP_ALIVE_ON_ENGINE_DEATH); vllm/entrypoints/launcher.py; vLLM tests/"
        "entrypoints/openai/test_shutdown.py",
        f"{SIM}::test_vllm_api_server_exits_after_engine_death",
        f"{E2E}::test_engine_death_shows_as_refused_and_exited",
    ),
    Limit(
        "vLLM: a real tokenizer counts the chat template and the tools (POST /tokenize)",
        "vllm/entrypoints/openai/protocol.py (TokenizeChatRequest, TokenizeResponse)",
        f"{SIM}::test_vllm_tokenize_counts_template_and_tools",
        f"{OPS}::test_agent_fits_a_long_thread_into_the_context",
    ),
    Limit(
        "vLLM: without /tokenize the bot's estimate is never below the tokenizer",
        "llm/client.py (estimate_chat_tokens)",
        f"{SIM}::test_vllm_tokenize_counts_template_and_tools",
        f"{OPS}::test_estimate_is_never_below_the_tokenizer",
    ),
    Limit(
        "Docker: docker restart resets RestartCount",
        "moby/moby daemon/start.go (ResetRestartManager(true))",
        f"{SIM}::test_docker_restart_resets_restart_count",
        f"{OPS}::test_ssh_layer_with_sudo_reads_status_logs_and_the_reset_restart_count",
    ),
    Limit(
        "Docker: vLLM logs to stdout (tracebacks to stderr)",
        "vllm/logger.py (DEFAULT_LOGGING_CONFIG: stream ext://sys.stdout)",
        f"{SIM}::test_vllm_logs_go_to_stdout",
        f"{OPS}::test_ssh_layer_with_sudo_reads_status_logs_and_the_reset_restart_count",
    ),
    Limit(
        "Docker: the daemon socket needs the docker group or sudo; sudo -n needs NOPASSWD",
        "docs.docker.com/engine/install/linux-postinstall; sudo(8) -n",
        f"{SIM}::test_docker_socket_and_sudo_permissions",
        f"{OPS}::test_ssh_layer_names_docker_socket_and_sudo_permission_errors",
    ),
    Limit(
        "Docker: gcplogs writes a container line to the log gcplogs-docker-driver on gce_instance, as "
        "jsonPayload {instance, container (labels in metadata), message}, with no severity",
        "moby/moby daemon/logger/gcplogs/gcplogging.go; docs.docker.com/engine/logging/drivers/gcplogs",
        "tests.integration.test_container_logs::test_the_simulator_writes_gcplogs_shape",
        "tests.integration.test_container_logs::test_errors_of_a_node_are_read_at_their_level_and_diagnosed",
    ),
    Limit(
        "Slack: apps.connections.open takes only the app-level token, and only for an app with Socket Mode "
        "on (socket_mode_not_enabled, not_allowed_token_type)",
        "docs.slack.dev/reference/methods/apps.connections.open; docs.slack.dev/reference/methods/"
        "apps.manifest.create (Errors: socket_mode_not_enabled)",
        "tests.e2e.test_slack_modes::"
        "test_an_app_from_the_socket_manifest_opens_a_connection_and_one_from_the_http_manifest_does_not",
        "tests.e2e.test_slack_modes::test_serve_in_socket_mode_refuses_an_app_with_socket_mode_off",
    ),
)


def _resolve(ref: str) -> object:
    module, _, name = ref.partition("::")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("limit", CONTRACT, ids=[limit.behaviour[:60] for limit in CONTRACT])
def test_every_limit_names_its_source_and_existing_tests(limit: Limit) -> None:
    assert limit.source
    assert callable(_resolve(limit.sim_test)), limit.sim_test
    assert callable(_resolve(limit.product_test)), limit.product_test

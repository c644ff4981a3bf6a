"""llm.redact: every secret kind is masked, ordinary operational text is left alone."""

from __future__ import annotations

import pytest

from llm.redact import KINDS, redact

# Synthetic secrets in the real formats (none of them is a live credential).
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
SLACK_BOT = "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-" + "1234567890-1234567890-1234567890123-0123456789abcdef0123456789abcdef"
SLACK_APP = "xapp-" + "1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef"
GOOGLE_KEY = "AIza" + "SyA1234567890abcdefghijklmnopqrstuv"
PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dV"
)
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"

CORPUS = [
    # (text, kind, the secret part that must disappear)
    (f"docker run -e HF_TOKEN={HF} vllm/vllm-tpu:gemma4", "hf_token", HF),
    (f"huggingface-cli login --token {HF}", "hf_token", HF),
    (f"SLACK_BOT_TOKEN={SLACK_BOT}", "slack_token", SLACK_BOT),
    (f"auth.test with token {SLACK_USER} failed", "slack_token", SLACK_USER),
    (f"socket mode app token {SLACK_APP}", "slack_token", SLACK_APP),
    ("xoxa-2-1234567890-abcdefabcdef and xoxr-1234567890-abcdefabcd", "slack_token", "abcdefabcdef"),
    ("xoxs-1234567890-1234567890-abcdefabcdef", "slack_token", "abcdefabcdef"),
    ("SLACK_SIGNING_SECRET=8f742231b10e8888abcd99yyyzzz85a5", "slack_signing_secret", "8f742231b10e8888"),
    ('signing_secret: "0123456789abcdef0123456789abcdef"', "slack_signing_secret", "0123456789abcdef"),
    (
        f"curl 'https://generativelanguage.googleapis.com/v1/models?key={GOOGLE_KEY}'",
        "google_api_key",
        GOOGLE_KEY,
    ),
    (f"{PEM}\n", "private_key", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"),
    (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}", "private_key", "VJTUt9Us8cKjMzEfYyjiWA4R4"),
    (
        '{"type": "service_account", "private_key_id": "abc", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + PEM_BODY.replace("\n", "\\n")
        + '\\n-----END PRIVATE KEY-----\\n", "client_email": "sa@p.iam.gserviceaccount.com"}',
        "private_key",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    ),
    ("Authorization: Bearer ya29.a0AfH6SMBx-3kq_Zt9example.token", "bearer_token", "ya29.a0AfH6SMBx"),
    (
        "curl -H 'authorization: bearer sk-local-0123456789abcdef' http://127.0.0.1:8000/v1/models",
        "bearer_token",
        "sk-local-0123456789abcdef",
    ),
    ("postgresql://bot:s3cr3t-Pa55@db.internal:5432/chatops", "url_password", "s3cr3t-Pa55"),
    ("https://user:hunter2@proxy.example.com:3128/", "url_password", "hunter2"),
    ("VLLM_API_KEY=sk-abcdef0123456789", "api_key", "sk-abcdef0123456789"),
    ('{"api_key": "0123456789abcdef"}', "api_key", "0123456789abcdef"),
    ("GET /callback?token=eyJhbGciOiJIUzI1NiJ9.payload.sig&x=1", "jwt", "eyJhbGciOiJIUzI1NiJ9"),
    ("DB_PASSWORD: correct-horse-battery", "password", "correct-horse-battery"),
    ("password=hunter2 user=bot", "password", "hunter2"),
    ("OAUTH_CLIENT_SECRET=GOCSPX-abcdefghijkl", "secret", "GOCSPX-abcdefghijkl"),
    # Dict and JSON reprs: vLLM logs its `non-default args` as a Python dict (`--api-key` is a list there).
    (
        "INFO 05-02 10:00:00 [utils.py:326] non-default args: {'model_tag': 'google/gemma-4-31B-it', "
        "'api_key': ['sk-Zx81pQ7mN2vB4cX9'], 'tensor_parallel_size': 8}",
        "api_key",
        "Zx81pQ7mN2vB4cX9",
    ),
    ("non-default args: {'api_key': 'sk-Zx81pQ7mN2vB4cX9'}", "api_key", "Zx81pQ7mN2vB4cX9"),
    ('{"api_key": "sk-Zx81pQ7mN2vB4cX9", "model": "m"}', "api_key", "Zx81pQ7mN2vB4cX9"),
    ("curl -H api-key=q7Zx81pQ7mN2vB4cX9 http://10.0.0.5:8000/v1/models", "api_key", "q7Zx81pQ7mN2vB4cX9"),
    ("{'hf_token': 'abcdefghijklmnopqrstuvwxyzab', 'revision': None}", "token", "abcdefghijklmnopqrstuvwxyz"),
    ("headers={'Authorization': 'sk-Zx81pQ7mN2vB4cX9', 'Accept': '*/*'}", "authorization", "Zx81pQ7mN2vB4c"),
    ('{"Authorization": "Basic dXNlcjpodW50ZXIy"}', "basic_auth", "dXNlcjpodW50ZXIy"),
    ("{'authorization': 'Bearer sk-Zx81pQ7mN2vB4cX9'}", "bearer_token", "Zx81pQ7mN2vB4cX9"),
    ("Authorization: Bearer abc12", "authorization", "abc12"),
    # A password holding `@`: everything up to the last `@` before the host is the password.
    ("postgresql://user:p@ss@host/db", "url_password", "ss@host"),
    ("postgresql+psycopg://bot:p@ss@w0rd@db.internal:5432/chatops", "url_password", "w0rd"),
]


@pytest.mark.parametrize(
    ("text", "kind", "secret"), CORPUS, ids=[f"{i}-{c[1]}" for i, c in enumerate(CORPUS)]
)
def test_each_kind_is_masked(text: str, kind: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


def test_every_kind_is_in_the_corpus() -> None:
    from tests.unit.test_redact_corpus import SECRETS

    assert {kind for _, kind, _ in CORPUS + SECRETS} == set(KINDS)


ORDINARY = [
    "commit 3f6a050e1c2d4b5a69788796a5b4c3d2e1f00112 (HEAD -> main)",
    "Serving google/gemma-4-31B-it with max_model_len 16384 on v6e-8 in us-east5-a",
    'INFO:     10.128.0.5:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 11-29 12:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s",
    "2026-04-28T14:17:50.089230833+08:00 (APIServer pid=1) ERROR 04-28 14:17:50 [serving_chat.py:257]",
    "'max_tokens' or 'max_completion_tokens' is too large: 8192. max_tokens=512, num_tokens: 40",
    "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-693b313c-3a360d925a720ea7)",
    "E0118 22:42:45.737331   20084 tpu_pjrt_client.cc:1889] TpuClient::AllocateBuffer returning error",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "https://huggingface.co/google/embeddinggemma-300m/resolve/57c266a740f537b4dc058e1b0cda161fd15afa75/.gitattributes",
    "Use a Bearer token from Secret Manager; hf_hub_download failed; the token is stored as hf-token",
    "projects/demo-project/locations/us-east5-a/queuedResources/gemma4-qr at 127.0.0.1:8000",
    "[EID: 0x3ee569ef3539e788] operation-1783693569476-656428598c851-2ace3015-8507cb0a",
    # Unset secrets, names of secrets and refusals stay readable.
    "non-default args: {'api_key': None, 'hf_token': None, 'allowed_origins': ['*']}",
    "{'api_key': [], 'ssl_keyfile': None}",
    "'api_key': ['$VLLM_API_KEY']",
    "authorization: denied for U0VIEWER01 (needs the operator role)",
    "Authorization: Bearer [REDACTED:bearer_token]",
    "mailto:someone@example.com and https://host.example.com:8443/path",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_idempotent_and_empty() -> None:
    text = " ".join(t for t, _, _ in CORPUS)
    once = redact(text)
    assert redact(once) == once
    assert redact("") == ""
    assert "REDACTED:REDACTED" not in once

"""llm.redact against a corpus of secrets in real formats and of look-alikes that must come out unchanged.

Every secret below is synthetic (made for this test in the provider's format); none is a live credential.
"""

from __future__ import annotations

import pytest

from llm.redact import KINDS, redact
from ops.vllm.deploy import StartupConfig, startup_script

A36 = "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
HEX32 = "0123456789abcdef0123456789abcdef"
HEX64 = HEX32 * 2

SECRETS: list[tuple[str, str, str]] = [
    # (text, kind, the secret part that must disappear)
    ("curl -H 'x: y' -d token=ya29.a0AfB_byC3xample-Access_Tok3n", "google_access_token", "a0AfB_byC3xample"),
    (
        "got ya29.c.b0Aaekm1KexampleAccessToken_123 from the metadata server",
        "google_access_token",
        "b0Aaekm1",
    ),
    ("refresh_token 1//0gExampleRefreshToken-abcdefGHIJ", "google_access_token", "0gExampleRefresh"),
    ("SLACK_REFRESH=xoxe-1-My0xLTEyMzQ1Njc4OTAtMTIzNDU2Nzg5MDEyMy1hYmNkZWY", "slack_token", "My0xLTEy"),
    ("rotating token xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAtMTIzNDU2", "slack_token", "Mi0yLTEy"),
    ("xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token", "AbCdEfGhIjKl"),
    ("xoxp-1234567890-1234567890-1234567890123-" + HEX32, "slack_token", HEX32),
    ("xapp-1-A0123456789-1234567890123-" + HEX32, "slack_token", HEX32),
    ("xoxc-1234567890-1234567890-abcdefabcdef", "slack_token", "abcdefabcdef"),
    (
        "webhook https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/aBcDeFgHiJkLmNoPqRsTuVwX",
        "slack_token",
        "aBcDeFgHiJkLmNoPqRsTuVwX",
    ),
    ("GITHUB_TOKEN=ghp_" + A36, "github_token", A36),
    ("git clone https://x-access-token:ghs_" + A36 + "@github.com/o/r", "url_password", A36),
    ("Authorization: token gho_" + A36, "github_token", A36),
    ("glpat-aBcDeFgHiJkLmNoPqRsT12 in .netrc", "gitlab_token", "aBcDeFgHiJkLmNoPqRsT12"),
    ("glptt-" + "a1" * 20, "gitlab_token", "a1" * 20),
    ("AKIAIOSFODNN7EXAMPLE is the key id", "aws_key", "IOSFODNN7EXAMPLE"),
    ("ASIAY34FZKBOKMUTVV7A temporary", "aws_key", "Y34FZKBOKMUTVV7A"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "api_key", "wJalrXUtnFEMI"),
    ('aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "aws_key", "wJalrXUtnFEMI"),
    ("AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEXAMPLEsessiontoken", "token", "IQoJb3JpZ2luX2VjEXAMPLE"),
    ("Authorization: Basic dXNlcjpodW50ZXIyLWV4YW1wbGU=", "basic_auth", "dXNlcjpodW50ZXIy"),
    ("authorization=basic YWRtaW46c2VjcmV0", "basic_auth", "YWRtaW46c2VjcmV0"),
    ("http://:pw1234secret@10.0.0.5:8000/v1/models", "url_password", "pw1234secret"),
    ("redis://:s3cr3tPass@cache:6379/0", "url_password", "s3cr3tPass"),
    ("VLLM_BASE_URL=http://user:password123@10.0.0.2:8000", "url_password", "password123"),
    ("mysql://root:toor-example@db:3306/x", "url_password", "toor-example"),
    ("mongodb+srv://u:Pw-Example-9@cluster0.example.net/db", "url_password", "Pw-Example-9"),
    ("postgresql+psycopg://bot:p%40ss-word@db.internal/chatops", "url_password", "p%40ss-word"),
    ('{"body": "{\\"password\\": \\"hunter2 two words\\"}"}', "password", "hunter2 two words"),
    ('{\\"api_key\\": \\"abc123def456ghi\\"}', "api_key", "abc123def456ghi"),
    ('PASSWORD="correct horse battery staple"', "password", "horse battery"),
    ("password='pa ss word example'", "password", "ss word"),
    ("db password: correct horse battery staple", "password", "horse battery"),
    ('passphrase = "open sesame please"', "password", "sesame"),
    ("mysql --password hunter2example -h db", "password", "hunter2example"),
    ('mysql --password "two words here"', "password", "two words"),
    ("vllm serve m --api-key sk-local-abcdef123456", "api_key", "sk-local-abcdef123456"),
    ("hf_" + "AbCdEfGhIjKlMnOpQrStUv is a 22-character token", "hf_token", "AbCdEfGhIjKlMnOp"),
    ("HUGGING_FACE_HUB_TOKEN=hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567", "hf_token", "aBcDeFgHiJkL"),
    ("export HF_TOKEN=hf_Ab12Cd34Ef56Gh78Ij90Kl", "hf_token", "Ab12Cd34Ef56"),
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    (
        "OPENAI_KEY sk-proj-abc" + "A1b2C3d4E5f6G7h8I9j0" + "T3BlbkFJ" + "K1l2M3n4O5p6Q7r8S9t0",
        "openai_key",
        "T3BlbkFJ",
    ),
    ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_key", "4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "SG." + "aBcDeFgHiJkLmNoPqRsTuV" + "." + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefg",
        "sendgrid_key",
        "aBcDeFgHiJkLmNoPqRsTuV",
    ),
    ("twilio SK" + HEX32, "twilio_key", HEX32),
    ("//registry.npmjs.org/:_authToken=npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "npm_token", "npm_aBcDeF"),
    ("pypi-AgEIcHlwaS5vcmc" + "A" * 70, "pypi_token", "A" * 70),
    (
        "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.aBcDeFgHiJkLmNoPqRsTuVwXyZ0",
        "discord_token",
        "aBcDeFgHiJkLmNoPqRsTuVwXyZ0",
    ),
    ("bot 123456789:AAHaBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "telegram_token", "AAHaBcDeFgHiJkLmNoPq"),
    (HEX32 + "-us6 mailchimp", "mailchimp_key", HEX32),
    ("AccountKey=" + "aB3+" * 22, "azure_storage_key", "aB3+aB3+aB3+"),
    ("sq0csp-" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefgh", "square_secret", "aBcDeFgHiJkLmNoP"),
    ("cloudant_password = '" + HEX64 + "'", "cloudant_key", HEX64),
    ("softlayer_api_key = " + "a1b2c3d4" * 8, "softlayer_key", "a1b2c3d4" * 8),
    ('ibm_cos_hmac_secret_access_key = "' + HEX32 + HEX32[:16] + '"', "ibm_cos_key", HEX32),
    ("OAUTH_CLIENT_SECRET=GOCSPX-aBcDeFgHiJkLmNoPqRsTuVw", "google_client_secret", "aBcDeFgHiJkLmNoPqRsTuVw"),
    (
        '"client_secret": "GOCSPX-1a2B3c4D5e6F7g8H9i0J1k2L"',
        "google_client_secret",
        "1a2B3c4D5e6F7g8H9i0J1k2L",
    ),
    ("AIza" + "SyA1234567890abcdefghijklmnopqrstuv", "google_api_key", "SyA1234567890abcdef"),
    ("SLACK_SIGNING_SECRET=8f742231b10e8888abcd99yyyzzz85a5", "slack_signing_secret", "8f742231b10e8888"),
    ("Authorization: Bearer ya29-not-google-but-a-bearer_tok3n", "bearer_token", "not-google-but"),
    ("X-Api-Key: 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "api_key", "9f8e7d6c5b4a3928"),
    ("secret_key = 'django-insecure-8f7e6d5c4b3a2910'", "api_key", "django-insecure"),
    ("apikey=AbC123dEf456GhI789", "api_key", "AbC123dEf456GhI789"),
    ("VLLM_API_KEY: 'sk abc 123 with spaces'", "api_key", "abc 123"),
    ("connected using token Zx81kLmP0qRsT2uVwXyZ3abC", "token", "Zx81kLmP0qRsT2uVwXyZ3abC"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "private_key",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
]

LOOK_ALIKES: list[str] = [
    'HF_TOKEN="$(gcloud secrets versions access latest --secret=hf-token --project=demo-project)"',
    "gcloud secrets versions access latest --secret=hf-token --project=demo-project",
    "HF_TOKEN_SECRET=hf-token",
    "projects/demo-project/secrets/hf-token/versions/3",
    ":white_check_mark: <@U0ADMIN01> stored a new Hugging Face token: "
    "`projects/demo-project/secrets/hf-token/versions/3`.",
    "token: projects/demo-project/secrets/hf-token/versions/4",
    "docker run -d --name vllm-gemma4 --env HF_TOKEN vllm/vllm-tpu:gemma4",
    "export HF_TOKEN",
    'if [ -z "$HF_TOKEN" ]; then',
    "TOKEN=${HF_TOKEN:-}",
    "password=$DB_PASSWORD",
    'api_key="${VLLM_API_KEY}"',
    "commit 3f6a050e1c2d4b5a69788796a5b4c3d2e1f00112 (HEAD -> main)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "cache key 9f86d081884c7d659a2feaa0c55ad015",
    "max_tokens=512, num_tokens: 40, max_completion_tokens=8192",
    "Engine 000: Avg prompt throughput: 1234.5 tokens/s, KV cache usage: 93.1%, Prefix cache hit rate: 41.0%",
    "huggingface_hub.errors.GatedRepoError: hf_hub_download failed; set HF_HUB_ENABLE_HF_TRANSFER",
    "operation-1783693569476-656428598c851-2ace3015-8507cb0a",
    "request 123e4567-e89b-12d3-a456-426614174000 (Request ID: Root=1-693b313c-3a360d925a720ea7)",
    "gcloud compute tpus queued-resources create gemma4-qr --zone=us-east5-a --accelerator-type=v6e-8 "
    "--runtime-version=v2-alpha-tpuv6e --node-id=gemma4-qr --metadata-from-file=startup-script=startup.sh",
    "--secret-id=hf-token --data-file=-",
    "roles/secretmanager.secretAccessor on projects/demo-project/secrets/hf-token",
    "tpu-chatops startup: reading secret hf-token failed (attempt 2 of 5)",
    "tokenizer=google/gemma-4-31B-it --tool-call-parser gemma4 --max-model-len 16384",
    "Authorization header missing; 401 Unauthorized",
    "https://huggingface.co/google/gemma-4-31B-it/resolve/main/config.json",
    "http://10.128.0.5:8000/v1/models at 2026-11-29T14:05:00Z",
    "PASSWORD_FILE=/run/secrets/db-password",
    "the secret hf-token has no enabled versions",
    "Use a Bearer token from Secret Manager; the token is stored as hf-token",
    "E0118 22:42:45.737331 20084 tpu_pjrt_client.cc:1889] TpuClient::AllocateBuffer returning error",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
]


@pytest.mark.parametrize(
    ("text", "kind", "secret"), SECRETS, ids=[f"{i}-{s[1]}" for i, s in enumerate(SECRETS)]
)
def test_each_secret_is_masked_with_its_kind(text: str, kind: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out, out
    assert f"[REDACTED:{kind}]" in out, out


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_survive_byte_for_byte(text: str) -> None:
    assert redact(text) == text


def test_corpus_sizes_and_kinds() -> None:
    assert len(SECRETS) >= 60 and len(LOOK_ALIKES) >= 30
    kinds = {kind for _, kind, _ in SECRETS}
    assert kinds <= set(KINDS)
    assert set(KINDS) - kinds <= {"private_key", "slack_signing_secret", "secret", "authorization"}


def test_the_generated_startup_script_is_untouched() -> None:
    script = startup_script(StartupConfig(project="demo-project"))
    assert "--secret=hf-token" in script and '"$(' in script
    assert redact(script) == script


def test_secrets_inside_a_long_log_are_each_masked_and_the_rest_kept() -> None:
    lines = [text for text, _, _ in SECRETS]
    kept = LOOK_ALIKES[:10]
    out = redact("\n".join(kept + lines))
    assert out.split("\n")[: len(kept)] == kept
    for _, _, secret in SECRETS:
        assert secret not in out

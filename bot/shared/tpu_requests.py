"""What a queued resource to create is made of: the /tpu create arguments, and the spec built from them and
the settings (the startup script that serves vLLM, the bot's label, the bot's public SSH key for SSH_USER in
the node's `ssh-keys` metadata: docs/ssh.md). /tpu create, /tpu find, /tpu ensure and
recovery all build their requests here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from bot.commands.context import Context
from bot.config import Settings
from bot.slack.render import human_duration
from ops.errors import BadInput
from ops.tpu.model import FLEX_START_MAX_RUN, CreateSpec, ssh_keys_entry
from ops.tpu.ownership import MANAGED_BY, MANAGED_BY_KEY
from ops.vllm import deploy

MODEL_FLAGS = ("flex_start", "spot", "on_demand", "reserved")


@dataclass(frozen=True)
class CreateArgs:
    """The arguments of /tpu create, as parsed (None: use the setting's default)."""

    name: str
    type_: str | None
    zone: str | None
    flex_start: bool
    max_run: timedelta | None
    spot: bool
    on_demand: bool
    reserved: bool
    valid_until: timedelta | None
    runtime: str | None
    model: str | None
    tp: int | None
    max_model_len: int | None
    allow_second: bool = False

    @property
    def provisioning(self) -> str:
        """flex-start (the default), spot, on-demand or reserved."""
        chosen = [flag for flag in MODEL_FLAGS if getattr(self, flag)]
        return (chosen[0] if chosen else "flex_start").replace("_", "-")


def create_spec(ctx: Context, args: CreateArgs) -> tuple[CreateSpec, deploy.StartupConfig]:
    """The queued resource `args` asks for, filled in from the settings, and the vLLM startup it runs.

    Returns:
        (the CreateSpec to send, without ownership labels; the StartupConfig its startup script serves).

    Raises:
        BadInput: --max-run over flex-start's 7-day limit, or given for another provisioning model; the
            SSH key cannot be read (`ops.tpu.model.load_key`).
    """
    settings = ctx.services.settings
    max_run = args.max_run
    if args.provisioning == "flex-start":
        max_run = max_run or timedelta(hours=4)
        if max_run > FLEX_START_MAX_RUN:
            raise BadInput(
                f"--max-run {human_duration(max_run)} is over flex-start's 7-day limit", "use 7d or less"
            )
    elif max_run is not None:
        raise BadInput("--max-run applies to --flex-start only", "drop --max-run, or use --flex-start")
    startup = startup_config(
        settings, model=args.model, tensor_parallel_size=args.tp, max_model_len=args.max_model_len
    )
    spec = CreateSpec(
        name=args.name,
        node_id=f"{args.name}-node"[:63],
        zone=args.zone or settings.tpu_zones[0],
        accelerator_type=args.type_ or settings.tpu_accelerator_type,
        runtime_version=args.runtime or settings.tpu_runtime_version,
        provisioning_model=args.provisioning,
        max_run_duration=max_run,
        valid_until=args.valid_until,
        startup_script=deploy.startup_script(startup),
        labels={MANAGED_BY_KEY: MANAGED_BY},
        service_account=settings.tpu_service_account,
        ssh_keys=ssh_keys_entry(settings.ssh_key_path, settings.ssh_user) if settings.ssh_key_path else "",
    )
    return spec, startup


def startup_config(
    settings: Settings,
    *,
    model: str | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
) -> deploy.StartupConfig:
    """What the startup script (and the GKE manifest) serves, from the settings: the one place they meet, so
    the container the VM runs is the one `/vllm status|logs|restart` act on (VLLM_CONTAINER) and the API key
    the bot sends is the one vLLM reads on the VM (VLLM_API_KEY_SECRET).

    Args:
        settings: the deployment's settings.
        model, tensor_parallel_size, max_model_len: /tpu create's overrides; None: the setting.

    Raises:
        BadInput: a value fails `deploy.StartupConfig`'s validation.
    """
    return deploy.StartupConfig(
        project=settings.gcp_project,
        model=model or settings.vllm_model,
        image=settings.vllm_image,
        tensor_parallel_size=tensor_parallel_size or settings.vllm_tensor_parallel_size,
        max_model_len=max_model_len or settings.vllm_max_model_len,
        port=settings.vllm_port,
        hf_token_secret=settings.hf_token_secret,
        container_name=settings.vllm_container,
        api_key_secret=settings.vllm_api_key_secret,
    )


def default_create_args(name: str) -> CreateArgs:
    """/tpu create NAME with every option left to the settings (flex-start, 4 h)."""
    return CreateArgs(name, None, None, True, None, False, False, False, None, None, None, None, None)

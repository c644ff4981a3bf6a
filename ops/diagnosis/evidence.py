"""What an evidence line names, checked by its kind before a fix says it.

A fault family's wordings capture, with named groups, the thing an error is about when the line names it:
the repository of a Hugging Face 401/403/404 (`model`, or the local directory given as the model), the
image of a docker pull (`image`, with `image_registry` and `image_tag` when the registry's URL carries them
apart), the zone and accelerator type of a TPU API create error (`zone`, `accelerator_type`), the node of a
TPU API error (`node`), the host of an SSH error (`host`), the port of a bind error (`port`), a Secret
Manager secret (`secret`), the model a request asked for (`requested_model`). Where the field is also one
of the deployment's (`FixFacts`: model, image, zone, accelerator type), the evidence's value wins when the
fix is filled (`ops.diagnosis.families.figures`): an operator who follows the fix acts on what failed, not
on what the deployment would have used.

Log lines are hostile text. Each value is checked against its kind's rule before it enters a conclusion
or a fix: a value that breaks the rule is dropped, and with it the deployment's value of that field (the
evidence named something else; saying the deployment's value would contradict it). The rules admit no
blank, quote or shell metacharacter, and `fill` shell-quotes every value it puts inside a code span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ops.linear import LinearPattern, linear

__all__ = ["DEPLOYMENT_FIELDS", "KINDS", "checked", "named_fields"]

# Hugging Face repo id, "name" or "namespace/name": huggingface_hub's validate_repo_id
# (https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/utils/_validators.py): word
# characters, "-" and ".", at most 96 each, starting and ending with a word character; no "--" or "..".
_REPO_PART = r"[A-Za-z0-9](?:[\w.-]{0,94}\w)?"
_REPO_ID = linear(rf"^(?:{_REPO_PART}/)?{_REPO_PART}$")
# Docker image reference [registry[:port]/]path[:tag][@sha256:digest]: the distribution/reference grammar
# (https://github.com/distribution/reference/blob/main/reference.go), registry host case-insensitive.
_IMAGE = linear(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]{1,5})?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
_TAG = linear(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # the tag part of the same grammar
_REGISTRY = linear(r"^[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]{1,5})?$")  # its registry host[:port]
# Docker Hub's registry hosts: an image there is named without them, as docker prints it
# (https://docs.docker.com/reference/cli/docker/image/pull/#pull-from-a-different-registry).
_DOCKER_HUB = ("registry-1.docker.io", "docker.io", "index.docker.io")
# Compute Engine zone, e.g. us-east5-a (https://cloud.google.com/compute/docs/regions-zones).
_ZONE = linear(r"^[a-z]{2,12}-[a-z]{2,16}[0-9]{1,2}-[a-z]$")
# TPU API acceleratorType, e.g. v6e-8, v5litepod-16 (https://cloud.google.com/tpu/docs/system-architecture-tpu-vm).
_ACCELERATOR = linear(r"^v[0-9]{1,2}[a-z]{0,8}-[0-9]{1,5}$")
# A TPU node id: an RFC 1035 label, the TPU API's rule for node and queued-resource ids.
_NODE = linear(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
# An SSH host: a DNS name or an IPv4 address, or an IPv6 address (RFC 1123, RFC 4291 text forms).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = linear(rf"^(?:{_LABEL}(?:\.{_LABEL})*|[0-9A-Fa-f:.]{{2,45}})$")
_PORT = linear(r"^[1-9][0-9]{0,4}$")
# Secret Manager secret id (https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create).
_SECRET = linear(r"^[A-Za-z0-9_-]{1,255}$")
# A docker container name: moby's RestrictedNameChars, [a-zA-Z0-9][a-zA-Z0-9_.-]+
# (https://github.com/moby/moby/blob/master/daemon/names/names.go).
_CONTAINER = linear(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,127}$")
# A served model name a request asked for: a repo id or any --served-model-name without blanks or quotes.
_SERVED_NAME = linear(r"^[A-Za-z0-9][\w./:-]{0,199}$")


def _rule(pattern: LinearPattern, *, runs: bool = True) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return bool(pattern.fullmatch(value)) and (runs or ("--" not in value and ".." not in value))

    return check


# The Hub's URLs put datasets and Spaces under these prefixes (https://huggingface.co/docs/hub/api): a line
# naming https://huggingface.co/datasets/ORG/NAME names no model.
_NOT_MODEL_NAMESPACES = ("datasets", "spaces")


# vLLM's --model also takes a local directory (https://docs.vllm.ai/en/latest/cli/serve.html): an absolute
# path of the same characters, without "..".
_LOCAL_PATH = linear(r"^(?:/[\w.-]+)+/?$")
_PATH_MAX = 1024


def _model(value: str) -> bool:
    if value.startswith("/"):
        return len(value) <= _PATH_MAX and bool(_LOCAL_PATH.fullmatch(value)) and ".." not in value
    return _rule(_REPO_ID, runs=False)(value) and value.split("/", 1)[0] not in _NOT_MODEL_NAMESPACES


def _port(value: str) -> bool:
    return bool(_PORT.fullmatch(value)) and int(value) <= 65_535


KINDS: dict[str, Callable[[str], bool]] = {
    "model": _model,
    "image": _rule(_IMAGE),
    "image_tag": _rule(_TAG),
    "image_registry": _rule(_REGISTRY),
    "zone": _rule(_ZONE),
    "accelerator_type": _rule(_ACCELERATOR),
    "node": _rule(_NODE),
    "host": _rule(_HOST),
    "port": _port,
    "secret": _rule(_SECRET),
    "requested_model": _rule(_SERVED_NAME),
    "container": _rule(_CONTAINER),
}
"""Template field -> whether a value captured from a log is of its kind (sources beside each rule)."""

DEPLOYMENT_FIELDS = ("model", "image", "zone", "accelerator_type")
"""The fields of KINDS that `FixFacts` also gives: the evidence's value replaces the deployment's."""


def checked(extracted: Mapping[str, str]) -> dict[str, str]:
    """The figures of one match with every value of a KINDS field checked.

    Args:
        extracted: named groups of the wordings that matched (`Match.values`), raw log text.

    Returns:
        The same figures without the KINDS values that break their rule; `image_registry` and
        `image_tag` (a registry URL's parts) are joined to the image they belong to ("us-docker.pkg.dev"
        + "p/serving/vllm-tpu" + "gemma4" -> "us-docker.pkg.dev/p/serving/vllm-tpu:gemma4"; Docker Hub's
        host and its "library/" namespace dropped, as docker prints the name) and not returned alone.
    """
    out = {k: v for k, v in extracted.items() if k not in KINDS or KINDS[k](v)}
    tag, registry = out.pop("image_tag", None), out.pop("image_registry", None)
    image = out.get("image")
    if image is not None:
        if registry and registry not in _DOCKER_HUB:
            image = f"{registry}/{image}"
        image = image.removeprefix("library/")
        if tag and ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
            image = f"{image}:{tag}"
        if KINDS["image"](image):
            out["image"] = image
        else:
            out.pop("image")
    return out


def named_fields(extracted: Mapping[str, str]) -> frozenset[str]:
    """The deployment fields (DEPLOYMENT_FIELDS) an evidence line named, valid or not: the deployment's
    own value of each must not be said beside it."""
    named = {k for k in DEPLOYMENT_FIELDS if extracted.get(k)}
    return frozenset(
        named | ({"image"} if extracted.get("image_tag") or extracted.get("image_registry") else set())
    )

"""Images of the SIMULATED TPU VM (`sim.host`): those already on the VM, the (simulated) registries they are
pulled from, and `docker image inspect` / `docker pull` answered as the docker CLI answers them.

Nothing is downloaded. The wordings and exit codes are docker's:
- `docker image inspect` of a missing image prints `[]` and "Error response from daemon: No such image:
  REF" (the reference with `:latest` added when it has no tag), exit 1;
- `docker pull` prints "TAG: Pulling from REPO", one line per layer, "Digest: sha256:...", "Status:
  Downloaded newer image for REF" (or "Image is up to date for REF") and the full reference, exit 0; a
  refusal is the daemon's error, exit 1: "manifest for REF not found: manifest unknown: manifest unknown"
  (no such tag), "pull access denied for REPO, repository does not exist or may require 'docker login':
  denied: requested access to the resource is denied" (no such repository, or not logged in),
  Docker Hub's "toomanyrequests" (docker-pull-rate-limit.log), a full disk ("failed to register layer:
  ... no space left on device", docker-no-space-left.log);
- `docker run` pulls a missing image the same way; its refusal is printed after "Unable to find image 'REF'
  locally" with "docker: " before the daemon's error, a full stop after it, then "See 'docker run --help'.",
  exit 125 (an error of the daemon itself: https://docs.docker.com/engine/containers/run/#exit-status).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

DEFAULT_REGISTRY = {"vllm/vllm-tpu": ["gemma4", "latest", "nightly"]}
"""Repositories and tags the simulated registry holds unless the scenario's `registry` says otherwise."""


def split_reference(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference; the tag is "latest" when none is given, a digest when
    the reference pins one ("vllm/vllm-tpu@sha256:..." -> ("vllm/vllm-tpu", "sha256:..."))."""
    if "@" in image:
        repository, digest = image.split("@", 1)
        return repository, digest
    head, _, last = image.rpartition("/")
    if ":" in last:
        name, tag = last.split(":", 1)
        return (f"{head}/{name}" if head else name), tag
    return image, "latest"


def _tagged(image: str) -> str:
    repository, tag = split_reference(image)
    return f"{repository}@{tag}" if tag.startswith("sha256:") else f"{repository}:{tag}"


def _full(image: str) -> str:
    """The reference as docker prints it after a pull: Docker Hub's host in front of a short one."""
    tagged = _tagged(image)
    if "/" not in tagged:
        return f"docker.io/library/{tagged}"
    host = tagged.split("/", 1)[0]
    return tagged if "." in host or ":" in host or host == "localhost" else f"docker.io/{tagged}"


class Images:
    """The images of the VM and the registries behind them.

    Args:
        present: image references already on the VM.
        registry: repository -> tags that can be pulled.
        case_lines: reads a case file of `sim.cases` as lines (the real refusal texts).
    """

    def __init__(
        self, present: list[str], registry: dict[str, list[str]], case_lines: Callable[[str], list[str]]
    ) -> None:
        self.present = {_tagged(image) for image in present}
        self.registry = {repo: set(tags) for repo, tags in registry.items()}
        self._case_lines = case_lines
        self.rate_limited = False
        self.disk_full = False

    def has(self, image: str) -> bool:
        """Whether the image is on the VM."""
        return _tagged(image) in self.present

    def inspect(self, image: str) -> tuple[int, str, str]:
        """`docker image inspect -- IMAGE`: (exit status, stdout, stderr)."""
        if not self.has(image):
            return 1, "[]\n", f"Error response from daemon: No such image: {_tagged(image)}\n"
        digest = hashlib.sha256(_tagged(image).encode()).hexdigest()
        return 0, f'[{{"Id": "sha256:{digest}", "RepoTags": ["{_tagged(image)}"]}}]\n', ""

    def pull(self, image: str) -> tuple[int, str, str]:
        """`docker pull -- IMAGE`: (exit status, stdout, stderr); a pulled image is then on the VM."""
        repository, tag = split_reference(image)
        refusal = self._refusal(image)
        progress = f"{tag}: Pulling from {repository}\n"
        if refusal is not None:
            return 1, progress if self.disk_full else "", refusal
        digest = hashlib.sha256(_tagged(image).encode()).hexdigest()
        if self.has(image):
            status = f"Status: Image is up to date for {_tagged(image)}\n"
            return 0, f"{progress}Digest: sha256:{digest}\n{status}{_full(image)}\n", ""
        layers = "".join(f"{digest[i : i + 12]}: Pull complete\n" for i in (0, 12, 24))
        self.present.add(_tagged(image))
        status = f"Status: Downloaded newer image for {_tagged(image)}\n"
        return 0, f"{progress}{layers}Digest: sha256:{digest}\n{status}{_full(image)}\n", ""

    def run_pull(self, image: str) -> tuple[int, str] | None:
        """The pull `docker run` makes of a missing image: None when it worked, else (125, stderr)."""
        refusal = self._refusal(image)
        if refusal is None:
            self.present.add(_tagged(image))
            return None
        lines = refusal.rstrip("\n").splitlines()
        if lines and not lines[0].startswith("Error:"):  # the CLI's prefix; the rate-limit case has its own
            full_stop = "." if lines[0].startswith("Error response") and not lines[0].endswith(".") else ""
            lines[0] = f"docker: {lines[0]}{full_stop}"
        text = "\n".join(lines)
        return 125, f"Unable to find image '{_tagged(image)}' locally\n{text}\nSee 'docker run --help'.\n"

    def _refusal(self, image: str) -> str | None:
        """The daemon's refusal of a pull of `image` (stderr text), or None when it can be pulled."""
        repository, tag = split_reference(image)
        if self.rate_limited:
            return "".join(f"{line}\n" for line in self._case_lines("docker-pull-rate-limit.log") if line)
        tags = self.registry.get(repository)
        if tags is None:
            return (
                f"Error response from daemon: pull access denied for {repository}, repository does not exist "
                "or may require 'docker login': denied: requested access to the resource is denied\n"
            )
        if tag not in tags:
            return (
                f"Error response from daemon: manifest for {_tagged(image)} not found: manifest unknown: "
                "manifest unknown\n"
            )
        if self.disk_full:
            lines = [
                line.removeprefix("docker: ")
                for line in self._case_lines("docker-no-space-left.log")
                if line.strip() and not line.startswith("#") and not line.startswith("See 'docker")
            ]
            return "".join(f"{line}\n" for line in lines)
        return None

"""A SIMULATED TPU VM reachable over SSH (a paramiko server on 127.0.0.1): for the demo and the tests.

Nothing here runs docker, a TPU or vLLM. The simulator answers the command shapes that the templates of
`ops.vllm.ssh.TEMPLATES` send (parsed with a small shell-word lexer and `shlex`), keeps a state machine of
docker containers (absent / created / running / exited / restarting), and replays real failure logs from
sim/cases/ (package data) when a scenario says a container fails. Anything else gets exit 127
"command not allowed in simulator". Every command string received is recorded in `commands`.

Supported shapes (an optional `sudo -n [--preserve-env=HF_TOKEN[,VLLM_API_KEY]]` prefix is accepted
everywhere):
    docker inspect --type container -- NAME
    docker logs --tail N [--since DURATION] [--timestamps] -- NAME 2>&1 [| grep -F -e TEXT]
    docker start|stop [--time N]|restart [--time N]|rm -f -- NAME
    docker rename -- NAME NEW_NAME
    docker image inspect -- IMAGE          docker pull -- IMAGE
    HF_TOKEN="$(gcloud secrets versions access latest --secret=S)" || exit 3; export HF_TOKEN;
        [VLLM_API_KEY="$(gcloud ... --secret=K)" || exit 4; export VLLM_API_KEY;]
        docker run -d --name NAME [--privileged --net=host --shm-size X -v A:B -e VAR ...]
            [--log-driver gcplogs --log-opt KEY=VALUE ... --label KEY=VALUE ...] -- IMAGE vllm serve MODEL ...
    (a container given VLLM_API_KEY makes the linked vLLM simulator require that key, like `--api-key`;
    a container run with gcplogs and `--log-opt gcp-project=P` sends every line it prints to the linked
    Cloud Logging of P, labelled with the container labels `--log-opt labels=` names)
    curl -sf --max-time 10 -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/
        instance/attributes/tpu-env        (the VM's NODE_ID, WORKER_ID and ZONE; exit 22 without a node)
    docker exec -- NAME vllm bench serve --model M --num-prompts N --random-input-len L
        --random-output-len L --max-concurrency C ...
    journalctl -u UNIT -n N --no-pager

Scenario keys (the `host` section; defaults in `DEFAULTS`):
    hostname           VM hostname shown in journal lines (and the instance name of its gcplogs entries)
    booted             when the VM booted and dockerd started (relative to now, e.g. "-87m"): after its
                       node's creation, before its containers
    user               the one SSH user accepted (public keys are added with `authorize`)
    boot_s             seconds a started healthy vLLM container takes to print `Application startup complete.`
                       and, when a VllmSimulator is linked, to stop refusing connections (real: ~10 minutes)
    fail_after_s       seconds a failing container runs before it exits with its failing log
    linked_container   the container whose state drives the linked VllmSimulator
    secrets            Secret Manager secret names the VM can read (the HF token)
    secret_values      name -> value of those the VM reads as the vLLM API key (default: a random value)
    images             images already pulled on the VM
    registry           repository -> tags that can be pulled (default `sim.host.images.DEFAULT_REGISTRY`);
                       another tag is "manifest unknown", another repository "pull access denied"
    pull_rate_limited  true: pulling any other image fails (docker-pull-rate-limit.log)
    disk_full          true: pulls fail with "no space left on device" (docker-no-space-left.log)
    stale_server       true: a process outside docker holds the vLLM port: the linked container, started,
                       exits with vLLM's bind error (vllm-port-in-use.log) and the linked VllmSimulator
                       (that process) answers whatever the container does
    run_failing_log    a case file that every newly created container fails with, or null
    cases_dir          where case files live (default: the package data of sim.cases)
    kv_capacity_tokens KV-cache capacity used by the benchmark model (concurrency is capped by it)
    bench              {prefill_tok_per_s, decode_step_ms, decode_ms_per_seq}: the benchmark's made-up speed
    containers         list of {name, image, state, started, finished, exit_code, restart_count, model,
                       max_model_len, tensor_parallel_size, port, failing_log, log_driver}; times relative
                       to now ("-45m"); log_driver "gcplogs" (default: as the startup script runs it; its
                       output so far is what the Google simulator's Cloud Logging holds) or "json-file"
                       (the script's fallback where Docker refused gcplogs)
    journal            unit -> list of extra journal lines
    node_id, worker_id the TPU node and worker this VM is, in its tpu-env metadata attribute (node_id null:
                       not a TPU VM, no such attribute)
    zone               the VM's zone (tpu-env, and the gcplogs entries' resource)
    log_writer         true (default): the VM's service account may write Cloud Logging; false: Docker's
                       gcplogs driver fails to start (a run leaves its container "created", exit 125)

Real limits enforced (each with its source in the code):
    - `docker start` / `docker restart` reset the container's RestartCount to 0 (moby: daemon/start.go calls
      `container.ResetRestartManager(true)`, which zeroes RestartCount; only the restart policy counts up).
    - vLLM logs to stdout (vllm/logger.py: the default handler streams to `ext://sys.stdout`); Python
      tracebacks go to stderr. `docker logs` replays each on its own stream, so the bot needs `2>&1`.
    - docker needs the docker group or sudo: without either, every docker command fails with the daemon
      socket's "permission denied" (docs.docker.com/engine/install/linux-postinstall); `sudo -n` fails with
      "sudo: a password is required" when the user has no passwordless sudo (sudo(8), `-n`).
    - a linked VllmSimulator whose engine died and whose API server exited takes its container down with it
      (the container's main process is the API server); its `/metrics` start time is the container's start.
    - `docker run` exits 125 on an error of the daemon itself, e.g. an image it cannot pull
      (docs.docker.com/engine/containers/run/#exit-status); `docker pull` and `docker image inspect` exit 1.
    - a log option the gcplogs driver does not take is refused when the container is created; the driver
      itself starts with the container, and fails without Cloud Logging access (moby
      daemon/logger/gcplogs/gcplogging.go): the container stays "created". `docker logs` reads a gcplogs
      container through Docker's local copy (dual logging).

More scenario keys:
    docker_group       true (default): the SSH user is in the docker group; false: only sudo reaches docker
    sudo               "nopasswd" (default, as on Google's images for OS Login admins) or "password"

Controls (thread-safe): `authorize(pkey)`, `set_run_failing_log(case)`, `set_pull_rate_limited(flag)`,
`set_disk_full(flag)`, `set_stale_server(flag)`, `set_log_writer(flag)`, `link_cloud_logging(gcp)`,
`crash(name, case)`, `container_state(name)`, `commands`, `docker_runs` (each `docker run`'s arguments),
`set_reject_auth(flag)`, `set_command_delay(seconds)`; `stop()` then `start()` refuses connections meanwhile
(same port).

Layout: `server.py` (HostSimulator: SSH server, command interpreter, controls), `shell.py` (the shell-word
lexer and command-line structure), `docker.py` (DockerEngine: containers, images, docker subcommands),
`container.py` (a container and vLLM's startup lines), `bench.py` (`vllm bench serve`).
"""

from sim.host.server import HostSimulator, generate_ed25519_key

__all__ = ["HostSimulator", "generate_ed25519_key"]

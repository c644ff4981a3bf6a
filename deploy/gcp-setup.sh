#!/usr/bin/env bash
# Google Cloud setup of tpu-chatops as code: the APIs the bot uses, its two service accounts (the bot's and
# the TPU VMs'), the least roles each needs, the secrets, the image repository and, for Cloud Run, the Cloud
# SQL for PostgreSQL state store. Read it, or run it once per project as a project owner:
#
#   PROJECT=my-project REGION=us-east5 bash deploy/gcp-setup.sh
#   PROJECT=my-project REGION=us-east5 TARGET=kubernetes K8S_NAMESPACE=tpu-chatops bash deploy/gcp-setup.sh
#
# Running it again changes nothing that is already right: every resource is described before it is
# created, the custom role is updated to exactly the permissions below, and IAM bindings are added with
# add-iam-policy-binding, which leaves an existing binding as it is. It prints no secret value.
#
# The bot's custom role holds exactly the permissions of the Google API methods the code calls, taken from
# the table in ops/gcp/iam.py (each row names the method and the Google page giving its permission);
# tests/unit/test_iam.py fails when this list and the code disagree. Permissions on one resource only
# (a secret, the TPU VMs' service account) are granted there, with the narrowest predefined role.
set -euo pipefail

PROJECT="${PROJECT:?set PROJECT to the project id, e.g. PROJECT=my-project}"
REGION="${REGION:?set REGION to the region of Cloud Run, Cloud SQL and the image repository, e.g. REGION=us-east5}"
TARGET="${TARGET:-cloudrun}" # cloudrun (deploy/cloudrun.yaml) or kubernetes (deploy/kubernetes.yaml, GKE)
BOT_SA_NAME="${BOT_SA_NAME:-tpu-chatops}"
TPU_SA_NAME="${TPU_SA_NAME:-tpu-chatops-vm}"
HF_TOKEN_SECRET="${HF_TOKEN_SECRET:-hf-token}"
VLLM_API_KEY_SECRET="${VLLM_API_KEY_SECRET:-vllm-api-key}"
REPOSITORY="${REPOSITORY:-tpu-chatops}"
SQL_INSTANCE="${SQL_INSTANCE:-tpu-chatops}"
K8S_NAMESPACE="${K8S_NAMESPACE:-tpu-chatops}"
NETWORK="${NETWORK:-default}"
# Where the bot's traffic to the TPU VMs comes from (its subnet, or its static egress IP/32): set it to
# open vLLM's port and SSH to that range only, on the VMs running as the TPU VMs' account. Unset: no rule
# (the default network's default-allow-internal already admits 10.128.0.0/9 from inside the VPC).
BOT_SOURCE_RANGE="${BOT_SOURCE_RANGE:-}"

case "$TARGET" in
cloudrun | kubernetes) ;;
*)
    echo "gcp-setup: TARGET must be cloudrun or kubernetes, not '$TARGET'" >&2
    exit 2
    ;;
esac

BOT_SA="${BOT_SA_NAME}@${PROJECT}.iam.gserviceaccount.com"
TPU_SA="${TPU_SA_NAME}@${PROJECT}.iam.gserviceaccount.com"
BOT_ROLE_ID="tpuChatopsBot"

# The custom role of the bot's service account, granted on the project: one permission per Google API
# method the bot calls (ops/gcp/iam.py, CALLS, grant "bot-role"). Cloud TPU has no resource-level IAM and no
# tpu.queuedResources.* permissions: queued resources are authorized by tpu.nodes.*
# (https://cloud.google.com/iam/docs/roles-permissions/tpu). roles/tpu.admin would add reimage, update,
# performMaintenance and tag bindings, which the bot never uses.
BOT_PERMISSIONS=(
    cloudquotas.quotas.get    # quotaInfos.get: /tpu zones, /tpu find, the quota line of create previews
    logging.logEntries.list   # entries.list: /logs, /logs analyze
    tpu.acceleratortypes.list # acceleratorTypes.list: which zones offer the accelerator type
    tpu.locations.list        # locations.list: --all-zones
    tpu.nodes.create          # queuedResources.create: /tpu create, /tpu find, /tpu recover
    tpu.nodes.delete          # queuedResources.delete: /tpu delete, clean-up of a capacity search
    tpu.nodes.get             # queuedResources.get, nodes.get: /tpu describe, status, alerts
    tpu.nodes.list            # queuedResources.list, nodes.list: /tpu list, status, alerts
    tpu.nodes.reset           # queuedResources.reset: /tpu reset
    tpu.nodes.start           # nodes.start
    tpu.nodes.stop            # nodes.stop: idle stops
    tpu.operations.get        # operations.get: waiting for a create, delete or reset to finish
)

# The APIs the bot (and the TPU VMs it creates) call, and what hosts it.
APIS=(
    tpu.googleapis.com             # Cloud TPU: queued resources and TPU VMs
    cloudquotas.googleapis.com     # Cloud Quotas: TPU quotas per zone
    logging.googleapis.com         # Cloud Logging: the TPU VMs' logs (written by the VMs, read by /logs)
    secretmanager.googleapis.com   # Secret Manager: Slack tokens, Hugging Face token, vLLM API key
    iam.googleapis.com             # the two service accounts and the custom role
    compute.googleapis.com         # the VPC network the TPU VMs join, and its firewall rules
    artifactregistry.googleapis.com # the bot's container image
)
if [[ "$TARGET" == cloudrun ]]; then
    APIS+=(
        run.googleapis.com      # Cloud Run: the bot's service
        sqladmin.googleapis.com # Cloud SQL: the PostgreSQL state store, reached through Cloud Run's connector
    )
else
    APIS+=(container.googleapis.com) # GKE: the cluster of deploy/kubernetes.yaml
fi

say() { printf 'gcp-setup: %s\n' "$*"; }

ensure_service_account() { # NAME DISPLAY_NAME
    local email="$1@${PROJECT}.iam.gserviceaccount.com"
    if gcloud iam service-accounts describe "$email" --project="$PROJECT" >/dev/null 2>&1; then
        say "service account $email exists"
    else
        gcloud iam service-accounts create "$1" --project="$PROJECT" --display-name="$2"
    fi
}

ensure_bot_role() {
    local permissions deleted
    permissions=$(IFS=,; echo "${BOT_PERMISSIONS[*]}")
    if ! deleted=$(gcloud iam roles describe "$BOT_ROLE_ID" --project="$PROJECT" --format='value(deleted)' 2>/dev/null); then
        gcloud iam roles create "$BOT_ROLE_ID" --project="$PROJECT" --stage=GA \
            --title="tpu-chatops bot" \
            --description="The Google API methods tpu-chatops calls (ops/gcp/iam.py)" \
            --permissions="$permissions"
        return
    fi
    if [[ "$deleted" == True ]]; then # a deleted custom role keeps its id for 7 days; bring it back
        gcloud iam roles undelete "$BOT_ROLE_ID" --project="$PROJECT"
    fi
    gcloud iam roles update "$BOT_ROLE_ID" --project="$PROJECT" --permissions="$permissions" --quiet >/dev/null
    say "custom role $BOT_ROLE_ID holds exactly: $permissions"
}

ensure_secret() { # NAME
    if gcloud secrets describe "$1" --project="$PROJECT" >/dev/null 2>&1; then
        say "secret $1 exists"
    else
        gcloud secrets create "$1" --project="$PROJECT" --replication-policy=automatic
    fi
}

has_version() { # SECRET: true when the secret has an enabled version
    [[ -n "$(gcloud secrets versions list "$1" --project="$PROJECT" --filter=state=ENABLED --limit=1 --format='value(name)')" ]]
}

grant_on_secret() { # SECRET MEMBER ROLE
    gcloud secrets add-iam-policy-binding "$1" --project="$PROJECT" --member="$2" --role="$3" \
        --condition=None --quiet >/dev/null
    say "$3 on secret $1 for $2"
}

grant_on_project() { # MEMBER ROLE
    gcloud projects add-iam-policy-binding "$PROJECT" --member="$1" --role="$2" --condition=None --quiet >/dev/null
    say "$2 on project $PROJECT for $1"
}

# 1. APIs
say "enabling ${APIS[*]}"
gcloud services enable "${APIS[@]}" --project="$PROJECT"

# 2. Service accounts: the bot's, and the one the TPU VMs run as (TPU_SERVICE_ACCOUNT).
ensure_service_account "$BOT_SA_NAME" "tpu-chatops bot"
ensure_service_account "$TPU_SA_NAME" "tpu-chatops TPU VMs"

# 3. The bot's roles: the custom role on the project, and acting as the TPU VMs' account (a create sets
#    the node's serviceAccount, which needs iam.serviceAccounts.actAs on that account only).
ensure_bot_role
grant_on_project "serviceAccount:$BOT_SA" "projects/$PROJECT/roles/$BOT_ROLE_ID"
gcloud iam service-accounts add-iam-policy-binding "$TPU_SA" --project="$PROJECT" \
    --member="serviceAccount:$BOT_SA" --role=roles/iam.serviceAccountUser --condition=None --quiet >/dev/null
say "roles/iam.serviceAccountUser on $TPU_SA for $BOT_SA"

# 4. The TPU VMs' roles: write their logs (what /logs reads), read the two secrets of the startup script.
grant_on_project "serviceAccount:$TPU_SA" roles/logging.logWriter

# 5. Secrets. The bot reads the vLLM API key and adds versions of the Hugging Face token (/tpu token);
#    the TPU VMs read both. The bot may create the token secret when it is missing, but that permission
#    (secretmanager.secrets.create) is project-wide, so the secret is created here and the bot does not
#    get it.
ensure_secret "$HF_TOKEN_SECRET"
ensure_secret "$VLLM_API_KEY_SECRET"
grant_on_secret "$HF_TOKEN_SECRET" "serviceAccount:$BOT_SA" roles/secretmanager.secretVersionAdder
grant_on_secret "$VLLM_API_KEY_SECRET" "serviceAccount:$BOT_SA" roles/secretmanager.secretAccessor
grant_on_secret "$HF_TOKEN_SECRET" "serviceAccount:$TPU_SA" roles/secretmanager.secretAccessor
grant_on_secret "$VLLM_API_KEY_SECRET" "serviceAccount:$TPU_SA" roles/secretmanager.secretAccessor
if ! has_version "$VLLM_API_KEY_SECRET"; then # a random key; the bot and the VMs both read it
    openssl rand -hex 32 | gcloud secrets versions add "$VLLM_API_KEY_SECRET" --project="$PROJECT" --data-file=- >/dev/null
    say "secret $VLLM_API_KEY_SECRET: a random key added"
fi

# The bot's own settings held as secrets: Slack's token and signing secret, the state store's URL and the
# bot's SSH private key (docs/ssh.md). On Cloud Run the service reads them as the bot's service account;
# on Kubernetes they are copied into a Kubernetes Secret (docs/deploy.md).
BOT_SECRETS=(slack-bot-token slack-signing-secret state-database-url tpu-chatops-ssh-key)
for secret in "${BOT_SECRETS[@]}"; do
    ensure_secret "$secret"
    if [[ "$TARGET" == cloudrun ]]; then
        grant_on_secret "$secret" "serviceAccount:$BOT_SA" roles/secretmanager.secretAccessor
    fi
done

# 6. The image repository.
if gcloud artifacts repositories describe "$REPOSITORY" --project="$PROJECT" --location="$REGION" >/dev/null 2>&1; then
    say "repository $REPOSITORY exists"
else
    gcloud artifacts repositories create "$REPOSITORY" --project="$PROJECT" --location="$REGION" \
        --repository-format=docker --description="tpu-chatops images"
fi

# 7. The firewall rule from the bot to vLLM (port 8000) and SSH on the TPU VMs, when BOT_SOURCE_RANGE is set.
if [[ -n "$BOT_SOURCE_RANGE" ]]; then
    if gcloud compute firewall-rules describe allow-tpu-chatops-to-vllm --project="$PROJECT" >/dev/null 2>&1; then
        say "firewall rule allow-tpu-chatops-to-vllm exists"
    else
        gcloud compute firewall-rules create allow-tpu-chatops-to-vllm --project="$PROJECT" \
            --network="$NETWORK" --direction=INGRESS --action=ALLOW --rules=tcp:8000,tcp:22 \
            --source-ranges="$BOT_SOURCE_RANGE" --target-service-accounts="$TPU_SA"
    fi
fi

# 8. The platform.
if [[ "$TARGET" == cloudrun ]]; then
    # Cloud SQL for PostgreSQL: several replicas share the store and its leases. Cloud Run connects through
    # its built-in connector (the Unix socket /cloudsql/PROJECT:REGION:INSTANCE), which needs
    # roles/cloudsql.client (https://cloud.google.com/sql/docs/postgres/connect-run).
    if gcloud sql instances describe "$SQL_INSTANCE" --project="$PROJECT" >/dev/null 2>&1; then
        say "Cloud SQL instance $SQL_INSTANCE exists"
    else
        gcloud sql instances create "$SQL_INSTANCE" --project="$PROJECT" --region="$REGION" \
            --database-version=POSTGRES_16 --edition=enterprise --tier=db-f1-micro
    fi
    if ! gcloud sql databases describe chatops --instance="$SQL_INSTANCE" --project="$PROJECT" >/dev/null 2>&1; then
        gcloud sql databases create chatops --instance="$SQL_INSTANCE" --project="$PROJECT"
    fi
    if ! has_version state-database-url; then
        # A new password for the user `bot`, straight into the secret's URL: never printed. gcloud writes
        # every command's arguments to its log files (~/.config/gcloud/logs), so file logging is off for
        # the two commands that carry it.
        password=$(openssl rand -hex 24)
        if gcloud sql users list --instance="$SQL_INSTANCE" --project="$PROJECT" --format='value(name)' | grep -qx bot; then
            CLOUDSDK_CORE_DISABLE_FILE_LOGGING=true gcloud sql users set-password bot \
                --instance="$SQL_INSTANCE" --project="$PROJECT" --password="$password"
        else
            CLOUDSDK_CORE_DISABLE_FILE_LOGGING=true gcloud sql users create bot \
                --instance="$SQL_INSTANCE" --project="$PROJECT" --password="$password"
        fi
        printf 'postgresql+psycopg://bot:%s@/chatops?host=/cloudsql/%s:%s:%s' \
            "$password" "$PROJECT" "$REGION" "$SQL_INSTANCE" |
            gcloud secrets versions add state-database-url --project="$PROJECT" --data-file=- >/dev/null
        unset password
        say "secret state-database-url: the URL of database chatops on $SQL_INSTANCE"
    fi
    grant_on_project "serviceAccount:$BOT_SA" roles/cloudsql.client
else
    # GKE Workload Identity: the pods' Kubernetes service account tpu-chatops acts as the bot's account
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity).
    gcloud iam service-accounts add-iam-policy-binding "$BOT_SA" --project="$PROJECT" \
        --member="serviceAccount:${PROJECT}.svc.id.goog[${K8S_NAMESPACE}/tpu-chatops]" \
        --role=roles/iam.workloadIdentityUser --condition=None --quiet >/dev/null
    say "roles/iam.workloadIdentityUser on $BOT_SA for ${K8S_NAMESPACE}/tpu-chatops"
fi

say "done. TPU_SERVICE_ACCOUNT=$TPU_SA; the bot runs as $BOT_SA"
# What comes next, in docs/deploy.md's order (the doc's commands are these lines):
cat <<'NEXT'
Next steps (docs/deploy.md). Each secret file holds the value alone, without a newline (printf %s):
  gcloud secrets versions add slack-bot-token --project="$PROJECT" --data-file=slack-bot-token.txt
  gcloud secrets versions add slack-signing-secret --project="$PROJECT" --data-file=slack-signing-secret.txt
  gcloud secrets versions add hf-token --project="$PROJECT" --data-file=hf-token.txt
  gcloud secrets versions add tpu-chatops-ssh-key --project="$PROJECT" --data-file=tpu-chatops-ssh-key
The image:
  gcloud auth configure-docker "$REGION-docker.pkg.dev"
  IMAGE="$REGION-docker.pkg.dev/$PROJECT/tpu-chatops/tpu-chatops:$(git rev-parse --short HEAD)"
  docker build -t "$IMAGE" . && docker push "$IMAGE"
Cloud Run:
  sed -e "s|__PROJECT__|$PROJECT|g" -e "s|__REGION__|$REGION|g" -e "s|__IMAGE__|$IMAGE|g" deploy/cloudrun.yaml > cloudrun.yaml
  gcloud run services replace cloudrun.yaml --project="$PROJECT" --region="$REGION"
  gcloud run services add-iam-policy-binding tpu-chatops --project="$PROJECT" --region="$REGION" --member=allUsers --role=roles/run.invoker
  gcloud run services describe tpu-chatops --project="$PROJECT" --region="$REGION" --format='value(status.url)'
Kubernetes (a GKE cluster with Workload Identity; STATE_DATABASE_URL: any PostgreSQL the pods reach):
  kubectl create namespace tpu-chatops
  kubectl --namespace=tpu-chatops create secret generic tpu-chatops --from-file=SLACK_BOT_TOKEN=slack-bot-token.txt --from-file=SLACK_SIGNING_SECRET=slack-signing-secret.txt --from-file=STATE_DATABASE_URL=state-database-url.txt
  kubectl --namespace=tpu-chatops create secret generic tpu-chatops-ssh-key --from-file=id_ed25519=tpu-chatops-ssh-key
  sed -e "s|__PROJECT__|$PROJECT|g" -e "s|__IMAGE__|$IMAGE|g" deploy/kubernetes.yaml > kubernetes.yaml
  kubectl apply -f kubernetes.yaml
NEXT

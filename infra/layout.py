"""The pipeline bucket's layout: one prefix per kind of object. Plain constants, no CDK, so that the stacks
(`infra.storage`, `infra.access`), `infra.packaging` and `infra.submit_step` all agree on them."""

LOGS_PREFIX = "logs/"
CHECKPOINTS_PREFIX = "checkpoints/"
MARKERS_PREFIX = "markers/"
CODE_PREFIX = "code/"
METADATA_PREFIX = "metadata/"
TLS_PREFIX = "tls/"
DEFAULT_TLS_KEY = f"{TLS_PREFIX}emr-certs.zip"

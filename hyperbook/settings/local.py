"""Development and the one-command demo: secrets are generated once into var/ (mode 0600)."""

from audit.signed_note import Signer
from core.serving import serving_record_read
from kb.assertions import signing_key_file_generated

from .base import *  # noqa: F403
from .base import AUDIT_ORIGIN, KB_ASSERTION_SIGNING_KEY_FILE, VAR_DIR
from .env import env_bool, local_secret
from .files import make_private

# Everything the demo keeps in var/ (the database with full RRNs and phone numbers, secrets, the
# token presets, the broker, logs) is its user's only, whatever the caller's umask.
make_private(VAR_DIR)

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = local_secret("DJANGO_SECRET_KEY", VAR_DIR)
TOKEN_FINGERPRINT_KEY = local_secret("TOKEN_FINGERPRINT_KEY", VAR_DIR)
AUDIT_SIGNING_KEY = local_secret(
    "AUDIT_SIGNING_KEY", VAR_DIR, lambda: Signer.generate(AUDIT_ORIGIN).text()
)
# RSA, as ORDS verifies; a new name, so that the Ed25519 key older versions left in var/ (which
# ORDS would refuse) is not picked up.
KB_ASSERTION_SIGNING_KEY_FILE = KB_ASSERTION_SIGNING_KEY_FILE or str(
    signing_key_file_generated(VAR_DIR / "kb_assertion_rsa_key.pem")
)

# The demo's console and kb_ask talk to the hyperbook that bin/serve recorded as running, unless
# told otherwise; with neither, they know no KB server and send no token anywhere.
_SERVING = serving_record_read(VAR_DIR)
KB_MCP_BASE_URL = KB_MCP_BASE_URL or (_SERVING.url if _SERVING else "")  # noqa: F405

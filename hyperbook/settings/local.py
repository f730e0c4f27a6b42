"""Development and the one-command demo: secrets are generated once into var/ (mode 0600)."""

from audit.signed_note import Signer
from kb.assertions import signing_key_file_generated

from .base import *  # noqa: F403
from .base import AUDIT_ORIGIN, KB_ASSERTION_SIGNING_KEY_FILE, THIS_SERVER_URL, VAR_DIR
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
KB_ASSERTION_SIGNING_KEY_FILE = KB_ASSERTION_SIGNING_KEY_FILE or str(
    signing_key_file_generated(VAR_DIR / "kb_assertion_signing_key.pem")
)

# The demo's discovery console talks to this server's own /mcp unless told otherwise.
KB_MCP_BASE_URL = KB_MCP_BASE_URL or THIS_SERVER_URL  # noqa: F405

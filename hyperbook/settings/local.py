"""Development and the one-command demo: secrets are generated once into var/ (mode 0600)."""

from .base import *  # noqa: F403
from .base import VAR_DIR
from .env import env_bool, local_secret

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = local_secret("DJANGO_SECRET_KEY", VAR_DIR)
TOKEN_FINGERPRINT_KEY = local_secret("TOKEN_FINGERPRINT_KEY", VAR_DIR)

# The demo's discovery console talks to this server's own /mcp unless told otherwise.
KB_MCP_BASE_URL = KB_MCP_BASE_URL or "http://127.0.0.1:8000"  # noqa: F405

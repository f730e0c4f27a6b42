"""Development and the one-command demo: secrets are generated once into var/ (mode 0600)."""

from .base import *  # noqa: F403
from .base import VAR_DIR
from .env import env_bool, local_secret

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = local_secret("DJANGO_SECRET_KEY", VAR_DIR)
TOKEN_FINGERPRINT_KEY = local_secret("TOKEN_FINGERPRINT_KEY", VAR_DIR)

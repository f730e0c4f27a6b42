"""Settings shared by every environment; values come from the environment (12-factor)."""

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONE, SELF
from django.utils.translation import gettext_lazy as _

from .env import env_bool, env_int, env_list, env_str, read_secret

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("HYPERBOOK_VAR_DIR") or BASE_DIR / "var")

DEBUG = False
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "core",
    "kb",
    "registry",
    "audit",
    "mcpserver",
    "oauth2_provider",
    "signin",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "mozilla_django_oidc",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.middleware.refuse_nul_in_query",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "signin.second_factor.second_factor_set_up_first",  # with LOGIN_REQUIRE_TOTP
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "hyperbook.urls"
WSGI_APPLICATION = "hyperbook.wsgi.application"
ASGI_APPLICATION = "hyperbook.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "signin.context.sign_in_options",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'hyperbook.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the Celery worker share the file: WAL lets readers run beside a writer.
    # Every request appends an audit event that rewrites the same few index pages; checkpointing
    # every 4,000 pages (16 MiB) instead of 1,000 copies each page back far less often.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=4000;"
        ),
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = env_str("LANGUAGE_CODE", "ko")
LANGUAGES = [("ko", _("Korean")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "Asia/Seoul")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Celery: Redis when configured; otherwise a crash-safe broker on the local filesystem that needs
# no server (core/broker.py; docs/decisions/0002-embedded-broker.md).
REDIS_URL = env_str("REDIS_URL")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT = "core.broker:Transport" if CELERY_BROKER_URL == "filesystem://" else None
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        "dead_letter_folder": str(VAR_DIR / "broker-dead"),
        "control_folder": str(VAR_DIR / "broker-control"),  # else ./control in the working dir
        "store_processed": False,
    }
    if CELERY_BROKER_URL == "filesystem://"
    else {}
)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 120
CELERY_TASK_SOFT_TIME_LIMIT = 90
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker that does not answer is given up on after this long (the default is 4 s).
CELERY_BROKER_CONNECTION_TIMEOUT = 2

# The KB VPD MCP server the registry's KB declaration points at (its URL comes from here only).
KB_MCP_BASE_URL = env_str("KB_MCP_BASE_URL")
POC3_MCP_TIMEOUT_SECONDS = env_int("POC3_MCP_TIMEOUT_SECONDS", 90)
MCP_SERVERS_FILE = Path(env_str("MCP_SERVERS_FILE") or BASE_DIR / "config" / "mcp_servers.json")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: its WWW-Authenticate challenge makes a bad token a 401, not a 403.
        "core.api_tokens.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
}
SPECTACULAR_SETTINGS = {"TITLE": "hyperbook API", "VERSION": "1.0.0"}

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Admin sessions end after this long without a request (the expiry moves with every request).
ADMIN_SESSION_IDLE_MINUTES = env_int("ADMIN_SESSION_IDLE_MINUTES", 30)
# Addresses (or networks, CIDR) that may read /metrics without an API token; none by default.
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", [])
SESSION_COOKIE_AGE = ADMIN_SESSION_IDLE_MINUTES * 60
SESSION_SAVE_EVERY_REQUEST = True
# Every page's Content-Security-Policy: scripts, styles and everything else from this origin
# only; no inline script or style (the admin's own pages carry none).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # The SDK logs every stateless request at INFO; that is noise at our request rates.
        "mcp": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}

DEBUG_PROPAGATE_EXCEPTIONS = env_bool("DEBUG_PROPAGATE_EXCEPTIONS", False)

# Token delegations and the embedded /mcp endpoint.
DELEGATION_MAX_LIFETIME_DAYS = env_int("DELEGATION_MAX_LIFETIME_DAYS", 90)
DELEGATION_DEFAULT_LIFETIME_DAYS = env_int("DELEGATION_DEFAULT_LIFETIME_DAYS", 30)
VPD_TOKEN_PRESETS_FILE = Path(
    env_str("VPD_TOKEN_PRESETS_FILE") or VAR_DIR / "vpd_token_presets.json"
)
# Where bin/serve listens; the local defaults that name this server (its origins, the demo's KB
# URL) are derived from it, so a server on another port is never mistaken for this one.
HOST = env_str("HOST", "127.0.0.1")
PORT = env_int("PORT", 8000)
_THIS_HOST = "127.0.0.1" if HOST in ("", "0.0.0.0", "::") else HOST  # noqa: S104
if ":" in _THIS_HOST and not _THIS_HOST.startswith("["):
    _THIS_HOST = f"[{_THIS_HOST}]"  # an IPv6 literal in a URL
THIS_SERVER_URL = f"http://{_THIS_HOST}:{PORT}"
MCP_ALLOWED_ORIGINS = env_list(
    "MCP_ALLOWED_ORIGINS",
    sorted({THIS_SERVER_URL, f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}"}),
)
# Host header values /mcp answers to (DNS-rebinding defence); a port is allowed on each.
MCP_ALLOWED_HOSTS = env_list("MCP_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
MCP_RESOURCE_URL = env_str("MCP_RESOURCE_URL")  # public URL of /mcp; derived from Host when unset
MCP_AUTHORIZATION_SERVERS = env_list("MCP_AUTHORIZATION_SERVERS")  # besides hyperbook's own

# Agents signing in as their user (OAuth 2.1, django-oauth-toolkit under /oauth/): every approved
# sign-in is a TokenDelegation, so /mcp's gate, limits, audit and revocation apply unchanged.
# OAUTH_ISSUER is this authorization server's origin; else the origin of MCP_RESOURCE_URL; else the
# origin a request arrived at (behind ALLOWED_HOSTS).
OAUTH_ISSUER = env_str("OAUTH_ISSUER").rstrip("/")
if not OAUTH_ISSUER and MCP_RESOURCE_URL:
    OAUTH_ISSUER = "{0.scheme}://{0.netloc}".format(urlsplit(MCP_RESOURCE_URL))
OAUTH_GRANT_DAYS = env_int("OAUTH_GRANT_DAYS", 30)  # a grant's default lifetime on the consent page
OAUTH_ACCESS_TOKEN_SECONDS = env_int("OAUTH_ACCESS_TOKEN_SECONDS", 3600)
# Hosts a Client ID Metadata Document may be fetched from although they are loopback, private or
# link-local (a client on this machine or in this network); public hosts need no listing.
OAUTH_CIMD_ALLOWED_HOSTS = env_list("OAUTH_CIMD_ALLOWED_HOSTS")
# A PEM bundle the metadata fetch trusts instead of the system's (a private CA).
OAUTH_CIMD_CA_BUNDLE = env_str("OAUTH_CIMD_CA_BUNDLE")
OAUTH_CIMD_TIMEOUT_SECONDS = env_int("OAUTH_CIMD_TIMEOUT_SECONDS", 5)
OAUTH_CIMD_MAX_BYTES = env_int("OAUTH_CIMD_MAX_BYTES", 16384)
OAUTH_DCR_ENABLED = env_bool("OAUTH_DCR_ENABLED", False)  # RFC 7591 dynamic registration
OAUTH2_PROVIDER = {
    # Only the grants signin.server.ACCEPTED_GRANTS lists are answered (and advertised).
    "OAUTH2_SERVER_CLASS": "signin.server.TokenServer",
    "OAUTH2_VALIDATOR_CLASS": "signin.validator.DelegationValidator",
    "ACCESS_TOKEN_GENERATOR": "signin.tokens.new_access_token",
    "REFRESH_TOKEN_GENERATOR": "signin.tokens.new_refresh_token",
    "SCOPES": {"ords.query.kb_select_ai_vpd": "KB Select AI (VPD)"},
    "DEFAULT_SCOPES": ["ords.query.kb_select_ai_vpd"],
    "PKCE_REQUIRED": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ACCESS_TOKEN_EXPIRE_SECONDS": OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": DELEGATION_MAX_LIFETIME_DAYS * 86400,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "REQUEST_APPROVAL_PROMPT": "force",
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_basic",
        "client_secret_post",
    ],
    "OIDC_ISS_ENDPOINT": OAUTH_ISSUER,
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "signin.cimd.OutboundMetadataFetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": OAUTH_CIMD_TIMEOUT_SECONDS,
    "CIMD_MAX_DOCUMENT_SIZE": OAUTH_CIMD_MAX_BYTES,
    "DCR_ENABLED": OAUTH_DCR_ENABLED,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    # RFC 9700: no implicit or password grant, S256 only, `iss` in every authorization response,
    # and no token kept in the clear (the validator keeps keyed fingerprints only).
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
}
# The toolkit's own models (named here because migrations that refer to them must resolve them).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"  # noqa: S105
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"  # noqa: S105
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"  # noqa: S105
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
OAUTH2_PROVIDER_DEVICE_GRANT_MODEL = "oauth2_provider.DeviceGrant"
LOGIN_URL = "signin:login"

# People's sign-in (/admin/login/ and /oauth/login/, one form): local passwords unless
# LOCAL_LOGIN_ENABLED is off, throttled by django-axes; single sign-on through the company's
# OpenID Connect provider when OIDC_RP_CLIENT_ID is set (signin/sso.py).
LOCAL_LOGIN_ENABLED = env_bool("LOCAL_LOGIN_ENABLED", True)
SSO_ENABLED = bool(env_str("OIDC_RP_CLIENT_ID"))
# The provider: its issuer and endpoints as its /.well-known/openid-configuration gives them
# (`manage.py sso_endpoints <issuer>` prints these lines), and hyperbook's client there, whose
# redirect URI is https://<this host>/oidc/callback/. Code flow with PKCE, the client secret sent
# with HTTP Basic (the default every provider accepts), the ID token signed with RS256.
OIDC_OP_ISSUER = env_str("OIDC_OP_ISSUER")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT")
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = read_secret("OIDC_RP_CLIENT_SECRET")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_USE_PKCE = True
OIDC_TOKEN_USE_BASIC_AUTH = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10)  # the library's default is to wait forever
OIDC_CALLBACK_CLASS = "signin.sso.SsoCallbackView"
# Claims: the provider's groups that make a person an operator or an auditor here, and the claim
# that names the stakeholder (KB_STAKEHOLDERS id) a person acts as.
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", ["mcp_admins"])
OIDC_AUDITOR_GROUPS = env_list("OIDC_AUDITOR_GROUPS", ["auditors"])
OIDC_STAKEHOLDER_CLAIM = env_str("OIDC_STAKEHOLDER_CLAIM", "stakeholder_id")
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out account or address
    *(["django.contrib.auth.backends.ModelBackend"] if LOCAL_LOGIN_ENABLED else []),
    *(["signin.sso.SsoBackend"] if SSO_ENABLED else []),
]

# Failed logins, throttled by django-axes (the rules in signin/logins.py): LOGIN_FAILURE_LIMIT
# failures lock the account, whichever addresses they came from, and, on its own, the address,
# whichever accounts they tried, until LOGIN_COOLOFF_MINUTES have passed since the last one (or an
# operator runs `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS`). Each failure and
# each lock is an audit event. The pages of both logins answer a locked-out login with a 429.
LOGIN_FAILURE_LIMIT = max(env_int("LOGIN_FAILURE_LIMIT", 5), 1)
LOGIN_COOLOFF_MINUTES = max(env_int("LOGIN_COOLOFF_MINUTES", 15), 1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = "signin.logins.lockout_parameters"  # the account; the address
# Counted in the database, which every worker and host shares, and audited as counted.
AXES_HANDLER = "signin.logins.AuditedDatabaseHandler"
# The socket's peer, REMOTE_ADDR: X-Forwarded-For is believed by the web server, and only from
# FORWARDED_ALLOW_IPS; axes itself would read the headers django-ipware names, if it were installed.
AXES_CLIENT_IP_CALLABLE = "signin.logins.client_address"
# A name that matches no account is counted under a keyed fingerprint, never kept as typed.
AXES_USERNAME_CALLABLE = "signin.logins.account_key"
AXES_RESET_ON_SUCCESS = True  # the account's failures from that address (signin/logins.py)
# A login refused while a lock holds is not counted: a locked address can then add no failures
# to other accounts (LOGIN_FAILURE_LIMIT guesses per cool-off is all one address gets), and a
# guesser who keeps trying does not make the lock last for ever.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "signin.views.lockout_page"
# The audit is the record; axes' table is only its counts. Its own admin pages (English, showing
# what was posted) and its log of every successful login are not kept.
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True
# Masked where axes copies a failed login's form into its table (the password always is).
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "otp_token", "proof", "csrfmiddlewaretoken"]

# A second factor for local staff logins: an authenticator app (TOTP, django-otp), added on
# /oauth/second-factor/ and asked for by the login form from then on. With LOGIN_REQUIRE_TOTP (on in
# production) a staff login by password reaches only that page until it has added one. Sessions
# of single sign-on are never asked: the company's provider does the second factor.
LOGIN_REQUIRE_TOTP = env_bool("LOGIN_REQUIRE_TOTP", False)
OTP_TOTP_ISSUER = "hyperbook"  # the name authenticator apps show beside the account

MCP_PROMPT_MAX_LENGTH = env_int("MCP_PROMPT_MAX_LENGTH", 2000)
MCP_MAX_BODY_BYTES = env_int("MCP_MAX_BODY_BYTES", 65536)
MCP_RATE_LIMIT = env_str("MCP_RATE_LIMIT", "120/minute")  # per delegation
MCP_AUTH_FAILURE_LIMIT = env_str("MCP_AUTH_FAILURE_LIMIT", "20/minute")  # per client address

# KB data layer: relative periods resolve against this date; KB reads on PostgreSQL run as this
# NOLOGIN, NOBYPASSRLS role (SET LOCAL ROLE), so row-level security holds for any login role.
KB_AS_OF_DATE = env_str("KB_AS_OF_DATE") or "2026-06-30"  # the demo data's "today"
KB_DB_READER_ROLE = env_str("KB_DB_READER_ROLE", "hyperbook_kb_reader")
# At start-up on PostgreSQL: "refuse" (production) or "warn" when KB_DB_READER_ROLE or the login
# role is a superuser or BYPASSRLS, so that row-level security would not hold the KB rows.
KB_DB_ROLE_CHECK = env_str("KB_DB_ROLE_CHECK", "warn")

# Audit: every /mcp request and admin change is an event; delivery to the egs2 Memory API.
AUDIT_MCP_REQUESTS = env_bool("AUDIT_MCP_REQUESTS", True)  # off only to measure its cost
# Unauthenticated refusals (401, the failed-authentication 429, Host/Origin 403) are recorded one
# by one up to this many per client address and window; the rest as one summary event each.
AUDIT_REFUSALS_PER_ADDRESS = env_int("AUDIT_REFUSALS_PER_ADDRESS", 20)
AUDIT_REFUSAL_WINDOW_SECONDS = env_int("AUDIT_REFUSAL_WINDOW_SECONDS", 60)
EGS2_MEMORY_API_URL = env_str("EGS2_MEMORY_API_URL")
EGS2_MEMORY_API_TOKEN = read_secret("EGS2_MEMORY_API_TOKEN")  # hyperbook's own service credential
EGS2_MEMORY_API_TIMEOUT_SECONDS = env_int("EGS2_MEMORY_API_TIMEOUT_SECONDS", 10)
EGS2_MEMORY_API_BATCH_SIZE = min(max(env_int("EGS2_MEMORY_API_BATCH_SIZE", 100), 1), 500)
AUDIT_DELIVERY_SWEEP_SECONDS = env_int("AUDIT_DELIVERY_SWEEP_SECONDS", 10)
AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = env_int("AUDIT_DELIVERY_MAX_BACKOFF_SECONDS", 600)
# /healthz says "degraded" when the oldest undelivered event is older than this.
AUDIT_BACKLOG_DEGRADED_SECONDS = env_int("AUDIT_BACKLOG_DEGRADED_SECONDS", 300)
# The apps' parts of /healthz beyond the database and the broker (core.health).
HEALTH_CHECKS = ["audit.health.delivery_report"]
# A claimed batch whose worker died is claimable again after this long.
AUDIT_DELIVERY_LEASE_SECONDS = env_int("AUDIT_DELIVERY_LEASE_SECONDS", 120)
# Signed checkpoints over the log's RFC 6962 Merkle tree (C2SP signed notes, Ed25519): one every
# AUDIT_CHECKPOINT_EVERY events or AUDIT_CHECKPOINT_SECONDS, whichever comes first, when there are
# new events. AUDIT_ORIGIN names this deployment's log in them; AUDIT_SIGNING_KEY(_FILE) is the
# signer key (PRIVATE+KEY+…; generated into var/ locally, required in production);
# AUDIT_VERIFIER_KEYS lists earlier keys' verifier keys, still trusted after a rotation.
AUDIT_ORIGIN = env_str("AUDIT_ORIGIN", "hyperbook.local/audit")
AUDIT_CHECKPOINT_EVERY = max(env_int("AUDIT_CHECKPOINT_EVERY", 1000), 1)
AUDIT_CHECKPOINT_SECONDS = max(env_int("AUDIT_CHECKPOINT_SECONDS", 60), 1)
AUDIT_SIGNING_KEY = read_secret("AUDIT_SIGNING_KEY")
AUDIT_VERIFIER_KEYS = env_list("AUDIT_VERIFIER_KEYS")
# Witnesses (C2SP tlog-witness) that cosign each checkpoint after checking its consistency with the
# last one they cosigned: comma-separated "URL KEY" pairs, the URL being the witness's submission
# prefix and KEY its cosignature/v1 verifier key (name+keyid+base64). A checkpoint is witnessed once
# AUDIT_WITNESS_QUORUM of them have cosigned it. A witness that fails never holds up an answer.
AUDIT_WITNESSES = env_list("AUDIT_WITNESSES")
AUDIT_WITNESS_QUORUM = max(env_int("AUDIT_WITNESS_QUORUM", 1), 1)
AUDIT_WITNESS_TIMEOUT_SECONDS = env_int("AUDIT_WITNESS_TIMEOUT_SECONDS", 10)
# A full chain check (every event read again) may be asked for from the admin this often.
AUDIT_FULL_VERIFY_INTERVAL_SECONDS = env_int("AUDIT_FULL_VERIFY_INTERVAL_SECONDS", 3600)
# The discovery console's history (each admin's own turns: the prompt, the rows as shown, the
# JSON-RPC transcript without headers) is deleted this many days after each turn.
CONSOLE_HISTORY_RETENTION_DAYS = max(env_int("CONSOLE_HISTORY_RETENTION_DAYS", 30), 1)
CELERY_BEAT_SCHEDULE = {
    # Four times a day, each run one audit event with its count (so a missed run shows).
    "console-history-retention": {
        "task": "registry.console_history_expire",
        "schedule": 6 * 3600.0,
    },
    "audit-delivery-sweep": {
        "task": "audit.deliver_pending",
        "schedule": float(AUDIT_DELIVERY_SWEEP_SECONDS),
    },
    # A chain check an auditor asked for whose message was lost (a worker or Redis gone).
    "audit-verification-sweep": {"task": "audit.verify_chain", "schedule": 15.0},
    # Looks four times a checkpoint interval, so a checkpoint is never much later than due.
    "audit-checkpoint": {
        "task": "audit.checkpoint",
        "schedule": max(1.0, AUDIT_CHECKPOINT_SECONDS / 4),
    },
}

# Select AI (the KB tool's engine). Backend: "embedded" (plans run on this database under the VPD
# policy) or "ords" (questions go to ORDS Select AI; see docs/ords-adapter.md). Plan proposer for
# the embedded backend: "builtin" (the Korean/English parser) or "openai_compatible" (a
# chat-completions model; the built-in parser answers whenever the model fails).
KB_QUERY_BACKEND = env_str("KB_QUERY_BACKEND", "embedded")
ORDS_SELECT_AI_URL = env_str("ORDS_SELECT_AI_URL")
ORDS_SELECT_AI_TIMEOUT_SECONDS = env_int("ORDS_SELECT_AI_TIMEOUT_SECONDS", 60)
# Who asks, as ORDS learns it: per request, a short-lived JWT access token (RFC 9068) that
# hyperbook signs for the user (kb/assertions.py), verified by ORDS against /.well-known/jwks.json.
# The key is an RSA private key of 2048 to 4096 bits in PEM, signing RS256: ORDS' JWT profiles
# verify RS256/RS384/RS512 only, so start-up refuses any other key (generated into var/ locally,
# 3072 bits; required in production). An Ed25519 (EdDSA) or P-256 (ES256) key is allowed only with
# ORDS_TOKEN_EXCHANGE_URL, because the assertion then goes to that STS, never to ORDS; the STS must
# accept the algorithm. An earlier key's file stays in KB_ASSERTION_PREVIOUS_KEY_FILES
# (comma-separated) while its last assertions may still be in flight. iss: KB_ASSERTION_ISSUER,
# else the origin of MCP_RESOURCE_URL; aud: ORDS_AUDIENCE, else the origin of ORDS_SELECT_AI_URL.
KB_ASSERTION_SIGNING_KEY_FILE = env_str("KB_ASSERTION_SIGNING_KEY_FILE")
KB_ASSERTION_PREVIOUS_KEY_FILES = env_list("KB_ASSERTION_PREVIOUS_KEY_FILES")
KB_ASSERTION_ISSUER = env_str("KB_ASSERTION_ISSUER")
KB_ASSERTION_LIFETIME_SECONDS = env_int("KB_ASSERTION_LIFETIME_SECONDS", 60)
ORDS_AUDIENCE = env_str("ORDS_AUDIENCE")
# Optional RFC 8693 token exchange: an STS trades the assertion for the token ORDS gets.
ORDS_TOKEN_EXCHANGE_URL = env_str("ORDS_TOKEN_EXCHANGE_URL")
ORDS_TOKEN_EXCHANGE_CLIENT_ID = env_str("ORDS_TOKEN_EXCHANGE_CLIENT_ID")
ORDS_TOKEN_EXCHANGE_CLIENT_SECRET = read_secret("ORDS_TOKEN_EXCHANGE_CLIENT_SECRET")
# Removed (the shared client credential ORDS once got instead of a user's identity): only whether
# it is still set is read, so that start-up can refuse it (kb.ords.REMOVED_SETTINGS).
ORDS_SELECT_AI_CLIENT_TOKEN = bool(
    env_str("ORDS_SELECT_AI_CLIENT_TOKEN") or env_str("ORDS_SELECT_AI_CLIENT_TOKEN_FILE")
)
SELECT_AI_PROVIDER = env_str("SELECT_AI_PROVIDER", "builtin")
SELECT_AI_BASE_URL = env_str("SELECT_AI_BASE_URL")  # e.g. https://api.openai.com/v1
SELECT_AI_MODEL = env_str("SELECT_AI_MODEL")
SELECT_AI_API_KEY = read_secret("SELECT_AI_API_KEY")
SELECT_AI_TIMEOUT_SECONDS = env_int("SELECT_AI_TIMEOUT_SECONDS", 15)

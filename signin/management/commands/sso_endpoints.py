"""Read an OpenID Connect provider's discovery document and print the settings single sign-on
needs, ready for the environment file: `manage.py sso_endpoints https://idp.example.com/realms/kb`."""

import httpx
from django.core.management.base import BaseCommand, CommandError

_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class Command(BaseCommand):
    help = "Print an OpenID provider's OIDC_OP_* settings, read from its discovery document."

    def add_arguments(self, parser):
        parser.add_argument("issuer", help="the provider's issuer URL, as its ID tokens name it")

    def handle(self, *args, issuer: str, **options):
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            response = httpx.get(url, timeout=10, follow_redirects=False)
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise CommandError(f"could not read {url}: {type(exc).__name__}: {exc}") from None
        named = document.get("issuer") if isinstance(document, dict) else None
        if named != issuer:
            # OpenID Connect Discovery 4.3: the document must name exactly the issuer asked for.
            raise CommandError(
                f"{url} names the issuer {named!r}, not {issuer!r}: use the issuer exactly as "
                "the provider writes it"
            )
        missing = [key for key in _ENDPOINTS.values() if not document.get(key)]
        if missing:
            raise CommandError(f"the discovery document has no {', '.join(missing)}")
        self.stdout.write(f"OIDC_OP_ISSUER={issuer}")
        for setting, key in _ENDPOINTS.items():
            self.stdout.write(f"{setting}={document[key]}")
        if "RS256" not in document.get("id_token_signing_alg_values_supported", ["RS256"]):
            self.stderr.write("note: the provider does not list RS256; set OIDC_RP_SIGN_ALGO")
        if "S256" not in document.get("code_challenge_methods_supported", ["S256"]):
            self.stderr.write("warning: the provider does not list PKCE with S256")

"""Reading configuration from the environment: plain values, lists, booleans and secrets."""

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_int(name: str, default: int) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_bool(name: str, default: bool = False) -> bool:
    """A typo is an error, not False: `SECURE_SSL_REDIRECT=ture` must not turn the redirect off."""
    raw = env_str(name).lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/true/yes/on or 0/false/no/off, not {raw!r}"
    )


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = env_str(name)
    if not raw:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def read_secret(name: str) -> str | None:
    """The secret from NAME, or from the file named by NAME_FILE; None when neither is set."""
    value = os.environ.get(name, "").strip()
    if value:
        return value
    path = os.environ.get(f"{name}_FILE", "").strip()
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            # The path is configuration, not a secret, so naming it helps the operator.
            raise ImproperlyConfigured(f"{name}_FILE could not be read: {path}") from exc
        if not value:
            raise ImproperlyConfigured(f"{name}_FILE is empty: {path}")
        return value
    return None


def required_secret(name: str) -> str:
    value = read_secret(name)
    if not value:
        raise ImproperlyConfigured(f"{name} (or {name}_FILE) must be set in production")
    return value


def local_secret(name: str, var_dir: Path, generate=lambda: secrets.token_urlsafe(48)) -> str:
    """For development: the configured secret, else one generated once into var/ with mode 0600."""
    value = read_secret(name)
    if value:
        return value
    var_dir.mkdir(parents=True, exist_ok=True)
    path = var_dir / name.lower()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(generate())
    return path.read_text(encoding="utf-8").strip()

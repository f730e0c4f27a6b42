"""The demo VPD token preset file (stakeholder id -> token): owner-only, never logged or stored."""

import json
import os
import stat
from pathlib import Path

from django.utils.translation import gettext as _


class PresetFileError(ValueError):
    """The preset file is missing, unsafe or malformed. The message names the file, never a
    token."""


def read_token_presets(path: Path) -> dict[str, str]:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PresetFileError(_("%(path)s 파일이 없습니다") % {"path": path}) from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise PresetFileError(
            _("%(path)s 파일은 소유자만 읽을 수 있어야 합니다 (chmod 600)") % {"path": path}
        )
    if info.st_uid != os.getuid():
        raise PresetFileError(
            _("%(path)s 파일의 소유자가 hyperbook을 실행하는 사용자가 아닙니다") % {"path": path}
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise PresetFileError(_not_an_object(path)) from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise PresetFileError(_not_an_object(path))
    return data


def _not_an_object(path: Path) -> str:
    return _("%(path)s 파일이 '관계자 ID → 토큰' JSON 객체가 아닙니다") % {"path": path}


def write_token_presets(path: Path, presets: dict[str, str]) -> None:
    """Write atomically with mode 0600 from the start, so the tokens are never world-readable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(presets, handle, ensure_ascii=False, indent=2, sort_keys=True)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)

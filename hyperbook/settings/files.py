"""Files at rest are the service user's only: var/ is 0700 and what is in it 0600/0700."""

import os
import stat
from pathlib import Path


def make_private(var_dir: Path) -> None:
    """Set this process's umask to 077 and take back what an older version or another umask
    left readable under `var_dir`. Runs at settings time: before the database or any secret,
    broker message or log is opened."""
    os.umask(0o077)
    var_dir.mkdir(parents=True, exist_ok=True)
    _tighten(var_dir, 0o700)
    for root, folders, files in os.walk(var_dir):
        for name in folders:
            _tighten(Path(root, name), 0o700)
        for name in files:
            _tighten(Path(root, name), 0o600)


def _tighten(path: Path, mode: int) -> None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
            return  # not ours to change (and never follow a link out of var/)
        if stat.S_IMODE(info.st_mode) & 0o077:
            path.chmod(mode | (stat.S_IMODE(info.st_mode) & 0o700))
    except OSError:
        pass  # vanished meanwhile (a broker message consumed), or not ours

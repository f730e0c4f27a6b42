"""System checks of a host's own state that settings alone cannot show.

`manage.py check --deploy` runs them (bin/serve runs the static one before it starts serving)."""

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.checks import Error, Tags, register
from django.utils.module_loading import import_string


def static_files_missing() -> str:
    """ "" when this host's pages can link their static files, else what is wrong and what to do.

    With a manifest storage (production's, WhiteNoise's), every `{% static %}` looks its file up
    in the manifest collectstatic writes into STATIC_ROOT; without one, every admin, login and
    consent page answers 500. Collected files are per host: each host must collect its own."""
    # The class, not an instance: a manifest storage reads its manifest as it is made, and fails
    # on a STATIC_ROOT it cannot read, which is just what this check is to report.
    backend = import_string(settings.STORAGES["staticfiles"]["BACKEND"])
    if settings.DEBUG or not issubclass(backend, ManifestFilesMixin):
        return ""  # unhashed names, served from the apps: nothing to collect first
    manifest = Path(settings.STATIC_ROOT or ".") / backend.manifest_name
    if settings.STATIC_ROOT and manifest.is_file():
        return ""
    return (
        f"STATIC_ROOT ({settings.STATIC_ROOT}) holds no collected static files (no "
        f"{backend.manifest_name}): every admin, login and consent page would answer 500. Run "
        "`manage.py collectstatic --noinput` on this host, with the same settings, before "
        "serving (bin/serve does it as it starts)."
    )


@register(Tags.staticfiles, deploy=True)
def check_static_files_collected(app_configs=None, **kwargs) -> list[Error]:
    problem = static_files_missing()
    return [Error(problem, id="hyperbook.E001")] if problem else []

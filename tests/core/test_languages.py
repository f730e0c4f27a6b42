"""Korean by default, English on request: the admin follows the browser or LANGUAGE_CODE, and
the English catalogue holds every message of ours, compiled as committed."""

import ast
import gettext
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from conftest import service_missing

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "en" / "LC_MESSAGES"
SOURCES = ("audit", "core", "hyperbook", "kb", "mcpserver", "registry", "signin")


def read_po(path: Path) -> dict[str, dict]:
    """Each entry of a .po file by its key as GNU gettext keys it ("context\\x04msgid"), with its
    msgstr (a list for plural forms), whether it is fuzzy and whether it is obsolete."""
    entries, entry, field = {}, None, None

    def close():
        if entry is not None and "msgid" in entry:
            key = entry["msgid"]
            if "msgctxt" in entry:
                key = f"{entry['msgctxt']}\x04{key}"
            plural = sorted(k for k in entry if k.startswith("msgstr["))
            entries[key] = {
                "msgstr": [entry[k] for k in plural] if plural else entry.get("msgstr", ""),
                "fuzzy": entry["fuzzy"],
                "obsolete": entry["obsolete"],
            }

    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        obsolete = line.startswith("#~")
        line = line[2:].strip() if obsolete else line.strip()
        if not line or (line.startswith("#") and entry is not None and "msgid" in entry):
            close()
            entry, field = None, None
        if not line:
            continue
        if entry is None:
            entry = {"fuzzy": False, "obsolete": False}
        entry["obsolete"] |= obsolete
        if line.startswith("#,"):
            entry["fuzzy"] |= "fuzzy" in line
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            entry[field] += ast.literal_eval(line)
        else:
            field, _, text = line.partition(" ")
            entry[field] = ast.literal_eval(text)
    return entries


def translations(path: Path) -> dict[str, object]:
    """The .po entries as the compiled .mo holds them (untranslated and fuzzy ones left out)."""
    compiled = {}
    for key, entry in read_po(path).items():
        if entry["fuzzy"] or entry["obsolete"] or not key:
            continue
        if isinstance(entry["msgstr"], list):
            msgid = key
            compiled.update({(msgid, n): text for n, text in enumerate(entry["msgstr"]) if text})
        elif entry["msgstr"]:
            compiled[key] = entry["msgstr"]
    return compiled


def test_the_committed_mo_is_the_compiled_po():
    with (CATALOGUE / "django.mo").open("rb") as mo:
        catalogue = gettext.GNUTranslations(mo)._catalog
    catalogue.pop("", None)  # the header
    # A plural .mo entry is keyed by its singular msgid; the .po keys it the same way here.
    assert catalogue == translations(CATALOGUE / "django.po"), (
        "locale/en/LC_MESSAGES/django.mo is out of date: run `make messages`"
    )


def test_every_entry_of_the_catalogue_is_translated_and_none_is_fuzzy():
    entries = read_po(CATALOGUE / "django.po")
    untranslated = [
        key
        for key, entry in entries.items()
        if key
        and (
            entry["fuzzy"]
            or entry["obsolete"]
            or not all(entry["msgstr"] if isinstance(entry["msgstr"], list) else [entry["msgstr"]])
        )
    ]
    assert len(entries) > 400
    assert untranslated == []


@pytest.mark.slow
def test_the_catalogue_holds_every_message_the_code_has(tmp_path, settings, monkeypatch):
    if shutil.which("xgettext") is None or shutil.which("msguniq") is None:
        service_missing("GNU gettext (xgettext) is not installed: apt-get install gettext")
    for name in SOURCES:
        shutil.copytree(
            Path(settings.BASE_DIR) / name,
            tmp_path / name,
            ignore=shutil.ignore_patterns("__pycache__", "static"),
        )
    (tmp_path / "locale").mkdir()
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    monkeypatch.chdir(tmp_path)
    call_command("makemessages", locale=["en"], verbosity=0)

    found = read_po(tmp_path / "locale" / "en" / "LC_MESSAGES" / "django.po")
    committed = read_po(CATALOGUE / "django.po")
    translated = {key for key, entry in committed.items() if key and entry["msgstr"]}
    missing = sorted(key for key in found if key and key not in translated)
    stale = sorted(key for key in committed if key and key not in found)
    assert missing == [], "messages without an English translation: run `make messages`"
    assert stale == [], "messages the code no longer has: run `make messages`"


# --- the admin's language -------------------------------------------------------------------

DELEGATIONS = "/admin/registry/tokendelegation/"
OVERVIEW = "/admin/audit/auditevent/overview/"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("accept", "delegations", "overview", "log_out"),
    [
        ("en", "Token delegations (Aegis)", "Audit overview (last 24 hours)", "Log out"),
        (
            "en-US,en;q=0.9",
            "Token delegations (Aegis)",
            "Audit overview (last 24 hours)",
            "Log out",
        ),
        ("ko", "토큰 위임 (Aegis)", "감사 개요 (최근 24시간)", "로그아웃"),
        ("ko-KR,ko;q=0.9,en;q=0.5", "토큰 위임 (Aegis)", "감사 개요 (최근 24시간)", "로그아웃"),
    ],
)
def test_the_admin_speaks_the_browsers_language(
    admin_client, accept, delegations, overview, log_out
):
    listed = admin_client.get(DELEGATIONS, headers={"accept-language": accept})
    assert listed.status_code == 200
    assert delegations in listed.content.decode()
    assert log_out in listed.content.decode()
    summary = admin_client.get(OVERVIEW, headers={"accept-language": accept}).content.decode()
    assert overview in summary


@pytest.mark.django_db
def test_without_a_browser_language_the_admin_speaks_language_code(admin_client, settings):
    assert "토큰 위임 (Aegis)" in admin_client.get(DELEGATIONS).content.decode()
    settings.LANGUAGE_CODE = "en"
    body = admin_client.get(DELEGATIONS).content.decode()
    assert "Token delegations (Aegis)" in body and "토큰 위임" not in body
    assert "Audit overview (last 24 hours)" in admin_client.get(OVERVIEW).content.decode()


@pytest.mark.django_db
def test_a_language_the_product_does_not_speak_falls_back_to_korean(admin_client):
    body = admin_client.get(DELEGATIONS, headers={"accept-language": "fr"}).content.decode()
    assert "토큰 위임 (Aegis)" in body

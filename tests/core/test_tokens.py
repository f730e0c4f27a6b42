import hashlib
import hmac

from django.test import override_settings

from audit.services import prompt_fingerprint
from core.tokens import keyed_fingerprint, token_fingerprint


@override_settings(TOKEN_FINGERPRINT_KEY="k" * 32)
def test_a_fingerprint_is_the_hmac_sha256_of_the_value_under_the_key():
    expected = hmac.new(b"k" * 32, b"hbvpd_value", hashlib.sha256).hexdigest()
    assert token_fingerprint("hbvpd_value") == keyed_fingerprint("hbvpd_value") == expected


@override_settings(TOKEN_FINGERPRINT_KEY="k" * 32)
def test_a_prompt_never_fingerprints_like_a_token_of_the_same_text():
    expected = hmac.new(b"k" * 32, b"prompt:same text", hashlib.sha256).hexdigest()
    assert prompt_fingerprint("same text") == expected
    assert prompt_fingerprint("same text") != token_fingerprint("same text")

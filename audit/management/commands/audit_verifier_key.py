from django.core.management.base import BaseCommand

from audit.checkpoints import configured_verifiers


class Command(BaseCommand):
    help = (
        "Print the verifier key of the audit checkpoints' signer (name+keyid+base64), for "
        "`python -m audit.verify FILE --public-key KEY`. --all adds the earlier keys still "
        "trusted (AUDIT_VERIFIER_KEYS), a retired one as KEY@SIZE (the last size it signed)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="also the earlier trusted keys")

    def handle(self, *args, all, **options):
        verifiers = configured_verifiers()
        for verifier in verifiers if all else verifiers[:1]:
            self.stdout.write(verifier.text_with_range())

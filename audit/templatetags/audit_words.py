from django import template

from audit.wording import chain_words, reason_label

register = template.Library()
register.filter("reason_label", reason_label)
register.filter("chain_words", chain_words)

"""How an answer's cells read in the console: numbers with thousands separators, and amounts of
money in won. The answer itself (and its CSV download) keeps the plain values."""

# The KB's money fields; an aggregate of one ("sum_amount", "avg_monthly_premium") is money too.
MONEY_FIELDS = ("monthly_premium", "sum_insured", "amount", "premium")


def is_money(column_name: str) -> bool:
    return any(column_name == name or column_name.endswith(f"_{name}") for name in MONEY_FIELDS)


def cell_text(value, *, column_name: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    whole = isinstance(value, int) or value.is_integer()
    figure = f"{int(value):,}" if whole else f"{value:,.2f}"
    return f"{figure}원" if is_money(column_name) else figure

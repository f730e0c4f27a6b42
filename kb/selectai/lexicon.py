"""Morphological analysis (kiwipiepy) and the phrase lexicon the prompt parser matches against.

Phrases are written as natural text and analysed with the same Kiwi instance as prompts, then
matched on token boundaries by their surface (spaces removed) or their joined morpheme forms, so
"지난달" / "지난 달" / "담당고객" / "담당 고객" all match without hand-written string splitting.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .romanise import romanise
from .vocabulary import Vocabulary

# Tags dropped before matching: punctuation/symbols and particles (조사), so "고객의 보험료" and
# "고객 보험료" look alike. Endings (E*) stay because they are part of forms like 지나+ᆫ ("지난").
_SKIP_TAG_PREFIXES = ("SF", "SP", "SS", "SE", "SO", "SW", "SB", "J", "W_EMOJI", "W_URL", "W_EMAIL",
                      "W_HASHTAG", "W_MENTION", "UN", "Z_")  # fmt: skip

log = logging.getLogger(__name__)

MAX_SPAN = 6  # longest phrase, in tokens, worth trying at one position

# What a phrase means: (kind, value). The kind decides the value's type (a column's name, True for
# a bare marker, None for a kind with no value, a (kind, code) pair for an id), so the value is
# typed loosely and read as its kind says.
Payload = tuple[str, Any]


@dataclass(frozen=True)
class Token:
    form: str  # morpheme form; lowercased for Latin script
    tag: str  # Sejong-style POS tag from Kiwi (NNG, SN, VV, SL, ...)
    start: int  # character offsets into the analysed text
    end: int
    word: int  # index of the whitespace-separated word (어절) the morpheme belongs to


# ---------------------------------------------------------------------------------------------
# Kiwi: constructing it takes about a second, so one shared instance is made lazily. Kiwi is not
# documented as safe for concurrent add_user_word + tokenize, hence the lock (tokenising a prompt
# takes well under a millisecond, so serialising is cheap).
_kiwi = None
_kiwi_lock = threading.Lock()
_user_words: set[str] = set()
# Adding a user word after Kiwi has analysed text makes the next analysis rebuild its model,
# which costs as much as loading it (seconds). User words are only a segmentation hint (phrases
# are matched across token boundaries anyway), so they are added only before the first analysis.
_kiwi_has_analysed = False


def _get_kiwi():
    global _kiwi
    if _kiwi is None:
        from kiwipiepy import Kiwi  # imported lazily: importing loads the model

        _kiwi = Kiwi()
    return _kiwi


def add_user_words(words: Iterable[str]) -> None:
    """Register proper nouns (product, branch, planner names) so Kiwi keeps them in one piece."""
    with _kiwi_lock:
        if _kiwi_has_analysed:
            log.debug("kiwi already in use; not adding user words")
            return
        kiwi = _get_kiwi()
        for word in words:
            word = word.strip()
            if word and " " not in word and word not in _user_words:
                _user_words.add(word)
                try:
                    kiwi.add_user_word(word, "NNP", 0.0)
                except Exception:  # a word Kiwi rejects only loses a segmentation hint
                    log.debug("kiwi rejected user word %r", word)


def analyse(text: str) -> list[Token]:
    """Tokenise with Kiwi, keeping what matters for matching (no punctuation or particles)."""
    if not text.strip():
        return []
    global _kiwi_has_analysed
    with _kiwi_lock:
        # z_coda splits a stray final consonant off a syllable ("했어욬"); questions to a database
        # rarely carry one, and leaving it on costs a quarter of Kiwi's time per prompt.
        raw = _get_kiwi().tokenize(text, z_coda=False)
        _kiwi_has_analysed = True
    tokens = []
    for tok in raw:
        tag = str(tok.tag)
        if tag.startswith(_SKIP_TAG_PREFIXES):
            continue
        form = tok.form.lower() if tag == "SL" else tok.form
        start, end = tok.start, tok.start + tok.len
        numeral = _SPELT_AMOUNT.fullmatch(form) if tag != "NR" else None
        # "삼억육천오백팔십오만천삼십일원": Kiwi takes a long numeral for a noun (but "만 45세":
        # a lone 만 is the full age there)
        if numeral and len(numeral.group(1)) > 1:
            cut = start + len(numeral.group(1))
            tokens.append(Token(numeral.group(1), "NR", start, cut, tok.word_position))
            if numeral.group(2):
                tokens.append(Token("원", "NNB", cut, end, tok.word_position))
            continue
        tokens.append(Token(form, tag, start, end, tok.word_position))
    return tokens


_NUMERALS = "일이삼사오육칠팔구십백천만억조"
_SPELT_AMOUNT = re.compile(rf"([{_NUMERALS}]*[십백천만억조][{_NUMERALS}]*)(원?)")


# ---------------------------------------------------------------------------------------------
# Static phrases. Each entry: payloads -> phrases. A payload is (kind, value). A phrase written as
# "form/TAG" matches one token with that form whose tag starts with TAG (used where the bare form
# is ambiguous, e.g. "수" the count noun versus "수" in "볼 수 있어").
#
# kinds: noun (customer/contract/premium/payment), sold, measure, detail, list, history, birth,
# negate, text_op,
# pay_status, contract_status, expire, future, recent, time, asof, new, order, agg, how_much,
# extreme, rank, sort, most, group, dim, column, cmp, gender, mine, all, bypass.
PHRASES: list[tuple[tuple[Payload, ...], tuple[str, ...]]] = [
    # --- what the question is about -----------------------------------------------------------
    ((("noun", "customer"),), ("고객", "고객님", "손님", "가입자", "계약자", "피보험자", "회원",
                               "어르신", "어르신들", "elderly",
                               "사람", "사람들", "분들", "people", "persons", "person",
                               "customer", "customers", "client", "clients")),
    ((("noun", "contract"),), ("계약", "계약건", "계약 건", "보험계약", "보험 계약", "증권",
                               "contract", "contracts", "policy", "policies")),
    # Sales words point at contracts without being the thing ranked ("가장 많이 팔린 상품").
    ((("sold", True),), ("판매", "판매된", "팔린", "팔리/VV", "팔/VV", "sold", "selling", "sales",
                         "sell")),
    ((("noun", "premium"),), ("보험료", "납입료", "premium", "premiums")),
    ((("noun", "payment"),), ("납입", "납부", "수납", "입금", "결제", "payment", "payments",
                              "billing")),
    ((("history", True),), ("내역", "이력", "기록", "history", "records", "transactions")),
    ((("measure", "monthly_premium"),), ("한 달에 내는 보험료", "한 달 보험료", "한달 보험료",
                                         "한 달에 나가는 보험료", "매달 내는 보험료",
                                         "매달 나가는 보험료", "매월 내는 보험료",
                                         "월보험료", "월 보험료", "월납 보험료", "월납보험료",
                                         "월납", "월납입액", "월 납입액", "월납입금",
                                         "monthly premium", "monthly premiums")),
    ((("measure", "sum_insured"),), ("가입금액", "가입 금액", "보장금액", "보장 금액",
                                     "보험가입금액", "보험금액", "sum insured", "coverage",
                                     "insured for",
                                     "insured amount")),
    ((("measure", "amount"),), ("금액", "액수", "액/NNG", "amount", "amounts")),
    ((("measure", "age"),), ("나이", "연령", "나이가", "age")),
    ((("detail", True),), ("상세", "상세 정보", "상세정보", "정보", "세부", "세부 정보", "자세히",
                           "자세한", "디테일", "프로필", "detail", "details", "info", "information",
                           "profile")),
    ((("list", True),), ("목록", "명단", "리스트", "list", "roster")),
    # --- statuses ----------------------------------------------------------------------------
    ((("pay_status", "미납"),), ("미납", "미납부", "미수", "미수금", "연체", "체납", "안낸",
                                 "못 낸", "밀린", "unpaid", "overdue", "missed", "outstanding",
                                 "delinquent")),
    # Negated payment ("납입 안 한", "내지 않은") is the same as 미납.
    ((("pay_status", "미납"), ("noun", "payment")), ("납입 안 한", "납입 안한", "납입 안 된",
                                                     "납입 안된", "납입하지 않은", "납입 하지 않은",
                                                     "납부 안 한", "납부 안한", "납부하지 않은",
                                                     "내지 않은", "안 낸", "not paid",
                                                     "not yet paid", "haven't come in",
                                                     "have not come in", "not come in",
                                                     "went unpaid", "gone unpaid")),
    ((("pay_status", "미납"), ("noun", "customer")), ("미납자", "연체자", "체납자", "미납 고객",
                                                      "미납고객", "연체 고객")),
    ((("pay_status", "미납"), ("measure", "amount")), ("미납액", "미납금", "미납 금액", "미납금액",
                                                       "연체액", "연체 금액")),
    ((("pay_status", "납입"),), ("납입된", "납입한", "납입 완료", "납입완료", "완납", "납부된",
                                 "납부한", "납부 완료", "납부완료", "수납된", "수납 완료", "낸",
                                 "정상 납입", "정상납입", "paid")),
    ((("pay_status", "납입"), ("measure", "amount")), ("납입액", "납입 금액", "납입금액", "납부액",
                                                       "수납액")),
    ((("pay_status", "납입"), ("noun", "premium")), ("납입 보험료", "납입보험료", "납부 보험료",
                                                     "낸 보험료")),
    ((("contract_status", "유지"),), ("유지", "유지 중", "유지중", "유지된", "유지되는",
                                      "유지 중인", "유효", "유효한", "정상 계약", "active",
                                      "in force", "in-force", "살아있는", "살아 있는", "살아있",
                                      "살아 있", "alive")),
    ((("contract_status", "실효"),), ("실효", "실효된", "효력 상실", "lapsed", "lapse",
                                      "효력 없어진", "효력이 없어진", "효력 없는", "효력이 없는")),
    ((("contract_status", "해지"),), ("해지", "해지된", "해지한", "해약", "해약된", "해약한",
                                      "취소된", "cancelled", "canceled", "terminated",
                                      "surrendered", "해지 들어간", "해지가 들어간",
                                      "해지 들어온")),
    ((("expire", None),), ("만기", "만료", "expire", "expires", "expiry", "maturity", "mature",
                           "maturities", "maturing")),
    ((("expire", "past"),), ("만기된", "만료된", "만기 된", "expired", "matured", "만기 끝난",
                              "만기가 끝난", "만기 지난", "만기가 지난")),
    ((("expire", "future"),), ("만기 예정", "만기예정", "만기 도래", "만기도래", "만기 임박",
                               "만료 예정", "만료예정", "expiring")),
    ((("future", True),), ("예정", "예정된", "예정인", "앞으로", "향후", "다가오는", "다가올", "곧",
                           "임박", "임박한", "도래", "도래하는", "upcoming", "coming", "soon",
                           "future", "next")),
    # --- time --------------------------------------------------------------------------------
    ((("recent", True),), ("최근", "지난", "직전", "과거", "recent", "recently", "last", "past",
                           "previous")),
    ((("time", "this_month"),), ("이번 달", "이번달", "이달", "금월", "당월", "이번 월",
                                 "this month", "current month")),
    ((("time", "last_month"),), ("지난달", "지난 달", "저번 달", "저번달", "전월", "전달",
                                 "지난 월", "last month", "previous month", "prior month")),
    ((("time", "next_month"),), ("다음 달", "다음달", "내달", "익월", "차월", "담달", "다음 월",
                                 "next month", "coming month")),
    ((("time", "this_year"),), ("올해", "금년", "올 해", "금년도", "올해년도", "이번 해",
                                "this year", "current year", "ytd", "연말", "올해 말", "올 연말",
                                "year end", "year-end", "end of the year", "end of this year")),
    ((("time", "last_year"),), ("작년", "지난해", "지난 해", "전년", "전년도", "작년도",
                                "last year", "previous year")),
    ((("time", "year_before_last"),), ("재작년",)),
    # "올 상반기", "올 1분기": 올 is this year's.
    ((("time", "this_year"),), ("올/NNG", "올/MM")),
    ((("time", "next_year"),), ("내년", "다음 해", "내년도", "next year")),
    ((("time", "h1"),), ("상반기", "first half")),
    ((("time", "h2"),), ("하반기", "second half")),
    ((("time", "today"),), ("오늘", "금일", "today")),
    ((("time", "tomorrow"),), ("내일", "tomorrow")),
    ((("time", "yesterday"),), ("어제", "yesterday")),
    ((("time", "this_week"),), ("이번 주", "이번주", "금주", "this week")),
    ((("time", "last_week"),), ("지난주", "지난 주", "저번 주", "저번주", "last week")),
    ((("time", "next_week"),), ("다음 주", "다음주", "차주", "next week")),
    ((("time", "this_quarter"),), ("이번 분기", "이번분기", "this quarter")),
    ((("time", "last_quarter"),), ("지난 분기", "지난분기", "전 분기", "전분기", "last quarter")),
    ((("time", "next_quarter"),), ("다음 분기", "다음분기", "next quarter")),
    # "오늘 기준" / "현재" state the as-of date, not a period to filter on.
    ((("asof", True),), ("오늘 기준", "오늘 기준으로", "현재 기준", "현재", "지금", "as of today",
                         "currently")),
    ((("new", True),), ("신규", "새로", "새로운", "가입", "가입한", "가입된", "체결", "체결된",
                        "시작", "시작된", "시작한", "개시", "계약한", "계약된", "new", "joined",
                        "signed", "opened", "started")),
    ((("order", "desc_date"),), ("최신순", "최근순", "최신", "최근 순", "가입일 순", "latest",
                                 "newest")),
    ((("order", "asc_date"),), ("오래된 순", "오래된순", "오래된", "오래 된", "먼저 가입한",
                                "oldest", "earliest")),
    # Age in words: "가장 젊은 고객" ranks by age, youngest first.
    ((("rank", "bottom"), ("measure", "age")), ("젊은", "젊/VA", "어린", "나이 어린", "나이가 어린",
                                                "youngest", "younger")),
    # "계약일 순으로": sort by the column just named.
    ((("order", "by_column"),), ("순/NN", "순서", "순서로", "sorted by", "order by", "정렬",
                                 "sort", "sorted", "ordered", "arrange")),
    ((("order", "asc_column"),), ("빠른 순", "빠른순", "이른 순", "가나다순", "가나다 순",
                                  "alphabetical", "alphabetically")),
    ((("order", "desc_column"),), ("늦은 순", "늦은순")),
    # --- aggregates, ranking, grouping -------------------------------------------------------
    ((("agg", "sum"),), ("합계", "합", "총합", "총", "합산", "누계", "누적", "total", "sum",
                         "totals")),
    # "얼마야" asks for an amount: a sum, unless another aggregate (평균 ...) was named.
    ((("how_much", True),), ("얼마", "얼마나", "how much")),
    ((("agg", "sum"), ("measure", "amount")), ("총액", "총 금액", "총금액", "합계 금액")),
    ((("agg", "avg"),), ("평균", "평균값", "평균적", "average", "avg", "mean")),
    ((("agg", "count"),), ("수/NNG", "건수", "개수", "갯수", "인원", "인원수", "숫자", "몇",
                           "count", "number", "how many", "카운트")),
    ((("extreme", "min"),), ("최소", "최솟값", "최저", "최소값", "minimum", "min")),
    ((("extreme", "min"), ("measure", "monthly_premium")), ("cheapest", "least expensive")),
    ((("extreme", "max"),), ("최대", "최댓값", "최고", "최대값", "maximum", "max")),
    # "priciest", "cheapest": by the monthly premium, the price a contract has
    ((("extreme", "max"), ("measure", "monthly_premium")), ("priciest", "costliest",
                                                           "most expensive")),
    ((("rank", "top"),), ("상위", "탑", "top", "highest", "largest", "biggest", "많/VA", "높/VA",
                          "크/VA", "많이", "높게", "순위", "비싸/VA", "비싼", "expensive")),
    ((("rank", "bottom"),), ("하위", "최하위", "bottom", "lowest", "smallest", "least", "fewest",
                             "적/VA", "낮/VA", "작/VA", "싸/VA", "저렴", "저렴한", "cheapest")),
    # A sort order rather than a cut-off: "높은 순으로" keeps the caller's limit.
    ((("sort", "desc"),), ("많은 순", "높은 순", "큰 순", "많은순", "높은순", "내림차순",
                           "descending")),
    ((("sort", "asc"),), ("적은 순", "낮은 순", "작은 순", "적은순", "낮은순", "오름차순",
                          "ascending")),
    ((("most", True),), ("가장", "제일", "젤", "most")),
    ((("group", True),), ("별/XSN", "별로", "마다", "단위", "분포", "분포도", "by", "per", "each",
                          "distribution", "breakdown")),
    ((("group", True), ("dim", "month")), ("매월", "매달", "달마다", "monthly", "month by month")),
    ((("dim", "branch"),), ("지점", "점포", "영업점", "branch", "branches", "office", "offices")),
    # "지역별" groups by the branch's region; a region's name ("서울") is a condition (below)
    ((("dim", "region"),), ("지역", "시도", "region", "regions")),
    ((("dim", "planner"),), ("설계사", "담당자", "담당 설계사", "플래너", "fp", "컨설턴트",
                             "planner", "planners", "agent", "agents")),
    ((("dim", "product"),), ("상품", "보험상품", "보험 상품", "상품명", "product", "products")),
    ((("dim", "category"),), ("product category", "product categories", "product type",
                              "상품 분류", "상품분류", "상품 카테고리", "상품 종류", "상품종류",
                              "insurance type", "type of insurance",
                              "카테고리", "종류", "분류", "상품군", "보종", "유형", "보험 종류",
                              "보험종류", "category", "categories", "type", "types")),
    ((("dim", "month"),), ("월/NNG", "달/NNG", "월간", "month", "months")),
    ((("dim", "grade"),), ("등급", "grade", "grades", "tier")),
    ((("dim", "grade"), ("noun", "customer")), ("고객등급", "고객 등급")),
    ((("dim", "status"),), ("상태", "status")),
    ((("dim", "status"), ("noun", "contract")), ("계약상태", "계약 상태", "contract status")),
    ((("dim", "status"), ("noun", "payment")), ("납입상태", "납입 상태", "납부 상태",
                                                "payment status")),
    ((("dim", "gender"),), ("성별", "남녀", "남여", "남녀별", "gender", "sex")),
    ((("dim", "age_group"),), ("연령대", "나이대", "연령층", "age group", "age groups",
                               "age band")),
    # Columns a question may ask to see ("고객 전화번호 목록"); also keeps them from looking like
    # customer names. 만기일 is a column and an expiry cue at once.
    ((("column", "phone"),), ("전화번호", "연락처", "휴대폰", "핸드폰", "휴대폰 번호", "phone",
                             "phone number")),
    ((("column", "rrn"),), ("주민번호", "주민등록번호", "주민 번호", "주민 등록 번호", "rrn",
                           "ssn")),
    ((("column", "birth_date"),), ("생년월일", "생일", "출생일", "birth date", "birthday")),
    ((("column", "customer_name"),), ("이름", "성명", "name", "names")),
    ((("column", "customer_name"), ("noun", "customer")), ("고객명", "고객 이름", "고객이름")),
    ((("column", "joined_on"),), ("가입일", "가입 일자", "가입일자", "join date")),
    ((("column", "start_date"),), ("계약일", "계약 시작일", "시작일", "계약일자", "start date")),
    ((("column", "end_date"), ("expire", None)), ("만기일", "만기 일자", "만기일자", "종료일",
                                                   "end date")),
    ((("column", "payment_day"),), ("이체일", "납입일", "납입 일자", "payment day")),
    ((("column", "paid_date"),), ("납부일", "납부 일자", "paid date")),
    # Birth: a year or date next to these is a birth date, never a join date ("1987년생").
    ((("birth", True),), ("출생", "출생한", "태어난", "태어나/VV", "생년", "출생연도", "출생년도",
                          "born", "birth year")),
    # Exclusion: the value before a Korean word, or after an English one, is left out.
    ((("negate", True),), ("제외", "제외한", "제외하고", "말고", "빼고", "뺀", "빼/VV", "아닌",
                           "아니/VCN", "이외", "이외의", "외/NNB", "except", "excluding",
                           "other than", "not", "non", "without")),
    # A condition on a column's text ("주민번호가 87로 시작하는").
    ((("text_op", "startswith"),), ("시작하는", "시작한다", "시작되는", "starts with",
                                    "starting with", "begins with", "beginning with")),
    ((("text_op", "startswith"),), ("앞자리", "앞 자리", "앞번호", "first digits")),
    ((("text_op", "endswith"),), ("끝자리", "끝 자리", "뒷자리", "뒷 자리", "뒷번호", "끝번호",
                                  "끝나는", "끝나/VV", "ends with", "ending with", "last digits")),
    ((("column", "phone"), ("text_op", "contains")), ("국번", "전화 국번", "가운데 번호",
                                                     "가운데 자리", "중간 번호", "중간 자리",
                                                     "middle digits")),
    ((("text_op", "endswith"),), ("마지막 숫자", "마지막 자리", "마지막 번호", "끝 숫자",
                                  "last digit")),
    ((("text_op", "contains"),), ("포함", "포함된", "포함하는", "들어간", "들어가는", "들어있는",
                                  "들어 있는", "contains",
                                  "containing")),
    # --- comparisons and filters ---------------------------------------------------------------
    ((("cmp", "gt"), ("measure", "age")), ("older than", "aged over", "over the age of")),
    ((("cmp", "lt"), ("measure", "age")), ("younger than", "aged under", "under the age of")),
    ((("cmp", "gte"), ("measure", "age")), ("or older", "and older", "or over")),
    ((("cmp", "lte"), ("measure", "age")), ("or younger", "and younger")),
    ((("measure", "age"),), ("aged", "years old", "year old")),
    ((("cmp", "gte"),), ("이상", "at least", "or more", "or above", "and up", "and above",
                         "and over", "or higher", "or greater", "no less than", "not less than",
                         "적어도")),
    ((("cmp", "gt"),), ("초과", "넘/VV", "넘게", "over", "above", "more than", "greater than",
                        "higher than", "bigger than", "exceeding")),
    ((("cmp", "lte"),), ("이하", "at most", "or less", "no more than", "not more than", "up to",
                         "or under", "or below", "or fewer", "or lower")),
    ((("cmp", "lt"),), ("미만", "under", "below", "less than", "fewer than", "lower than")),
    # "A와 B 비교": A and B side by side.
    ((("compare", True),), ("비교", "비교해", "대비", "compare", "compared", "comparison",
                            "versus", "vs")),
    # "다른 설계사", "other branches": everyone but the asker (kb.selectai.stages.other_stage).
    ((("other", True),), ("다른", "타", "남의", "other", "another", "others")),
    ((("gender", "F"),), ("여성", "여자", "여성분", "female", "women", "woman")),
    ((("gender", "M"),), ("남성", "남자", "남성분", "male", "men", "man")),
    # --- who is asking / attempts to widen the scope (noted, never obeyed) --------------------
    ((("mine", True),), ("담당", "내", "나의", "제/NP", "저/NP", "우리", "본인", "my", "mine",
                         "our")),
    # "모든 상태": every status, where a premium total would count in-force contracts only.
    ((("all_statuses", True),), ("모든 상태", "전체 상태", "모든 계약 상태", "상태 무관",
                                 "상태와 무관하게", "상태 상관없이", "상태에 관계없이",
                                 "all statuses", "every status", "any status",
                                 "regardless of status", "all contract statuses")),
    ((("all", True),), ("전체", "모든", "전부", "모두", "전사", "회사 전체", "all", "every",
                        "entire", "in the company", "company-wide", "whole company",
                        "everyone", "whole")),
    ((("bypass", True),), ("무시", "우회", "권한", "정책", "제한 없이", "관리자", "규칙", "ignore",
                           "access rules", "rules", "restrictions", "permissions",
                           "bypass", "policy", "override", "admin", "sudo", "vpd")),
]  # fmt: skip

# Data the KB does not hold: a question about it is refused by name (kb.selectai.parser).
ABSENT_TOPICS: dict[str, tuple[str, ...]] = {
    "claims": (
        "청구",
        "보험금 청구",
        "보험금청구",
        "청구 건수",
        "청구건수",
        "보험금 지급",
        "지급 내역",
        "지급액",
        "사고",
        "보상",
        "claim",
        "claims",
        "payout",
        "payouts",
    ),
    "address": (
        "주소",
        "거주지",
        "사는 곳",
        "집 주소",
        "집주소",
        "자택",
        "우편번호",
        "address",
        "addresses",
        "zip code",
        "postcode",
    ),
    "email": ("이메일", "메일", "전자우편", "메일 주소", "email", "e-mail", "emails"),
    "income": (
        "소득",
        "연봉",
        "월급",
        "수입",
        "연소득",
        "급여",
        "재산",
        "income",
        "salary",
        "salaries",
        "earnings",
        "wealth",
    ),
    "credit": (
        "신용",
        "신용등급",
        "신용 등급",
        "신용점수",
        "신용 점수",
        "credit",
        "credit score",
        "credit scores",
        "credit rating",
    ),
    "medical": (
        "병력",
        "진료",
        "진료 기록",
        "진단",
        "질병",
        "병원",
        "의료 기록",
        "의료기록",
        "건강검진",
        "medical",
        "medical records",
        "diagnosis",
        "illness",
        "hospital",
    ),
    "commission": (
        "수수료",
        "수당",
        "커미션",
        "인센티브",
        "commission",
        "commissions",
        "incentive",
        "incentives",
        "bonus",
    ),
    "forecast": (
        "예측",
        "예상",
        "전망",
        "추정",
        "forecast",
        "forecasts",
        "predict",
        "prediction",
        "predicted",
        "projected",
        "projection",
        "estimate",
    ),
    "job": ("직업", "직장", "회사명", "occupation", "job", "jobs", "employer"),
    "consent": ("마케팅 동의", "수신 동의", "동의 여부", "마케팅", "consent", "marketing"),
    "family": ("가족", "배우자", "자녀", "부양가족", "family", "spouse", "children"),
    "account": ("계좌", "계좌번호", "은행", "bank account", "account number", "bank"),
    "vehicle": ("차량번호", "차량 번호", "차종", "vehicle", "car number", "license plate"),
    "beneficiary": ("수익자", "보험수익자", "beneficiary", "beneficiaries"),
    "nationality": ("국적", "nationality"),
}
PHRASES += [((("absent", topic),), words) for topic, words in ABSENT_TOPICS.items()]

# Domain synonyms resolved against the vocabulary at build time: phrase -> a fragment of the
# product name (or the category name) it stands for. Ignored when the vocabulary lacks it.
PRODUCT_SYNONYMS: dict[str, str] = {
    "실손": "실손", "실비": "실손", "실비보험": "실손", "실손보험": "실손", "의료실비": "실손",
    "cancer": "암보험", "whole life": "종신", "driver": "운전자", "car insurance": "자동차보험",
}  # fmt: skip
CATEGORY_SYNONYMS: dict[str, str] = {
    "auto": "자동차", "car": "자동차", "health": "건강", "의료": "건강", "life": "생명",
    "accident": "상해", "auto insurance": "자동차", "health insurance": "건강",
    "life insurance": "생명", "accident insurance": "상해",
}  # fmt: skip
GRADE_SYNONYMS: dict[str, str] = {"브이아이피": "VIP", "normal": "일반",
                                  "regular": "일반", "standard": "일반"}  # fmt: skip

# Words that look like names of customers ("우수 고객") but are not.
NOT_NAMES = frozenset(
    "우수 기존 주요 장기 단골 신규 전체 모든 일반 여성 남성 해당 모든 이번 지난 고객 보험 "
    "계약 미납 납입 연체 최근 상위 하위 정상 휴면 전부 각각 개별 특정 해지 실효 유지 만기 "
    "대상 기준 관련 이런 저런 그런 어떤 무슨 우리 본인 담당 평균 신용 개인 법인 우량 휴면 잠재 "
    "가망 핵심 관리 소속 고령 주소 해외 국내 기업 단체 주주 이외 제외 시작 포함 어르신".split()
)


@dataclass(frozen=True)
class Match:
    payloads: tuple[Payload, ...]
    first: int  # token index range [first, last]
    last: int
    text: str  # surface text, for the interpretation


class Lexicon:
    """Phrase table for one vocabulary: joined keys -> payloads, plus tag-guarded single forms."""

    def __init__(self, entries: Sequence[tuple[tuple[Payload, ...], str]]):
        self._by_key: dict[str, tuple[Payload, ...]] = {}
        self._by_form_tag: dict[str, list[tuple[str, tuple[Payload, ...]]]] = {}
        for payloads, phrase in entries:
            if "/" in phrase and phrase.rsplit("/", 1)[1].isupper():
                form, tag = phrase.rsplit("/", 1)
                self._by_form_tag.setdefault(form, []).append((tag, payloads))
                continue
            for key in _phrase_keys(phrase):
                # Later entries (vocabulary) win over earlier (generic) ones for the same key.
                self._by_key[key] = payloads
        self.keys = frozenset(self._by_key)
        # Every English word of the phrases: what a misspelt English word is corrected to.
        self.english_words = frozenset(
            word.lower()
            for _, phrase in entries
            for word in phrase.split("/")[0].split()
            if word.isascii() and word.isalpha()
        )

    def match(self, tokens: Sequence[Token], text: str, blocked: set[int]) -> list[Match]:
        """Greedy longest match, left to right, never crossing a blocked (already used) token."""
        matches: list[Match] = []
        i, n = 0, len(tokens)
        while i < n:
            if i in blocked:
                i += 1
                continue
            found = None
            # Keys for the spans starting at i, grown one token at a time (up to a blocked one),
            # then tried longest first.
            spans: list[tuple[int, str, str]] = []
            surface = forms = ""
            for last in range(i, min(n, i + MAX_SPAN)):
                if last in blocked:
                    break
                start = tokens[i].start if last == i else tokens[last - 1].end
                surface += _squash(text[start : tokens[last].end])
                forms += tokens[last].form
                spans.append((last, surface, forms))
            for last, surface, forms in reversed(spans):
                payloads = self._by_key.get(surface) or self._by_key.get(forms)
                if payloads:
                    found = Match(payloads, i, last, text[tokens[i].start : tokens[last].end])
                    break
            if found is None:
                for tag, payloads in self._by_form_tag.get(tokens[i].form, ()):
                    if tokens[i].tag.startswith(tag):
                        found = Match(payloads, i, i, text[tokens[i].start : tokens[i].end])
                        break
            if found is None:
                matches += self._compound(tokens[i], i)
                i += 1
                continue
            matches.append(found)
            i = found.last + 1
        return matches

    def _compound(self, token: Token, i: int) -> list[Match]:
        """A noun Kiwi kept whole ("유지계약목록"), read as known words end to end, or nothing."""
        word = token.form
        if not token.tag.startswith("NN") or len(word) < 4:
            return []
        pieces: list[Match] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):  # the longest known word first
                payloads = self._by_key.get(word[start:end])
                if payloads and end - start >= 2:
                    pieces.append(Match(payloads, i, i, word[start:end]))
                    start = end
                    break
            else:
                return []
        return pieces if len(pieces) > 1 else []

    def typo_matches(self, tokens: Sequence[Token], text: str, blocked: set[int]) -> list[Match]:
        """Recover common typos ("보험로", "고겍", "계악") in runs of tokens nothing matched.

        Kiwi splits a misspelt word unpredictably ("고겍" -> 고것+이+ᆨ), so the unmatched run's
        surface is compared, jamo by jamo, with a short list of core words (see `_one_typo_apart`).
        """
        matches: list[Match] = []
        i, n = 0, len(tokens)
        while i < n:
            if i in blocked:
                i += 1
                continue
            last = i
            while (
                last + 1 < n and last + 1 not in blocked and tokens[last + 1].word == tokens[i].word
            ):
                last += 1
            surface = _squash(text[tokens[i].start : tokens[last].end])
            for keyword in TYPO_KEYWORDS:
                payloads = self._by_key.get(keyword)
                if payloads is None or len(surface) < len(keyword):
                    continue
                if any(
                    _one_typo_apart(surface[k : k + len(keyword)], keyword)
                    for k in range(len(surface) - len(keyword) + 1)
                ):
                    matches.append(Match(payloads, i, last, keyword))
                    break
            i = last + 1
        return matches


# Core words worth typo recovery. Short, frequent words only: a wider list would turn real words
# into keywords (see `_one_typo_apart` for which edits count as a typo).
TYPO_KEYWORDS = ("월보험료", "보험료", "설계사", "연령대", "고객", "계약", "미납", "납입", "목록",
                 "명단", "상세", "만기", "평균", "합계", "내역")  # fmt: skip

_HANGUL_BASE, _JUNG_COUNT, _JONG_COUNT = 0xAC00, 21, 28


def _jamo(syllable: str) -> tuple[int, int, int] | None:
    code = ord(syllable) - _HANGUL_BASE
    if not 0 <= code < 11172:
        return None
    return (
        code // (_JUNG_COUNT * _JONG_COUNT),
        (code // _JONG_COUNT) % _JUNG_COUNT,
        code % _JONG_COUNT,
    )


def _one_typo_apart(candidate: str, keyword: str) -> bool:
    """True when exactly one syllable differs only in its vowel or final consonant.

    Vowel and final-consonant slips (고겍, 보험로, 보헙료) are the usual Korean typos; a different
    initial consonant usually makes another real word (고객 -> 고액), so it never counts.
    """
    if len(candidate) != len(keyword) or candidate == keyword:
        return False
    differing = [(a, b) for a, b in zip(candidate, keyword, strict=True) if a != b]
    if len(differing) != 1:
        return False
    got, want = _jamo(differing[0][0]), _jamo(differing[0][1])
    if got is None or want is None or got[0] != want[0]:
        return False
    return (got[1] != want[1]) != (got[2] != want[2])  # exactly one of vowel / final differs


def _squash(text: str) -> str:
    return "".join(text.split()).lower()


def _phrase_keys(phrase: str) -> set[str]:
    """Keys under which a phrase is found: its squashed text and its joined Kiwi morpheme forms."""
    keys = {_squash(phrase)}
    forms = "".join(t.form for t in analyse(phrase))
    if forms:
        keys.add(forms)
    return keys


# ---------------------------------------------------------------------------------------------
# Vocabulary-derived phrases.


def _product_aliases(vocabulary: Vocabulary) -> dict[str, str]:
    """alias -> product_code, keeping only aliases that point at exactly one product."""
    categories = set(vocabulary.categories)
    candidates: dict[str, set[str]] = {}
    for code, product in vocabulary.products.items():
        base = product.name.removeprefix("KB").strip()
        words = base.split()
        aliases = {product.name, base, code, *words}
        for word in words:
            stem = word.removesuffix("보험")
            if stem and stem != word and stem not in categories:
                aliases.add(stem)
        for alias in aliases:
            candidates.setdefault(alias, set()).add(code)
    resolved = {alias: next(iter(codes)) for alias, codes in candidates.items() if len(codes) == 1}
    for synonym, fragment in PRODUCT_SYNONYMS.items():
        codes = [c for c, p in vocabulary.products.items() if fragment in p.name]
        if len(codes) == 1 and synonym not in resolved:
            resolved[synonym] = codes[0]
    return resolved


def vocabulary_entries(vocabulary: Vocabulary) -> list[tuple[tuple[Payload, ...], str]]:
    entries: list[tuple[tuple[Payload, ...], str]] = []
    for category in vocabulary.categories:
        for phrase in (category, f"{category}보험", f"{category} 보험", f"{category}상품"):
            entries.append(((("category", category),), phrase))
    for synonym, category in CATEGORY_SYNONYMS.items():
        if category in vocabulary.categories:
            entries.append(((("category", category),), synonym))
    for alias, code in _product_aliases(vocabulary).items():
        entries.append(((("product", code),), alias))
    for branch_id, name in vocabulary.branches.items():
        stem = name.removesuffix("지점").strip() or name
        latin = romanise(stem)
        for phrase in {name, stem, f"{stem}점", f"{stem} 지점", f"{stem}영업점", branch_id,
                       latin, f"{latin} branch", f"{latin} office", f"{latin}지점",
                       f"{latin} 지점"}:  # fmt: skip
            entries.append(((("branch", branch_id),), phrase))
    for region in vocabulary.regions:
        latin = romanise(region)
        for phrase in (region, f"{region} 지역", f"{region}지역", f"{region} 지점", latin,
                       f"{latin} area", f"{latin} region"):  # fmt: skip
            entries.append(((("region", region),), phrase))
    for planner_id, name in vocabulary.planners.items():
        for phrase in (name, planner_id):
            entries.append(((("planner", planner_id),), phrase))
    for grade in vocabulary.grades:
        for phrase in (grade, f"{grade}인", f"{grade} 등급", f"{grade}등급"):
            entries.append(((("grade", grade),), phrase))
    for synonym, grade in GRADE_SYNONYMS.items():
        if grade in vocabulary.grades:
            entries.append(((("grade", grade),), synonym))
    return entries


def user_words_for(vocabulary: Vocabulary) -> set[str]:
    words: set[str] = set()
    for product in vocabulary.products.values():
        base = product.name.removeprefix("KB").strip()
        words.update(w for w in base.split() if len(w) > 1)
    for name in vocabulary.branches.values():
        words.add(name)
        words.add(name.removesuffix("지점") or name)
    words.update(vocabulary.planners.values())
    return {w for w in words if not w.isascii()}


_lexicons: dict[tuple, Lexicon] = {}
_lexicon_lock = threading.Lock()


def lexicon_for(vocabulary: Vocabulary) -> Lexicon:
    """Build (once per distinct vocabulary) the phrase table; the cache is bounded to stay small."""
    key = vocabulary.cache_key()
    lexicon = _lexicons.get(key)
    if lexicon is not None:
        return lexicon
    with _lexicon_lock:
        lexicon = _lexicons.get(key)
        if lexicon is None:
            add_user_words(user_words_for(vocabulary))
            entries = [(payloads, phrase) for payloads, phrases in PHRASES for phrase in phrases]
            lexicon = Lexicon(entries + vocabulary_entries(vocabulary))
            if len(_lexicons) >= 16:
                _lexicons.clear()
            _lexicons[key] = lexicon
    return lexicon
